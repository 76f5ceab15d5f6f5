"""SNIA PTS steady state (docs/methodology.md §6) as a result: the rounds a warm-up
measured and whether their window held.

A window of ``window`` rounds is steady when its range (max − min) is at
most ``max_range`` of the window mean and the least-squares line through it
moves by at most ``max_slope`` of the mean across the window
(slope × (window − 1)).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np


@dataclass(frozen=True)
class WindowCheck:
    holds: bool
    mean: float
    range_frac: float  # (max - min) / mean
    slope_frac: float  # |slope| * (n - 1) / mean


def check_window(
    values: list[float] | tuple[float, ...], max_range: float, max_slope: float
) -> WindowCheck:
    data = np.asarray(values, dtype=float)
    mean = float(data.mean())
    if mean <= 0:
        return WindowCheck(False, mean, float("inf"), float("inf"))
    x = np.arange(data.size, dtype=float)
    slope = float(np.polyfit(x, data, 1)[0]) if data.size > 1 else 0.0
    range_frac = float(data.max() - data.min()) / mean
    slope_frac = abs(slope) * (data.size - 1) / mean
    return WindowCheck(
        range_frac <= max_range and slope_frac <= max_slope, mean, range_frac, slope_frac
    )


@dataclass(frozen=True)
class SteadyState:
    metric: str  # "iops" or "bytes_per_s"
    round_s: float
    window: int
    max_range: float  # fractions, e.g. 0.2
    max_slope: float
    rounds: tuple[float, ...]
    converged: bool
    window_start: int | None  # index of the window's first round when converged

    @cached_property
    def check(self) -> WindowCheck | None:
        """The window that held, or else the last one (None with too few rounds)."""
        if self.window_start is not None:
            start = self.window_start
        elif len(self.rounds) >= self.window:
            start = len(self.rounds) - self.window
        else:
            return None
        window = self.rounds[start : start + self.window]
        return check_window(window, self.max_range, self.max_slope)
