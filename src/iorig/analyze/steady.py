"""SNIA PTS steady state (METHODOLOGY §6) on per-round means.

A window of the last ``window`` rounds is steady when its range (max − min)
is at most ``max_range`` of the window mean and the least-squares line
through it moves by at most ``max_slope`` of the mean across the window
(slope × (window − 1)).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from iorig.fio.status import Snapshot
from iorig.scenario import SteadyRule


@dataclass(frozen=True)
class WindowCheck:
    holds: bool
    mean: float
    range_frac: float  # (max - min) / mean
    slope_frac: float  # |slope| * (n - 1) / mean


def check_window(values: list[float], max_range: float, max_slope: float) -> WindowCheck:
    data = np.asarray(values, dtype=float)
    mean = float(data.mean())
    if mean <= 0:
        return WindowCheck(False, mean, float("inf"), float("inf"))
    x = np.arange(data.size, dtype=float)
    slope = float(np.polyfit(x, data, 1)[0]) if data.size > 1 else 0.0
    range_frac = float(data.max() - data.min()) / mean
    slope_frac = abs(slope) * (data.size - 1) / mean
    return WindowCheck(range_frac <= max_range and slope_frac <= max_slope, mean, range_frac,
                       slope_frac)  # fmt: skip


@dataclass(frozen=True)
class SteadyState:
    metric: str
    round_s: float
    window: int
    max_range: float  # fractions, e.g. 0.2
    max_slope: float
    rounds: tuple[float, ...]
    converged: bool
    window_start: int | None  # index of the window's first round when converged
    check: WindowCheck | None  # of the last window evaluated


def evaluate(rounds: list[float], rule: SteadyRule) -> SteadyState:
    """Steady as soon as the latest ``window`` rounds hold (the PTS rule)."""
    max_range, max_slope = rule.max_range / 100, rule.max_slope / 100
    check = None
    if len(rounds) >= rule.window:
        check = check_window(rounds[-rule.window :], max_range, max_slope)
    converged = bool(check and check.holds)
    return SteadyState(
        metric=rule.metric,
        round_s=rule.round,
        window=rule.window,
        max_range=max_range,
        max_slope=max_slope,
        rounds=tuple(rounds),
        converged=converged,
        window_start=len(rounds) - rule.window if converged else None,
        check=check,
    )


class RoundTracker:
    """Turns fio's cumulative status snapshots into per-round mean rates."""

    def __init__(self, rule: SteadyRule) -> None:
        self.rule = rule
        self.rounds: list[float] = []
        self._start: Snapshot | None = None

    def feed(self, snap: Snapshot) -> bool:
        """Add a snapshot; True when it completed a round."""
        if self._start is None:
            self._start = snap
            return False
        elapsed_ms = snap.t_ms - self._start.t_ms
        # snapshots arrive about once a second; accept a round within half a second
        if elapsed_ms < self.rule.round * 1000 - 500:
            return False
        if self.rule.metric == "iops":
            amount = snap.ios - self._start.ios
        else:
            amount = snap.io_bytes - self._start.io_bytes
        self.rounds.append(amount / (elapsed_ms / 1000))
        self._start = snap
        return True
