"""Long per-second series made drawable without hiding what matters.

A day's phase is 86,400 seconds a trace, and a 16-host run draws 17 traces
of throughput and 17 of latency: three million points is more than a
browser draws comfortably, and more than a chart's width shows. Above
``MAX_POINTS`` a series is cut into buckets of consecutive seconds and each
bucket drawn as its lowest and its highest second, in the order they
happened (an envelope), so a dip or a spike of a single second stays on the
chart at its true depth; a gap (a missing second, a phase boundary) inside
a bucket stays a gap. The chart says when it is drawn this way; the exact
seconds stay in the database and the aggregate's in ``show --json``'s
samples (docs/methodology.md §10).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

MAX_POINTS = 2400  # two a bucket: 1,200 buckets, about a chart's width in pixels


@dataclass(frozen=True)
class Drawn:
    """Which points of a series are drawn."""

    index: np.ndarray  # positions kept, ascending
    bucket: int  # points a bucket holds (1: every point drawn)

    @property
    def reduced(self) -> bool:
        return self.bucket > 1


def envelope(values: Sequence[float | None] | np.ndarray, max_points: int = MAX_POINTS) -> Drawn:
    """The points to draw of ``values`` (None or NaN: no value, a gap)."""
    y = np.array([math.nan if v is None else v for v in values], dtype=float)
    n = y.size
    if n <= max_points:
        return Drawn(np.arange(n), 1)
    bucket = math.ceil(n / (max_points // 2))
    starts = np.arange(0, n, bucket)
    padded = np.full(starts.size * bucket, math.nan)
    padded[:n] = y
    grid = padded.reshape(starts.size, bucket)
    gaps = np.isnan(grid)
    has_value = ~gaps.all(axis=1)
    low = np.where(gaps, math.inf, grid).argmin(axis=1)
    high = np.where(gaps, -math.inf, grid).argmax(axis=1)
    # a gap inside a bucket (not the padding past the end) is kept as one
    inside = gaps & (starts[:, None] + np.arange(bucket) < n)
    first_gap = np.where(inside.any(axis=1), inside.argmax(axis=1), -1)
    kept = [
        (starts + low)[has_value],
        (starts + high)[has_value],
        (starts + first_gap)[first_gap >= 0],
    ]
    return Drawn(np.unique(np.concatenate(kept)), bucket)


def take(values: Sequence, drawn: Drawn) -> list:
    """The drawn points of a sequence that runs beside the series (x, labels)."""
    if not drawn.reduced:
        return list(values)
    return [values[i] for i in drawn.index.tolist()]


def note(drawn: Sequence[Drawn], seconds_per_point: float = 1.0) -> str:
    """What a chart says when any of its series is drawn as an envelope."""
    bucket = max((d.bucket for d in drawn), default=1)
    if bucket <= 1:
        return ""
    span = bucket * seconds_per_point
    return f" (drawn as each {span:,.0f} s's lowest and highest second)"
