"""SNIA PTS steady state (docs/methodology.md §6): judging a warm-up's rounds.

One mechanism for every backend: ``SteadyWatch`` turns cumulative counters
into per-round mean rates and says when the window holds. Locally it is fed
live from fio's status snapshots, so the warm-up stops as soon as it is
steady; fio servers stream no status, so their warm-up is fed the aggregate
per-second series after the fact (``steady_of_series``) and runs its full
length, the verdict telling where it would have stopped.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from iorig.analyze.stoprule import CounterRates
from iorig.model import SteadyState, check_window
from iorig.scenario.schema import SteadyRule


def evaluate(rounds: Sequence[float], rule: SteadyRule) -> SteadyState:
    """Steady as soon as the latest ``window`` rounds hold (the PTS rule)."""
    max_range, max_slope = rule.max_range / 100, rule.max_slope / 100
    converged = (
        len(rounds) >= rule.window
        and check_window(rounds[-rule.window :], max_range, max_slope).holds
    )
    return SteadyState(
        metric=rule.metric,
        round_s=rule.round,
        window=rule.window,
        max_range=max_range,
        max_slope=max_slope,
        rounds=tuple(rounds),
        converged=converged,
        window_start=len(rounds) - rule.window if converged else None,
    )


class SteadyWatch:
    """Per-round mean rates from cumulative counters, and the verdict: a
    ``StopRule`` (``analyze/stoprule.py``)."""

    def __init__(self, rule: SteadyRule) -> None:
        self.rule = rule
        self.rounds: list[float] = []
        self._rates = CounterRates(rule.metric, rule.round)
        self._steady_at: int | None = None  # rounds when the window first held

    def feed(self, t_ms: int, elapsed_s: float, ios: float, io_bytes: float) -> bool:
        """Counters at ``t_ms``; True once the window holds."""
        rate = self._rates.feed(t_ms, ios, io_bytes)
        if rate is None:
            return self.steady
        self.rounds.append(rate)
        if self._steady_at is None and evaluate(self.rounds, self.rule).converged:
            self._steady_at = len(self.rounds)
        return self.steady

    @property
    def steady(self) -> bool:
        return self._steady_at is not None

    def describe(self) -> str:
        state = self.state
        rounds = len(self.rounds)
        head = f"steady state: {rounds} round{'s' * (rounds != 1)} of {self.rule.round:g} s"
        check = state.check
        if check is None:
            return f"{head}, {self.rule.window} needed for a window"
        verdict = "held" if state.converged else "not yet"
        return (
            f"{head}; window {verdict}: range {check.range_frac:.1%} "
            f"(≤ {self.rule.max_range:g} %), slope {check.slope_frac:.1%} "
            f"(≤ {self.rule.max_slope:g} %)"
        )

    @property
    def state(self) -> SteadyState:
        """Every round measured; converged with the window where it first held."""
        if self._steady_at is None:
            return evaluate(self.rounds, self.rule)
        held = evaluate(self.rounds[: self._steady_at], self.rule)
        return replace(held, rounds=tuple(self.rounds))


def steady_of_series(
    iops: Sequence[float], bytes_per_s: Sequence[float], rule: SteadyRule
) -> SteadyState:
    """The verdict on a per-second series, as if it had been watched live."""
    watch = SteadyWatch(rule)
    watch.feed(0, 0.0, 0.0, 0.0)
    ios = io_bytes = 0.0
    for second, (rate, bandwidth) in enumerate(zip(iops, bytes_per_s, strict=True), start=1):
        ios += rate
        io_bytes += bandwidth
        watch.feed(second * 1000, float(second), ios, io_bytes)
    return watch.state
