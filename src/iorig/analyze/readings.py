"""Readings of one search point measured more than once: the noise, or a glitch?

A search re-measures a point (a knee's step that stopped paying, its best
candidates) and used to pool every reading. One glitch (a reading far off,
for whatever reason: a throttle slice, a background flush) then moved the
point halfway and, with it, the knee. Here each reading is judged against
the noise of its own seconds: its level ± the half-width of its median
second's interval (``precision.median_interval``: batch means allowing for
autocorrelation, its coverage tested in tests/test_precision.py), none
when its seconds are too few (or too correlated) for one:

* two readings **agree** when their bands overlap (or their levels are
  within what one logged second is known to), **disagree** when they do
  not, and are **unknown** when either is too short for a band;
* a reading is a **glitch** when it disagrees with every other reading
  while at least two others all agree with one another: it is left out and
  named, never pooled; so is a reading with seconds disturbed inside it
  (beyond ``FENCE`` robust standard deviations of its median: a stall, a
  burst) when two undisturbed readings agree, and with fewer the point is
  unsettled until another reading settles it. Disturbed seconds never widen
  a band: it is the undisturbed seconds' interval;
* readings that disagree with no such consensus are **unsettled**: another
  reading may settle them (the search measures again, a bounded number of
  times); readings whose noise is unknown cannot be settled by more of the
  same, and the point is uncertain between its lowest and highest reading.

The error rates of these rules on simulated series are measured in
tests/test_readings.py.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import combinations
from typing import Literal

import numpy as np

from iorig.analyze.precision import median_interval
from iorig.analyze.stats import RESOLUTION

CONFIDENCE = 0.95  # of each reading's band


@dataclass(frozen=True)
class Reading:
    """One measurement of a point: its level and the band its seconds allow."""

    repeat: int  # its place among the point's runs, from 0
    level: float
    low: float | None  # None: too few seconds for a band
    high: float | None
    seconds: int
    why: str = ""  # why there is no band
    disturbed: int = 0  # seconds beyond the fence, left out of the band (not the level)

    @property
    def known(self) -> bool:
        return self.low is not None and self.high is not None

    @property
    def half_width_pct(self) -> float | None:
        if self.low is None or self.high is None or self.level <= 0:
            return None
        return max(self.level - self.low, self.high - self.level) / self.level * 100


FENCE = 6.0  # robust standard deviations from the median: beyond, a second is disturbed


def undisturbed(per_second: Sequence[float]) -> np.ndarray:
    """The seconds within ``FENCE`` robust standard deviations (1.4826 ×
    their median absolute deviation, at least what one logged second is
    known to) of their median. A stretch disturbed inside a reading (a
    capped device's 30000, 30000, 27587, 20000, 24024, 30000 …) is outside
    it and cannot widen the reading's band. The median absolute deviation of
    30 correlated seconds is a rough scale: at 4 it flagged 9 % of steady
    triples (30 s, lag-1 0.5, 3 % per second), at 6 9 of 4,000, while a
    stretch a third low is always beyond it (tests/test_readings.py)."""
    values = np.asarray(per_second, dtype=float)
    values = values[np.isfinite(values)]
    if not values.size:
        return values
    median = float(np.median(values))
    scale = max(1.4826 * float(np.median(np.abs(values - median))), RESOLUTION * abs(median))
    return values[np.abs(values - median) <= FENCE * scale * (1 + 1e-9)]


def reading(
    repeat: int, level: float, per_second: Sequence[float], confidence: float = CONFIDENCE
) -> Reading:
    """A reading's band: its level ± the half-width of its median second's
    interval (its larger side, as ``precision.describe`` reports it): a
    quantile interval comes out lopsided by chance, and its narrow side
    called 0.9 % of pairs of steady 30 s runs apart (seconds with lag-1
    correlation 0.5), the ± 0.1 %. The interval is of the undisturbed
    seconds: two disturbed seconds once widened a reading's band to
    ± 24.6 %, and the reading they had moved "agreed" with every clean one
    and was pooled. The level stays what the reading measured."""
    kept = undisturbed(per_second)
    disturbed = int(np.isfinite(np.asarray(per_second, dtype=float)).sum()) - kept.size
    interval = median_interval(kept, confidence)
    if interval.half_width_pct is None or not interval.median > 0:
        why = interval.why or "no per-second figures"
        return Reading(repeat, level, None, None, interval.seconds, why, disturbed)
    half = level * interval.half_width_pct / 100
    return Reading(repeat, level, level - half, level + half, interval.seconds, disturbed=disturbed)


def agree(a: Reading, b: Reading) -> bool | None:
    """Whether two readings agree within their noise; None when unknown."""
    top = max(abs(a.level), abs(b.level))
    if abs(a.level - b.level) <= RESOLUTION * top:
        return True
    if a.low is None or a.high is None or b.low is None or b.high is None:
        return None
    return a.low <= b.high and b.low <= a.high


State = Literal["agree", "glitch", "disagree", "unknown"]


@dataclass(frozen=True)
class Settled:
    """What a point's readings say together."""

    readings: tuple[Reading, ...]  # in the order measured
    kept: tuple[int, ...]  # repeats pooled for the point
    left_out: tuple[int, ...]  # repeats left out as glitches
    # agree: every pair agrees; glitch: the left-out ones disagree with every
    # other reading, the kept ones all agree; disagree: they disagree beyond
    # their noise with no such consensus (another reading may settle it);
    # unknown: they differ and the noise of some is unknown
    state: State

    @property
    def settled(self) -> bool:
        return self.state in ("agree", "glitch")

    @property
    def kept_readings(self) -> tuple[Reading, ...]:
        return tuple(r for r in self.readings if r.repeat in self.kept)

    @property
    def lowest(self) -> Reading:
        return min(self.kept_readings, key=lambda r: r.level)

    @property
    def highest(self) -> Reading:
        return max(self.kept_readings, key=lambda r: r.level)


def settle(readings: Sequence[Reading]) -> Settled:
    """Which readings of one point to pool, and whether they settle it."""
    if not readings:
        raise ValueError("settle needs at least one reading")
    every = tuple(readings)
    repeats = tuple(r.repeat for r in every)
    pairs = {(a.repeat, b.repeat): agree(a, b) for a, b in combinations(every, 2)}
    verdict = pairs | {(b, a): v for (a, b), v in pairs.items()}
    disturbed = tuple(r.repeat for r in every if r.disturbed)
    if disturbed and len(every) > 1 and len(disturbed) < len(every):
        # seconds beyond the fence (undisturbed): a stall or a burst inside
        # the reading, not its noise; two clean readings that agree are the
        # point, fewer are not yet (another reading may settle it)
        clean = tuple(r for r in repeats if r not in disturbed)
        if len(clean) >= 2 and all(verdict[(a, b)] for a, b in combinations(clean, 2)):
            return Settled(every, clean, disturbed, "glitch")
        if len(clean) < 2:
            return Settled(every, repeats, (), "disagree")
    if all(v is True for v in verdict.values()):
        return Settled(every, repeats, (), "agree")
    if any(v is None for v in verdict.values()):
        return Settled(every, repeats, (), "unknown")
    odd = tuple(r for r in repeats if all(verdict[(r, o)] is False for o in repeats if o != r))
    rest = tuple(r for r in repeats if r not in odd)
    if odd and len(rest) >= 2 and all(verdict[(a, b)] for a, b in combinations(rest, 2)):
        return Settled(every, rest, odd, "glitch")
    return Settled(every, repeats, (), "disagree")
