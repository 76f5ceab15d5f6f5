"""Stored search runs (sweep, knee, load-point curve) turned into the inputs
of their analyses. Pure: reads StoredRun, returns plain data.

Every search point is a measured phase with its coordinates in
``PhaseResult.point``; repeats of a point (``--repeat``, or a knee's
re-measurements) are pooled by ``compare.run_phases``: throughput per
repeat kept, latency histograms merged.
"""

from __future__ import annotations

from dataclasses import dataclass

from iorig.analyze.compare import RunPhase, run_phases
from iorig.store import StoredRun


@dataclass(frozen=True)
class SweepPoint:
    coords: dict[str, str]  # parameter -> value text, e.g. {"bs": "4KiB", "rw": "read"}
    phase: RunPhase

    @property
    def test(self) -> str:
        """The scenario's phase this point ran ("" when the scenario measures one phase)."""
        name = self.phase.name
        return name.split(":", 1)[0] if ":" in name else ""


@dataclass(frozen=True)
class Sweep:
    axes: tuple[str, ...]  # swept parameters, the first varying slowest
    points: tuple[SweepPoint, ...]

    @property
    def x_axis(self) -> str:
        """The parameter charts put on the x axis: the first one swept."""
        return self.axes[0]

    def groups(self) -> dict[str, list[SweepPoint]]:
        """Points by the values of every other axis (e.g. "rw=read"), in order."""
        out: dict[str, list[SweepPoint]] = {}
        for p in self.points:
            key = ",".join(f"{a}={p.coords.get(a, '?')}" for a in self.axes[1:]) or "all"
            out.setdefault(key, []).append(p)
        return out


def search_kind(stored: StoredRun) -> str | None:
    kind = stored.run.search.get("kind") if stored.run.search else None
    return str(kind) if kind else None


def sweep_of(stored: StoredRun) -> Sweep | None:
    """The sweep in a run, or None when the run is not a sweep."""
    grid = (stored.run.search or {}).get("grid")
    if not grid:
        return None
    axes = tuple(grid)
    points = tuple(
        SweepPoint({a: str(phase.point[a]) for a in axes if a in phase.point}, phase)
        for phase in run_phases(stored).values()
        if phase.point and all(a in phase.point for a in axes)
    )
    return Sweep(axes, points)
