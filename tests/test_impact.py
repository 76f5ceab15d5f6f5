"""Impact of an event on a phase's per-second series: baseline, dip, recovery
and lost I/O on series whose answers are known by construction, the merged
(not averaged) p99, the edge cases, and the recovery rule as a statistic over
noisy series."""

from __future__ import annotations

import json
import math
from dataclasses import replace

import numpy as np
import pytest
from tests import builders

from iorig.analyze.impact import Impact, ImpactSettings, impact_of, per_second_p99_ns, phase_impacts
from iorig.model import ALL, EventAction, EventRecord, EventStatus, Metric, Series, histogram
from iorig.model.secondhists import SecondHists

BS = 4096


def _row(*latencies_ns: float) -> np.ndarray:
    return histogram.from_values(np.array(latencies_ns, dtype=np.uint64))


FAST = _row(*[100_000] * 100)  # every I/O at 100 µs: p99 100 µs


def _series(
    iops: np.ndarray | list[float], hist: np.ndarray | None = None, *, t: np.ndarray | None = None
) -> Series:
    iops = np.asarray(iops, dtype=float)
    n = iops.size
    if hist is None:  # every second like FAST, none for a second without completions
        hist = np.array([FAST if x > 0 else histogram.empty() for x in iops], dtype=np.uint64)
        hist = hist.reshape(n, histogram.NR_BINS)
    return Series(
        ALL,
        np.arange(1, n + 1) if t is None else t,
        iops,
        iops * BS,
        np.full(n, 1e5),
        SecondHists.from_dense(hist),
    )


def _levels(n: int, base: float = 1000.0, **spans: float) -> np.ndarray:
    """``n`` seconds at ``base``; spans like s21_30=400 set seconds 21..30."""
    out = np.full(n, base)
    for key, level in spans.items():
        first, last = (int(x) for x in key[1:].split("_"))
        out[first - 1 : last] = level
    return out


def _bin(ns: float) -> float:
    """The value fio's histogram reports for a latency (its bin's value)."""
    return float(histogram.BIN_VALUES_NS[histogram.bin_index(np.array([ns]))[0]])


# ---------------------------------------------------------------- known answers


def test_drop_to_40_pct_for_ten_seconds():
    s = _series(_levels(60, s21_30=400))
    r = impact_of(s, Metric.IOPS, 20.0, errors=3)
    assert r.baseline == 1000 and r.dip_pct == pytest.approx(40.0) and r.dip_at_s == 1.0
    assert r.recovered and r.recovery_s == 10.0 and r.observed_s == 40.0
    assert r.lost_ios == pytest.approx(10 * 600) and r.lost_bytes == pytest.approx(10 * 600 * BS)
    assert r.baseline_p99_ns == r.worst_p99_ns == _bin(100_000)
    assert (r.errors, r.metric, r.note) == (3, Metric.IOPS, "")


def test_event_within_a_second_counts_that_second_after():
    # At 20.4 the second ending at 21 is the event's; recovery is from 20.4 to 30.
    r = impact_of(_series(_levels(60, s21_30=400)), Metric.IOPS, 20.4)
    assert r.baseline == 1000 and r.dip_at_s == pytest.approx(0.6)
    assert r.recovery_s == 9.6 and r.lost_ios == pytest.approx(6000)


def test_never_recovered_integrates_to_the_end():
    r = impact_of(_series(_levels(32, s21_32=400)), Metric.IOPS, 20.0)
    assert r.recovery_s is None and not r.recovered and r.observed_s == 12.0
    assert r.lost_ios == pytest.approx(12 * 600) and r.dip_pct == pytest.approx(40.0)
    assert "12.0 s observed" in r.note


def test_back_in_band_but_not_for_settle_s_is_not_recovered():
    # Back at 1000 for the last 5 s only: "for good" needs 10.
    s = _series(_levels(35, s21_30=400))
    assert not impact_of(s, Metric.IOPS, 20.0).recovered
    r = impact_of(s, Metric.IOPS, 20.0, ImpactSettings(settle_s=5))
    assert r.recovered and r.recovery_s == 10.0


def test_recovery_is_for_good_not_the_first_return():
    # Back for 5 s, down again for 3, then back: recovered from second 34.
    r = impact_of(_series(_levels(60, s21_25=400, s31_33=400)), Metric.IOPS, 20.0)
    assert r.recovery_s == 13.0 and r.lost_ios == pytest.approx(8 * 600)


def test_never_left_the_band_recovers_at_zero():
    r = impact_of(_series(_levels(60, s21_22=950)), Metric.IOPS, 20.0)
    assert r.recovery_s == 0.0 and r.recovered and r.lost_ios == 0
    assert r.dip_pct == pytest.approx(95.0) and r.worst_p99_ns == _bin(100_000)
    # a tighter band sees the 5 % dip
    narrow = ImpactSettings(tolerance_pct=2)
    tight = impact_of(_series(_levels(60, s21_22=950)), Metric.IOPS, 20.0, narrow)
    assert tight.recovery_s == 2.0 and tight.lost_ios == pytest.approx(100)


def test_a_second_without_completions():
    iops = _levels(60, s21_21=0, s22_25=500)
    slow = _row(*[1_000_000] * 95, *[8_000_000] * 5)  # p99 8 ms
    hist = np.array([slow if 22 <= i + 1 <= 25 else FAST for i in range(60)], dtype=np.uint64)
    hist[20] = 0  # second 21: nothing completed
    s = _series(iops, hist)
    p99 = per_second_p99_ns(s)
    assert math.isnan(p99[20]) and p99[21] == _bin(8_000_000) and p99[0] == _bin(100_000)
    r = impact_of(s, Metric.IOPS, 20.0)
    assert r.dip_pct == 0.0 and r.dip_at_s == 1.0 and r.recovery_s == 5.0
    assert r.lost_ios == pytest.approx(1000 + 4 * 500) and r.worst_p99_ns == _bin(8_000_000)


def test_worst_p99_stops_at_recovery_unless_never_recovered():
    hist = np.array([FAST] * 60, dtype=np.uint64)
    hist[24] = _row(*[2_000_000] * 100)  # second 25, during the dip
    hist[49] = _row(*[50_000_000] * 100)  # second 50, long after recovery
    r = impact_of(_series(_levels(60, s21_30=400), hist), Metric.IOPS, 20.0)
    assert r.worst_p99_ns == _bin(2_000_000)
    never = impact_of(_series(_levels(60, s21_60=400), hist), Metric.IOPS, 20.0)
    assert never.worst_p99_ns == _bin(50_000_000)


def test_baseline_p99_merges_counts_not_percentiles():
    # Three seconds all at 100 µs, one with 2 % at 5 ms: that second's p99 is
    # 5 ms, but 2 slow I/Os of 400 are 0.5 %: the baseline's p99 is 100 µs.
    hist = np.array([FAST] * 20, dtype=np.uint64)
    hist[9] = _row(*[100_000] * 98, 5_000_000, 5_000_000)
    r = impact_of(
        _series(np.full(20, 1000.0), hist), Metric.IOPS, 10.0, ImpactSettings(baseline_s=4)
    )
    assert per_second_p99_ns(_series(np.full(20, 1000.0), hist))[9] == _bin(5_000_000)
    assert r.baseline_p99_ns == _bin(100_000)
    mean_of_p99s = (3 * _bin(100_000) + _bin(5_000_000)) / 4
    assert r.baseline_p99_ns < mean_of_p99s / 10


def test_bytes_headline_still_loses_ios_against_the_iops_baseline():
    s = _series(_levels(60, s21_30=400))
    r = impact_of(s, Metric.BYTES_PER_S, 20.0)
    assert r.baseline == 1000 * BS and r.metric is Metric.BYTES_PER_S
    assert r.lost_ios == pytest.approx(6000) and r.lost_bytes == pytest.approx(6000 * BS)


# ---------------------------------------------------------------- baseline window


def test_baseline_needs_three_seconds():
    s = _series(_levels(30, s4_30=300))
    r = impact_of(s, Metric.IOPS, 2.5)
    assert r.baseline is None and r.note == "only 2 s before the event; baseline needs 3"
    assert r.dip_pct is r.recovery_s is r.lost_ios is r.lost_bytes is None and not r.recovered
    assert r.observed_s == 27.5 and r.dip_at_s == 1.5
    assert impact_of(s, Metric.IOPS, 3.0).baseline == 1000


def test_baseline_is_the_median_of_the_last_baseline_s_seconds():
    iops = _levels(60, 2000.0, s26_30=1000, s28_28=50, s31_60=1000)  # one odd second
    assert (
        impact_of(_series(iops), Metric.IOPS, 30.0, ImpactSettings(baseline_s=5)).baseline == 1000
    )
    # ten seconds: five at 2000, four at 1000, one at 50
    assert impact_of(_series(iops), Metric.IOPS, 30.0).baseline == 1500


def test_a_cut_series_keeps_to_the_seconds_it_has():
    t = np.r_[np.arange(1, 21), np.arange(26, 41)]  # seconds 21..25 cut
    s = _series(_levels(35, s21_23=400), t=t)  # 400 at t 26..28
    r = impact_of(s, Metric.IOPS, 20.0, ImpactSettings(settle_s=3))
    assert r.recovery_s == 8.0 and r.lost_ios == pytest.approx(3 * 600)


# ---------------------------------------------------------------- edge cases


def test_empty_series():
    r = impact_of(_series([]), Metric.IOPS, 5.0)
    assert (r.baseline, r.dip_pct, r.recovery_s, r.observed_s, r.lost_ios) == (
        None,
        None,
        None,
        0.0,
        None,
    )
    assert "baseline needs 3" in r.note and "no seconds after the event" in r.note


def test_event_after_the_last_second():
    r = impact_of(_series(np.full(20, 1000.0)), Metric.IOPS, 25.0)
    assert r.baseline == 1000 and r.observed_s == 0 and not r.recovered
    assert r.dip_pct is None and r.note == "no seconds after the event"


def test_event_before_the_first_second():
    r = impact_of(_series(_levels(30, s1_5=200)), Metric.IOPS, -0.3)
    assert r.baseline is None and r.observed_s == 30.0 and r.dip_at_s == pytest.approx(1.3)


def test_zero_baseline():
    r = impact_of(_series(_levels(40, s1_20=0)), Metric.IOPS, 20.0)
    assert r.baseline == 0 and r.dip_pct is None and r.recovery_s is None
    assert "baseline is zero" in r.note and r.lost_ios == 0


def test_nan_latency_and_no_histograms():
    iops = _levels(40, s21_25=0)
    s = Series(
        ALL,
        np.arange(1, 41),
        iops,
        iops * BS,
        np.full(40, np.nan),
        SecondHists.empty(),
    )
    assert np.isnan(per_second_p99_ns(s)).all() and per_second_p99_ns(s).size == 40
    r = impact_of(s, Metric.IOPS, 20.0)
    assert r.baseline_p99_ns is None and r.worst_p99_ns is None and r.recovery_s == 5.0


# ---------------------------------------------------------------- settings, output


@pytest.mark.parametrize("name", ["baseline_s", "tolerance_pct", "settle_s"])
@pytest.mark.parametrize("bad", [0, -1.0, float("nan"), float("inf")])
def test_settings_must_be_positive(name: str, bad: float):
    with pytest.raises(ValueError, match=name):
        ImpactSettings(**{name: bad})


def test_baseline_window_must_hold_the_seconds_a_baseline_needs():
    with pytest.raises(ValueError, match="baseline_s"):
        ImpactSettings(baseline_s=2)
    assert ImpactSettings(baseline_s=3, tolerance_pct=0.5, settle_s=1).settle_s == 1


def test_as_dict_is_json_ready():
    r = impact_of(_series(_levels(32, s21_32=400.4)), Metric.IOPS, 20.0)
    d = r.as_dict()
    json.dumps(d)
    assert set(d) == {f for f in Impact.__dataclass_fields__}
    assert d["metric"] == "iops" and d["recovery_s"] is None and d["recovered"] is False
    assert d["dip_pct"] == 40.0 and d["lost_ios"] == 7195 and isinstance(d["lost_ios"], int)
    assert isinstance(d["baseline_p99_ns"], int)


# ---------------------------------------------------------------- the rule as a statistic


def _noisy(seed: int, sigma: float, tau_s: float) -> tuple[Series, float]:
    """1000 IOPS, event at 30: down to 400 until 40, then back exponentially
    (time constant ``tau_s``). Each second is the mean of that curve over the
    second, as fio reports it, times 1 + N(0, sigma). Returns the series and
    the constructed recovery: when the curve enters ±10 % (600·e^(-x/τ) = 100)."""
    t = np.arange(1, 81, dtype=float)
    level = np.where(t <= 30, 1000.0, 400.0)
    up = t > 40
    x = t[up] - 40
    level[up] = 1000 - 600 * tau_s * (np.exp(-(x - 1) / tau_s) - np.exp(-x / tau_s))
    noise = 1 + sigma * np.random.default_rng(seed).standard_normal(t.size)
    return _series(level * noise), 40 + tau_s * math.log(6) - 30


@pytest.mark.parametrize(
    ("sigma", "at_least"),
    # ±3 % noise (σ 1.5 %): right 99.9 % of the time over 3,000 seeds. At σ 3 % a
    # second strays out of ±10 % about once a few hundred, restarting the 10 s
    # settle count (a late recovery, as the rule says): right 93 % of the time.
    [(0.015, 0.95), (0.03, 0.85)],
)
def test_recovery_within_a_second_of_the_constructed_one(sigma: float, at_least: float):
    right = 0
    for seed in range(200):
        s, truth = _noisy(seed, sigma, tau_s=1.0)
        r = impact_of(s, Metric.IOPS, 30.0)
        right += r.recovery_s is not None and abs(r.recovery_s - truth) <= 1.0
    assert right / 200 >= at_least


# ---------------------------------------------------------------- a phase's events


def _event(action: EventAction, started_at: float, status: EventStatus = EventStatus.DONE):
    return EventRecord(
        10.0, action, "h1", status, started_at, started_at + 0.1 if started_at else 0
    )


def test_phase_impacts():
    per_second = _levels(60, s21_30=400)
    agg = replace(builders.scope(per_second), errors=2)
    events = (
        _event(EventAction.STOP_HOST, 1020.0),
        _event(EventAction.THROTTLE, 0.0, EventStatus.SKIPPED),
        _event(EventAction.START_HOST, 1030.0),
        _event(EventAction.COMMAND, 1045.0, EventStatus.FAILED),  # happened: measured
    )
    phase = builders.phase("p", per_second, scopes=(agg,), started_at=1000.0, events=events)
    out = phase_impacts(phase)
    assert [e for e, _ in out] == list(events)
    stop, skipped, start, command = (i for _, i in out)
    assert skipped is None and start is None
    assert stop is not None and stop.recovery_s == 10.0 and stop.errors == 2
    assert stop.lost_ios == pytest.approx(6000)
    assert command is not None and command.recovery_s == 0.0 and command.baseline == 1000

    no_all = replace(agg, series={})
    assert [i for _, i in phase_impacts(replace(phase, scopes=(no_all,)))] == [None] * 4
    assert [i for _, i in phase_impacts(replace(phase, scopes=()))] == [None] * 4
