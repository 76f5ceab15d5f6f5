"""Long series are drawn as envelopes that keep every dip, spike and gap."""

from __future__ import annotations

import math

import numpy as np

from iorig.report.tables.downsample import MAX_POINTS, envelope, note, take

DAY_S = 86_400


def _day(seed: int = 1) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return 20_000 * (1 + 0.05 * rng.standard_normal(DAY_S))


def test_a_short_series_is_drawn_whole():
    drawn = envelope([1.0, None, 3.0])
    assert drawn.index.tolist() == [0, 1, 2] and not drawn.reduced
    assert note([drawn]) == ""


def test_a_days_dip_and_spike_stay_at_their_depth_and_height():
    y = _day()
    hour_13 = 13 * 3600
    y[hour_13 : hour_13 + 5] = 2_000  # a 5-second dip to a tenth
    y[40_000] = 90_000  # a one-second spike
    drawn = envelope(y)
    assert drawn.reduced and drawn.index.size <= MAX_POINTS
    assert (np.diff(drawn.index) > 0).all()  # in the order they happened
    kept = y[drawn.index]
    assert kept.min() == 2_000 and kept.max() == 90_000
    dip_at = drawn.index[kept == 2_000]
    assert dip_at.size and hour_13 <= dip_at.min() <= hour_13 + 4
    # every bucket's lowest and highest second is among the drawn ones
    for start in range(0, DAY_S, drawn.bucket):
        chunk = y[start : start + drawn.bucket]
        assert chunk.min() in kept and chunk.max() in kept
    assert "72 s's lowest and highest" in note([drawn])


def test_a_gap_inside_a_bucket_stays_a_gap():
    y: list[float | None] = list(_day(2))
    y[50_000] = None  # a missing second (or the break between phases)
    drawn = envelope(y)
    kept = take(y, drawn)
    assert None in kept
    at = kept.index(None)
    assert drawn.index[at] == 50_000
    # no value is drawn from the wrong place: the values are the series' own
    assert all(v is None or v == y[i] for v, i in zip(kept, drawn.index.tolist(), strict=True))


def test_a_series_of_nothing_but_gaps_keeps_one_point_a_bucket():
    drawn = envelope([math.nan] * 10_000)
    assert 0 < drawn.index.size <= MAX_POINTS // 2


def test_the_reports_timeline_of_a_day_draws_the_envelope_and_says_so():
    from tests import builders

    from iorig.report.tables.timeline import build_timeline
    from iorig.report.writers.timelinechart import timeline_chart

    y = _day(3)
    y[13 * 3600 : 13 * 3600 + 5] = 2_000
    stored = builders.stored("0123456789ab", None, [builders.phase("randread", y)])
    chart = timeline_chart(build_timeline(stored), "t", "the run")
    throughput = chart["data"][0]
    assert len(throughput["x"]) <= MAX_POINTS and min(throughput["y"]) == 2_000
    assert "lowest and highest second" in chart["layout"]["title"]["text"]
