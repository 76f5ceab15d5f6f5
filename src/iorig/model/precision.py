"""How precisely a phase's figure is known, and which A/B comparison a run
belongs to, as stored results."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

AB_SIDES = ("a", "b")


@dataclass(frozen=True)
class PrecisionState:
    """A measure phase that ran ``until: precise``: the interval of its
    per-second median of ``metric`` at the end, and whether it was as narrow
    as asked. ``low``/``high``/``achieved_pct`` are None when the series
    gave no interval (``why`` says why)."""

    metric: Literal["iops", "bytes_per_s"]
    target_pct: float  # asked half-width, % of the median
    min_s: float
    max_s: float
    precise: bool  # the interval reached the target
    seconds: int  # seconds the interval is built on
    median: float
    low: float | None
    high: float | None
    achieved_pct: float | None  # the larger side, % of the median
    confidence: float  # of the interval reported (each look of the rule is stricter)
    batch_s: int | None = None
    why: str = ""

    def as_record(self) -> dict[str, float | int | None]:
        """``show --json``'s ``precision`` of a phase."""
        achieved = None if self.achieved_pct is None else round(self.achieved_pct, 3)
        return {"target_pct": self.target_pct, "achieved_pct": achieved, "seconds": self.seconds}


@dataclass(frozen=True)
class AbLink:
    """A run that is one side of an interleaved A/B comparison (``iorig
    ab``): the comparison's id, this run's side, the other side's run and,
    per round, which side ran first."""

    id: str
    side: Literal["a", "b"]
    peer: str  # the other side's run id
    first: tuple[Literal["a", "b"], ...] = ()  # round r: the side whose phases ran first
