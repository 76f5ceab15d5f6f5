"""One live stop-rule interface for the steady-state and the precision
watchers, with one way of turning fio's cumulative counters into rates."""

from __future__ import annotations

import pytest

from iorig.analyze.precision import PrecisionWatch
from iorig.analyze.steady import SteadyWatch
from iorig.analyze.stoprule import CounterRates, StopRule
from iorig.scenario.schema import SteadyRule


def test_counter_rates_close_a_period_at_the_first_snapshot_near_its_end():
    rates = CounterRates("iops", 1.0)
    assert rates.feed(0, 0, 0) is None  # the first snapshot opens the period
    assert rates.feed(400, 400, 0) is None  # too soon: the period stays open
    assert rates.feed(1000, 1000, 0) == pytest.approx(1000.0)
    assert rates.feed(2200, 2500, 0) == pytest.approx(1500 / 1.2)  # late: its own length
    bytes_rates = CounterRates("bytes_per_s", 2.0)
    bytes_rates.feed(0, 0, 0)
    assert bytes_rates.feed(1400, 7, 1 << 20) is None  # a 2 s period needs 1.5 s at least
    assert bytes_rates.feed(1600, 8, 1 << 21) == pytest.approx((1 << 21) / 1.6)
    bytes_rates.reset()
    assert bytes_rates.feed(5000, 9, 1 << 22) is None  # reset: this one opens anew


def _rules() -> list[StopRule]:
    return [
        SteadyWatch(SteadyRule(metric="iops", round=1, window=3)),
        PrecisionWatch(5.0, 10, 120, "iops"),
    ]


def test_both_watchers_read_the_same_rates_through_one_interface():
    """Fed the same snapshots (jittered around each second), the steady
    watch's rounds and the precision watch's series are the same rates."""
    rules = _rules()
    t_ms, ios = 0, 0.0
    stops = []
    for second in range(30):
        t_ms = second * 1000 + (37 if second % 2 else -41) * (second > 0)
        ios = 2000.0 * t_ms / 1000
        stops.append([rule.feed(t_ms, t_ms / 1000, ios, ios * 4096) for rule in rules])
    steady, precise = rules
    assert isinstance(steady, SteadyWatch) and isinstance(precise, PrecisionWatch)
    assert steady.rounds == pytest.approx([2000.0] * 29)
    # the precision watch skips the phase's first instant (no ramp measured)
    assert precise.series == pytest.approx(steady.rounds[1:])
    assert stops[3][0] and not stops[2][0]  # three steady rounds: the window holds
    assert any(s[1] for s in stops)  # a constant rate is known to ±5 % soon enough
