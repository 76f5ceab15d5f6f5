"""Figures of one per-second series (X-Ray's median, maximum and minimum)
and of one figure across hosts (how evenly they performed)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class SeriesStats:
    """Statistics of one series of values (e.g. IOPS each second); NaN
    values (seconds without completions) are left out."""

    n: int
    median: float
    maximum: float
    minimum: float
    mean: float
    stdev: float

    @property
    def cov(self) -> float:
        """Coefficient of variation (stdev / mean); NaN when undefined."""
        return self.stdev / self.mean if self.mean and self.n > 1 else float("nan")


def series_stats(values: np.ndarray | Sequence[float]) -> SeriesStats:
    values = np.asarray(values, dtype=float)
    values = values[~np.isnan(values)]
    if values.size == 0:
        nan = float("nan")
        return SeriesStats(0, nan, nan, nan, nan, nan)
    return SeriesStats(
        n=int(values.size),
        median=float(np.median(values)),
        maximum=float(values.max()),
        minimum=float(values.min()),
        mean=float(values.mean()),
        stdev=float(values.std(ddof=1)) if values.size > 1 else 0.0,
    )


@dataclass(frozen=True)
class Spread:
    """How evenly hosts performed: the slowest, the fastest and the
    coefficient of variation of their figures."""

    slowest: str
    fastest: str
    cov: float


def spread(values: Mapping[str, float]) -> Spread | None:
    """The spread of per-host figures (None with fewer than two known ones)."""
    finite = {h: v for h, v in values.items() if not math.isnan(v)}
    if len(finite) < 2:
        return None
    stats = series_stats(list(finite.values()))
    return Spread(
        min(finite, key=finite.__getitem__), max(finite, key=finite.__getitem__), stats.cov
    )
