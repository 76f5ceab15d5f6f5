"""What a search run found (sweep, thread search, knee, load-point curve,
SPEC-like load points), recomputed from its stored phases. Pure.

Every search point is a measured phase with its coordinates in
``PhaseResult.point``; repeats of a point (``--repeat``, or a knee's
re-measurements) are pooled by ``compare.pool_phases``: throughput per
repeat kept, latency histograms merged. ``search_result`` is the one place
that turns a run's stored search settings into its typed result; renderers
match on the result's type.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from iorig.analyze.compare import RunPhase
from iorig.analyze.criteria import Verdict, criteria_of, figure, latency_columns
from iorig.analyze.generator import GeneratorLoad, generator_load
from iorig.analyze.knee import (
    Knee,
    KneeRule,
    LittleCheck,
    Plateau,
    Point,
    UslFit,
    find_knee,
    littles_law,
    plateau,
    usl_fit,
)
from iorig.analyze.kneesteps import KneeStep, knee_span, knee_steps
from iorig.analyze.loadpoints import (
    LoadPoint,
    Validity,
    ort_of,
    overall_response_time_ms,
    point_validity,
)
from iorig.analyze.training import TrainingAnalysis
from iorig.model import (
    ALL,
    Finding,
    Metric,
    Outcome,
    PhaseKind,
    PhaseResult,
    StoredRun,
    histogram,
)
from iorig.model.depth import ROUNDING_NOTE, rounds_iodepth


def latency_stat(phase: RunPhase, stat: str) -> float:
    """``mean`` or a percentile such as ``p99`` of a pooled phase, in ns."""
    if stat == "mean":
        return phase.lat_mean_ns
    p = float(stat[1:])
    return histogram.percentiles(phase.hist, (p,), phase.lat_range_ns)[p]


# ------------------------------------------------------------------ sweep


@dataclass(frozen=True)
class SweepPoint:
    coords: dict[str, str]  # parameter -> value text, e.g. {"bs": "4KiB", "rw": "read"}
    phase: RunPhase

    @property
    def test(self) -> str:
        """The scenario's phase this point ran (e.g. "random-read")."""
        return self.phase.name.split(":", 1)[0]


@dataclass(frozen=True)
class ScaledFigure:
    """The figure that should scale with a count on the x axis, per point
    (phase name): a scenario's required rate, e.g. Exchange's transactional
    IOPS, rather than the phase's IOPS."""

    label: str
    by_phase: Mapping[str, float]


@dataclass(frozen=True)
class SweepResult:
    """A grid of parameter values, or the thread counts of a thread search."""

    kind: Literal["sweep", "threads"]
    axes: tuple[str, ...]  # swept parameters, the first varying slowest
    points: tuple[SweepPoint, ...]
    scaled: ScaledFigure | None = None
    fewest_passing: int | None = None  # threads: the fewest that pass every criterion
    latencies: tuple[ScaledFigure, ...] = ()  # the criteria's mean latencies per point

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


def _fewest_passing(verdicts: Sequence[Verdict], phases: Sequence[PhaseResult]) -> int | None:
    """A ``--threads auto`` run's answer: the fewest threads whose measured
    phases pass every criterion."""
    by_threads: dict[int, bool] = {}
    points = {p.name: p.point.get("threads") for p in phases}
    for v in verdicts:
        threads = points.get(v.phase)
        if threads is not None and str(threads).isdigit():
            n = int(threads)
            by_threads[n] = by_threads.get(n, True) and v.passed
    passing = [n for n, ok in by_threads.items() if ok]
    return min(passing) if passing else None


def _measured_by_name(stored: StoredRun) -> dict[str, list[PhaseResult]]:
    by_name: dict[str, list[PhaseResult]] = {}
    for phase in stored.phases:
        if phase.kind is PhaseKind.MEASURE:
            by_name.setdefault(phase.name, []).append(phase)
    return by_name


def _scaled_figure(stored: StoredRun) -> ScaledFigure | None:
    """A scenario's required rate (a minimum on IOPS, such as Exchange's
    transactional IOPS) is the figure that should scale with its threads."""
    rate = [c for c in criteria_of(stored.run.resolved) if c.metric == "iops" and c.min]
    if not rate:
        return None
    criterion = rate[0]
    by_name = _measured_by_name(stored)
    label = "+".join(criterion.workloads or ["all"]) + " IOPS"
    return ScaledFigure(label, {name: figure(criterion, ph) for name, ph in by_name.items()})


def _latency_figures(stored: StoredRun) -> tuple[ScaledFigure, ...]:
    by_name = _measured_by_name(stored)
    return tuple(
        ScaledFigure(label, {name: figure(c, ph) for name, ph in by_name.items()})
        for label, c in latency_columns(criteria_of(stored.run.resolved))
    )


def _sweep(
    stored: StoredRun, pooled: Mapping[str, RunPhase], verdicts: Sequence[Verdict]
) -> SweepResult | None:
    search = stored.run.search
    axes = tuple(search.get("grid") or search.get("axes") or ())
    if not axes:
        return None
    points = tuple(
        SweepPoint({a: str(phase.point[a]) for a in axes if a in phase.point}, phase)
        for phase in pooled.values()
        if phase.point and all(a in phase.point for a in axes)
    )
    threads = search.get("kind") == "threads"
    return SweepResult(
        "threads" if threads else "sweep",
        axes,
        points,
        _scaled_figure(stored),
        _fewest_passing(verdicts, stored.phases) if threads else None,
        _latency_figures(stored),
    )


# ------------------------------------------------------------------ knee


@dataclass(frozen=True)
class KneeResult:
    settings: dict[str, Any]  # as stored by the knee command (scale, min_gain, slo …)
    headline: Metric
    points: tuple[Point, ...]  # one per concurrency, kept readings pooled, ascending
    knee: Knee
    little: tuple[LittleCheck, ...]  # per point
    usl: UslFit | None
    plateau: Plateau | None  # of the re-measured candidates
    # concurrencies measured more than once whose readings did not all agree
    remeasured: tuple[KneeStep, ...] = ()
    # the lowest and highest knee the unsettled readings allow (None: one knee)
    uncertain: tuple[int, int] | None = None
    # per point: jobs × the depth fio really kept, when not the label's
    kept: tuple[int | None, ...] = ()
    rounding: str | None = None  # the engine's depth rounding, when it has one

    @property
    def rule(self) -> KneeRule:
        return knee_rule(self.settings)


def knee_rule(settings: Mapping[str, Any]) -> KneeRule:
    return KneeRule(
        min_gain=float(settings.get("min_gain", 0.10)),
        slo_p99_ns=settings.get("slo_p99_ns"),
        max_concurrency=int(settings.get("max_concurrency", 1024)),
    )


def _knee(settings: dict[str, Any], phases: Sequence[PhaseResult]) -> KneeResult | None:
    steps = knee_steps(phases)
    if not steps:
        return None
    rule = knee_rule(settings)
    points = tuple(s.point for s in steps.values())
    repeats = {c: s.kept_levels for c, s in steps.items() if len(s.kept_levels) > 1}
    first = next(iter(steps.values())).phases[0]
    rounding = None
    if settings.get("scale", "iodepth") == "iodepth" and rounds_iodepth(
        first.engine, first.fio_version
    ):
        rounding = f"{ROUNDING_NOTE} ({first.fio_version})"
    return KneeResult(
        settings=settings,
        headline=first.headline,
        points=points,
        knee=find_knee(points, rule),
        little=tuple(littles_law(p) for p in points),
        usl=usl_fit(points),
        plateau=plateau(repeats) if repeats else None,
        remeasured=tuple(s for s in steps.values() if s.settled.state != "agree"),
        uncertain=knee_span(steps, rule),
        kept=tuple(s.kept_concurrency for s in steps.values()),
        rounding=rounding,
    )


# ------------------------------------------------------------------ curve


def limiting_generator(
    phases: Sequence[PhaseResult], usable_cpus: float | None
) -> GeneratorLoad | None:
    """The busiest of a point's repeats whose fio ran out of CPU, if any."""
    limiting = [g for g in _generator_loads(phases, usable_cpus) if g.limiting]
    return max(limiting, key=lambda g: g.busy_fraction) if limiting else None


def contended_generator(
    phases: Sequence[PhaseResult], usable_cpus: float | None
) -> GeneratorLoad | None:
    """The repeat of a point whose CPUs other processes took most of, where
    they were saturated: fio's I/Os waited for a CPU as well as for the
    storage, so a pace it missed is not (shown to be) the storage's."""
    contended = [g for g in _generator_loads(phases, usable_cpus) if g.contended]
    return max(contended, key=lambda g: g.others_cpus) if contended else None


def _generator_loads(
    phases: Sequence[PhaseResult], usable_cpus: float | None
) -> list[GeneratorLoad]:
    return [g for p in phases if (g := generator_load(p, usable_cpus)) is not None]


@dataclass(frozen=True)
class CurvePoint:
    name: str
    fraction: float
    load: LoadPoint
    validity: Validity
    generator: GeneratorLoad | None = None  # fio out of CPU at this point

    @property
    def generator_bound(self) -> bool:
        """Fell behind with the generator, not (shown to be) the storage, at its limit."""
        return not self.validity.valid and self.generator is not None


@dataclass(frozen=True)
class CurveResult:
    settings: dict[str, Any]
    max_iops: float
    points: tuple[CurvePoint, ...]  # in run order (lowest load first)
    ort_ms: float | None  # None with fewer than two points
    capped_at: str | None  # the point past the latency cap, when the curve stopped there

    @property
    def valid(self) -> bool:
        return bool(self.points) and all(p.validity.valid for p in self.points)


def _curve(
    settings: dict[str, Any],
    pooled: Mapping[str, RunPhase],
    runs: Mapping[str, list[PhaseResult]],
    usable_cpus: float | None,
) -> CurveResult | None:
    phases = [ph for ph in pooled.values() if "fraction" in ph.point]
    if not phases:
        return None
    tolerance = float(settings.get("tolerance", 0.05))
    points = []
    for ph in phases:
        requested = float(ph.point["requested_iops"])
        load = LoadPoint(
            load=float(ph.point["fraction"]),
            requested_ops_per_s=requested,
            achieved_ops_per_s=ph.iops,
            lat_mean_ns=ph.lat_mean_ns,
            lat_p99_ns=ph.lat_p99_ns,
        )
        points.append(
            CurvePoint(
                ph.name,
                float(ph.point["fraction"]),
                load,
                point_validity(requested, ph.iops, tolerance),
                limiting_generator(runs.get(ph.name, []), usable_cpus),
            )
        )
    usable = [p.load for p in points if p.load.achieved_ops_per_s > 0]
    ort = None
    if len({p.achieved_ops_per_s for p in usable}) >= 2:
        ort = ort_of(usable)
    capped = None
    cap = settings.get("cap")
    if cap and latency_stat(phases[-1], cap[0]) > cap[1]:
        capped = phases[-1].name
    maximum = float(phases[0].point["max_iops"])
    return CurveResult(settings, maximum, tuple(points), ort, capped)


# ----------------------------------------------------------- load points


@dataclass(frozen=True)
class OpLoad:
    """One op type (workload) at one load point."""

    workload: str
    requested_ops_per_s: float | None  # None when the workload is not rate-limited
    achieved_ops_per_s: float
    lat_mean_ns: float
    valid: bool


@dataclass(frozen=True)
class BusinessPoint:
    """A load point of a business metric (e.g. 7 AI_Jobs)."""

    name: str  # the phase
    load: int
    requested_ops_per_s: float
    achieved_ops_per_s: float
    bytes_per_s: float
    lat_mean_ns: float
    ops: tuple[OpLoad, ...]
    problems: tuple[str, ...]  # why the point is invalid; empty when valid
    generator: GeneratorLoad | None = None  # fio out of CPU at this point
    contention: GeneratorLoad | None = None  # fio's CPUs saturated, others' share among it

    @property
    def valid(self) -> bool:
        return not self.problems

    @property
    def generator_bound(self) -> bool:
        """Fell behind with the generator, not (shown to be) the storage, at its limit."""
        return not self.valid and self.generator is not None

    @property
    def contended(self) -> bool:
        """Fell behind while other processes took fio's CPUs: not shown to be the storage."""
        return not self.valid and self.generator is None and self.contention is not None


@dataclass(frozen=True)
class LoadPointResult:
    settings: dict[str, Any]  # as stored by the run (parameter, name, tolerance, cap)
    metric: str  # e.g. "AI_Jobs"
    tolerance: float
    latency_cap_ns: float | None
    points: tuple[BusinessPoint, ...]  # in run order, lowest load first
    ort_ms: float | None

    @property
    def valid(self) -> bool:
        return bool(self.points) and all(p.valid for p in self.points)

    @property
    def max_valid_load(self) -> int | None:
        valid = [p.load for p in self.points if p.valid]
        return max(valid) if valid else None


def kept_pace(requested: float, achieved: float, seconds: float, tolerance: float) -> bool:
    """Whether a rate-limited stream kept up: within ``tolerance`` of its
    rate, or — for slow streams, whose Poisson arrivals make a few seconds'
    count noisy — within three standard deviations of the expected count."""
    if requested <= 0:
        return True
    if achieved >= (1 - tolerance) * requested:
        return True
    expected = requested * seconds
    return achieved * seconds >= expected - 3 * math.sqrt(expected)


def _requested(resolved: dict[str, Any], phase: str) -> dict[str, float]:
    """Workload -> requested ops/s (jobs × per-job rate) as the stored scenario says."""
    for p in resolved.get("phases", []):
        if p.get("name") == phase:
            return {
                (w.get("name") or w["rw"]): float(w.get("jobs", 1)) * float(w["rate_iops"])
                for w in p.get("workloads", [])
                if w.get("enabled", True) and w.get("rate_iops")
            }
    return {}


def _op_figures(phases: list[PhaseResult], workload: str) -> tuple[float, float, float]:
    """(ops/s averaged over repeats, mean latency ns, seconds measured) of a workload."""
    rates, ios, lat_sum, seconds = [], 0, 0.0, []
    for phase in phases:
        scopes = [s for s in phase.workload_scopes([workload]) if ALL in s.totals]
        rates.append(sum(s.totals[ALL].iops for s in scopes))
        for s in scopes:
            t = s.totals[ALL]
            ios += t.ios
            lat_sum += t.lat_mean_ns * t.ios
            if t.iops > 0:
                seconds.append(t.ios / t.iops)
    rate = float(np.mean(rates)) if rates else 0.0
    return rate, (lat_sum / ios if ios else math.nan), (min(seconds) if seconds else 0.0)


def _measured_by_name(stored: StoredRun) -> dict[str, list[PhaseResult]]:
    by_name: dict[str, list[PhaseResult]] = {}
    for phase in stored.phases:
        if phase.kind is PhaseKind.MEASURE:
            by_name.setdefault(phase.name, []).append(phase)
    return by_name


def _loadpoints(stored: StoredRun, pooled: Mapping[str, RunPhase]) -> LoadPointResult | None:
    settings = stored.run.search
    param = settings["parameter"]
    tolerance = float(settings.get("tolerance", 0.05))
    cap = settings.get("latency_cap_ns")
    by_name = _measured_by_name(stored)
    usable = stored.run.disclosure.usable_cpus
    points = []
    for name, phase in pooled.items():
        if param not in phase.point:
            continue
        requested = _requested(stored.run.resolved, name)
        ops, problems, measured_s = [], [], []
        for workload, rate in requested.items():
            achieved, lat, seconds = _op_figures(by_name[name], workload)
            measured_s.append(seconds)
            ok = kept_pace(rate, achieved, seconds, tolerance)
            ops.append(OpLoad(workload, rate, achieved, lat, ok))
            if not ok:
                problems.append(f"{workload} achieved {achieved:.1f} of {rate:g} ops/s requested")
        total = sum(requested.values())
        seconds = min(measured_s, default=0.0)
        if total and not kept_pace(total, phase.iops, seconds, tolerance):
            problems.insert(
                0, f"achieved {phase.iops / total * 100:.1f} % of the {total:g} ops/s requested"
            )
        if cap is not None and phase.lat_mean_ns > cap:
            problems.append(f"average latency {phase.lat_mean_ns / 1e6:.2f} ms is above the cap")
        generator = limiting_generator(by_name[name], usable)
        contention = None if generator else contended_generator(by_name[name], usable)
        if problems and generator is not None:
            problems.append(f"the load generator was the limit: {generator.describe()}")
        elif problems and contention is not None:
            problems.append(
                f"fio's I/Os waited for a CPU as well as for the storage: {contention.describe()}"
            )
        points.append(
            BusinessPoint(
                name=name,
                load=int(phase.point[param]),
                requested_ops_per_s=total,
                achieved_ops_per_s=phase.iops,
                bytes_per_s=phase.bytes_per_s,
                lat_mean_ns=phase.lat_mean_ns,
                ops=tuple(ops),
                problems=tuple(problems),
                generator=generator,
                contention=contention,
            )
        )
    if not points:
        return None
    pairs = [(p.achieved_ops_per_s, p.lat_mean_ns / 1e6) for p in points]
    ort = None
    if len({x for x, _ in pairs}) >= 2 and all(math.isfinite(y) for _, y in pairs):
        ort = overall_response_time_ms(pairs)
    return LoadPointResult(
        settings, settings.get("name", param), tolerance, cap, tuple(points), ort
    )


# ------------------------------------------------------------------ accelerators


@dataclass(frozen=True)
class AcceleratorPoint:
    """One count of accelerators per host a search trained with."""

    accelerators: int  # per host
    phase: str
    training: TrainingAnalysis

    @property
    def passed(self) -> bool:
        return self.training.outcome is Outcome.PASS

    @property
    def au_min(self) -> float | None:
        """The lowest epoch's AU (what the verdict judges)."""
        values = [f.au for f in self.training.epochs if f.au is not None]
        return min(values) if values else None


@dataclass(frozen=True)
class AcceleratorsResult:
    """``--accelerators auto``: every count tried, and the most that passed
    (0 when even one accelerator per host fell short)."""

    points: tuple[AcceleratorPoint, ...]  # by count
    most: int
    au_floor: float
    hosts: int
    limit: int | None = None  # the most the search would try (its settings)
    # the first count that fell short did so with the load generator, not the
    # storage, setting the pace (the audit): the storage may keep more
    generator_limited: bool = False

    @property
    def at_least(self) -> bool:
        """The answer is a lower bound: the search stopped at its limit, or
        the load generator fell short first."""
        return self.generator_limited or (self.limit is not None and self.most >= self.limit)

    @property
    def best(self) -> AcceleratorPoint | None:
        return next((p for p in self.points if p.accelerators == self.most), None)


# the audit's findings that the load generator, not the storage, set a phase's pace
GENERATOR_FINDINGS = ("generator-limit", "generator-ceiling", "cpu-bound")


def _accelerators(
    phases: Sequence[PhaseResult],
    training: Sequence[TrainingAnalysis],
    settings: Mapping[str, Any],
    warnings: Sequence[Finding],
) -> AcceleratorsResult | None:
    """The counts tried, from the run's training phases as analysed once."""
    by_name = {t.phase: t for t in training}
    points = sorted(
        (
            AcceleratorPoint(int(p.point["accelerators"]), p.name, by_name[p.name])
            for p in phases
            if p.name in by_name and "accelerators" in p.point
        ),
        key=lambda p: p.accelerators,
    )
    if not points:
        return None
    passed = [p.accelerators for p in points if p.passed]
    first = points[0].training
    short = next((p.phase for p in points if not p.passed), None)
    limited = any(f.code in GENERATOR_FINDINGS and f.phase == short for f in warnings)
    limit = settings.get("max_accelerators")
    return AcceleratorsResult(
        tuple(points),
        max(passed, default=0),
        first.model.au_floor,
        first.hosts,
        limit if isinstance(limit, int) else None,
        limited,
    )


# ------------------------------------------------------------------ all

SearchResult = SweepResult | KneeResult | CurveResult | LoadPointResult | AcceleratorsResult


def search_result(
    stored: StoredRun,
    pooled: Mapping[str, RunPhase],
    verdicts: Sequence[Verdict],
    training: Sequence[TrainingAnalysis] = (),
) -> SearchResult | None:
    """What the run's search found (None for an ordinary run, or a search
    interrupted before its first point); ``training``: the run's training
    phases as analysed (an accelerators search's counts)."""
    settings = stored.run.search or {}
    kind = settings.get("kind")
    if kind in ("sweep", "threads"):
        return _sweep(stored, pooled, verdicts)
    if kind == "knee":
        return _knee(settings, stored.phases)
    if kind == "curve":
        return _curve(
            settings, pooled, _measured_by_name(stored), stored.run.disclosure.usable_cpus
        )
    if kind == "loadpoints":
        return _loadpoints(stored, pooled)
    if kind == "accelerators":
        return _accelerators(stored.phases, training, settings, stored.run.warnings)
    return None
