"""The live stop rules of a running phase, one interface for both: a
steady-state warm-up stops once its window holds (``steady.SteadyWatch``),
a precise measurement once its median is known well enough
(``precision.PrecisionWatch``). Both read rates from fio's cumulative
status counters the same way (``CounterRates``)."""

from __future__ import annotations

from typing import Protocol

# status snapshots arrive about once a second, not on the second: a period
# is closed by the first snapshot less than this short of it
SNAPSHOT_SLACK_MS = 500


class StopRule(Protocol):
    def feed(self, t_ms: int, elapsed_s: float, ios: float, io_bytes: float) -> bool:
        """fio's cumulative counters at ``t_ms``, ``elapsed_s`` into the
        phase; True once the phase may stop."""
        ...

    def describe(self) -> str:
        """Where the rule stands, in words (the live view's)."""
        ...


class CounterRates:
    """Mean rates over periods of ``period_s`` from cumulative counters: the
    I/Os or the bytes (``metric``) done since the period's first snapshot,
    per second."""

    def __init__(self, metric: str, period_s: float) -> None:
        self.metric = metric
        self.period_ms = period_s * 1000
        self._start: tuple[int, float, float] | None = None  # t_ms, ios, bytes

    def reset(self) -> None:
        """Start again at the next snapshot (what came before is not measured)."""
        self._start = None

    def feed(self, t_ms: int, ios: float, io_bytes: float) -> float | None:
        """The rate of the period this snapshot closes, or None."""
        if self._start is None:
            self._start = (t_ms, ios, io_bytes)
            return None
        t0, ios0, bytes0 = self._start
        elapsed_ms = t_ms - t0
        if elapsed_ms <= self.period_ms - SNAPSHOT_SLACK_MS:
            return None
        amount = ios - ios0 if self.metric == "iops" else io_bytes - bytes0
        self._start = (t_ms, ios, io_bytes)
        return amount / (elapsed_ms / 1000)
