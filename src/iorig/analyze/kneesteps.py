"""A knee search's points from its stored phases: every reading of a
concurrency judged against its noise (``analyze.readings``) before it is
pooled, what fio really kept in flight, and how uncertain readings that
cannot be settled leave the knee. The search (``run.searches``) decides
from these while it runs and the analysis recomputes them from the store,
so both see the same points."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from itertools import product

import numpy as np

from iorig.analyze.compare import RunPhase, pool_phases
from iorig.analyze.knee import KneeRule, Point, find_knee, stops_on_throughput
from iorig.analyze.readings import Settled, reading, settle
from iorig.model import ALL, PhaseKind, PhaseResult
from iorig.model.depth import kept_iodepth


def point_of(phase: RunPhase) -> Point | None:
    """A knee step as the knee analysis sees it (None for other phases)."""
    concurrency = phase.point.get("concurrency")
    if not concurrency:
        return None
    return Point(
        concurrency=int(concurrency),
        throughput=phase.level,
        iops=phase.iops,
        lat_mean_ns=phase.lat_mean_ns,
        total_lat_mean_ns=phase.total_lat_mean_ns,
        lat_p99_ns=phase.lat_p99_ns,
    )


def _pooled(phases: Sequence[PhaseResult]) -> Point | None:
    (pooled,) = pool_phases(phases).values()
    return point_of(pooled)


@dataclass(frozen=True)
class KneeStep:
    """One concurrency of a knee search: every fio run of it (readings)."""

    concurrency: int
    phases: tuple[PhaseResult, ...]  # in the order measured
    settled: Settled
    point: Point  # the kept readings pooled

    @property
    def kept_levels(self) -> list[float]:
        return [r.level for r in self.settled.kept_readings]

    def alternatives(self) -> tuple[Point, Point]:
        """The point at its lowest and at its highest reading."""
        low, high = (
            _pooled([self.phases[r.repeat]]) for r in (self.settled.lowest, self.settled.highest)
        )
        assert low is not None and high is not None
        return low, high

    @property
    def kept_concurrency(self) -> int | None:
        """jobs × the depth fio really kept, when it is not the label's
        (io_uring before fio 3.39 rounds iodepth up to a power of two)."""
        first = self.phases[0]
        iodepth, jobs = first.point.get("iodepth"), first.point.get("jobs")
        if not isinstance(iodepth, int) or not isinstance(jobs, int):
            return None
        kept = jobs * kept_iodepth(first.engine, first.fio_version, iodepth)
        return kept if kept != self.concurrency else None


def _reading_of(phase: PhaseResult) -> tuple[float, np.ndarray]:
    aggregate = phase.aggregate
    assert aggregate is not None
    totals, series = aggregate.totals.get(ALL), aggregate.series.get(ALL)
    level = totals.level(phase.headline) if totals is not None else 0.0
    seconds = series.values(phase.headline) if series is not None else np.zeros(0)
    return level, seconds


def knee_steps(phases: Iterable[PhaseResult]) -> dict[int, KneeStep]:
    """Measured knee phases by concurrency (ascending), their readings
    settled: a reading left out as a glitch is not pooled."""
    by_c: dict[int, list[PhaseResult]] = {}
    for phase in phases:
        concurrency = phase.point.get("concurrency")
        if phase.kind is PhaseKind.MEASURE and phase.aggregate is not None and concurrency:
            by_c.setdefault(int(concurrency), []).append(phase)
    out = {}
    for concurrency in sorted(by_c):
        runs = by_c[concurrency]
        # readings numbered by their place in the order measured
        settled = settle([reading(i, *_reading_of(p)) for i, p in enumerate(runs)])
        point = _pooled([p for i, p in enumerate(runs) if i in settled.kept])
        if point is not None:
            # what the point is known to: its kept readings' widest band
            bands = [r.half_width_pct for r in settled.kept_readings]
            noise = max((b for b in bands if b is not None), default=0.0) / 100
            point = replace(point, noise=noise)
            out[concurrency] = KneeStep(concurrency, tuple(runs), settled, point)
    return out


MAX_ENUMERATED = 10  # unsettled points whose every combination is tried (2^10 knees)


def _choices(steps: Mapping[int, KneeStep]) -> Iterable[dict[int, Point]]:
    """The points with each unsettled one at its lowest or its highest
    reading: every combination, or all low and all high when too many."""
    base = {c: s.point for c, s in steps.items()}
    options = [s.alternatives() for s in steps.values() if not s.settled.settled]
    if len(options) > MAX_ENUMERATED:  # every point low, every point high
        options_iter: Iterable[tuple[Point, ...]] = [
            tuple(o[0] for o in options),
            tuple(o[1] for o in options),
        ]
    else:
        options_iter = product(*options)
    for choice in options_iter:
        yield base | {p.concurrency: p for p in choice}


def stop_is_uncertain(steps: Mapping[int, KneeStep], rule: KneeRule) -> bool:
    """Whether a stop on throughput (a fall, or a gain under ``min_gain``)
    depends on which reading of an unsettled step is true: with some choice
    of their readings the last step gains at least ``min_gain``.

    Short readings of an erratic device (1 s at QD 1 gave 40 K, 10 K and
    8 K on one capped device) can fall or flatten by chance; a search that
    stopped there reported a knee at half a cap reached at QD 8. Readings
    a fraction of a per cent apart on a plateau leave no such choice."""
    if all(s.settled.settled for s in steps.values()):
        return False
    return any(not stops_on_throughput(list(points.values()), rule) for points in _choices(steps))


def knee_span(steps: Mapping[int, KneeStep], rule: KneeRule) -> tuple[int, int] | None:
    """The lowest and highest knee the unsettled points allow, each at its
    lowest or its highest reading; None when they all give one knee."""
    if all(s.settled.settled for s in steps.values()):
        return None
    knees = set()
    for points in _choices(steps):
        knee = find_knee(list(points.values()), rule).point
        if knee is not None:
            knees.add(knee.concurrency)
    if len(knees) < 2:
        return None
    return min(knees), max(knees)
