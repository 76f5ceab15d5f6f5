"""Stored search runs (sweep, knee, load-point curve) turned into the inputs
of their analyses. Pure: reads StoredRun, returns plain data.

Every search point is a measured phase with its coordinates in
``PhaseResult.point``; repeats of a point (``--repeat``, or a knee's
re-measurements) are pooled by ``compare.run_phases``: throughput per
repeat kept, latency histograms merged.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from iorig.analyze.compare import Comparison, RunPhase, run_phases, verdict_text
from iorig.analyze.criteria import criteria_of, evaluate
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
from iorig.analyze.loadpoints import (
    LoadPoint,
    Validity,
    ort_of,
    overall_response_time_ms,
    point_validity,
)
from iorig.analyze.sweepcmp import GroupSummary, PointPair, describe, ratio_ranges
from iorig.fio import histogram
from iorig.results import ALL, PhaseResult
from iorig.store import StoredRun


@dataclass(frozen=True)
class SweepPoint:
    coords: dict[str, str]  # parameter -> value text, e.g. {"bs": "4KiB", "rw": "read"}
    phase: RunPhase

    @property
    def test(self) -> str:
        """The scenario's phase this point ran (e.g. "random-read")."""
        return self.phase.name.split(":", 1)[0]


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


def latency_stat(phase: RunPhase, stat: str) -> float:
    """``mean`` or a percentile such as ``p99`` of a pooled phase, in ns."""
    if stat == "mean":
        return phase.lat_mean_ns
    p = float(stat[1:])
    return histogram.percentiles(phase.hist, (p,))[p]


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


def fewest_passing(stored: StoredRun) -> int | None:
    """A ``--threads auto`` run's answer: the fewest threads whose measured
    phases pass every criterion."""
    verdicts = evaluate(criteria_of(stored.run.resolved), stored.phases)
    by_threads: dict[int, bool] = {}
    points = {p.name: p.point.get("threads") for p in stored.phases}
    for v in verdicts:
        threads = points.get(v.phase)
        if threads is not None and str(threads).isdigit():
            n = int(threads)
            by_threads[n] = by_threads.get(n, True) and v.passed
    passing = [n for n, ok in by_threads.items() if ok]
    return min(passing) if passing else None


def search_kind(stored: StoredRun) -> str | None:
    kind = stored.run.search.get("kind") if stored.run.search else None
    return str(kind) if kind else None


def sweep_of(stored: StoredRun) -> Sweep | None:
    """The sweep in a run, or None when the run is not a sweep."""
    search = stored.run.search or {}
    axes = tuple(search.get("grid") or search.get("axes") or ())
    if not axes:
        return None
    points = tuple(
        SweepPoint({a: str(phase.point[a]) for a in axes if a in phase.point}, phase)
        for phase in run_phases(stored).values()
        if phase.point and all(a in phase.point for a in axes)
    )
    return Sweep(axes, points)


# ------------------------------------------------------------------ knee


@dataclass(frozen=True)
class KneeResult:
    settings: dict  # as stored by the knee command (scale, min_gain, slo …)
    headline: str  # "iops" or "bytes_per_s"
    points: tuple[Point, ...]  # one per concurrency, repeats pooled, ascending
    knee: Knee
    little: tuple[LittleCheck, ...]  # per point
    usl: UslFit | None
    plateau: Plateau | None  # of the re-measured candidates


def knee_rule(settings: dict) -> KneeRule:
    return KneeRule(
        min_gain=float(settings.get("min_gain", 0.10)),
        slo_p99_ns=settings.get("slo_p99_ns"),
        max_concurrency=int(settings.get("max_concurrency", 1024)),
    )


def knee_of(stored: StoredRun) -> KneeResult | None:
    """The knee analysis of a knee run, from its stored phases."""
    settings = stored.run.search or {}
    if settings.get("kind") != "knee":
        return None
    pooled = [ph for ph in run_phases(stored).values() if point_of(ph)]
    if not pooled:
        return None
    points = tuple(sorted((p for p in map(point_of, pooled) if p), key=lambda p: p.concurrency))
    rule = knee_rule(settings)
    repeats = {
        int(ph.point["concurrency"]): list(ph.repeat_levels)
        for ph in pooled
        if len(ph.repeat_levels) > 1
    }
    return KneeResult(
        settings=settings,
        headline=pooled[0].headline,
        points=points,
        knee=find_knee(points, rule),
        little=tuple(littles_law(p) for p in points),
        usl=usl_fit(points),
        plateau=plateau(repeats) if repeats else None,
    )


# ------------------------------------------------------------------ curve


@dataclass(frozen=True)
class CurvePoint:
    name: str
    fraction: float
    load: LoadPoint
    validity: Validity


@dataclass(frozen=True)
class CurveResult:
    settings: dict
    max_iops: float
    points: tuple[CurvePoint, ...]  # in run order (lowest load first)
    ort_ms: float | None  # None with fewer than two points
    capped_at: str | None  # the point past the latency cap, when the curve stopped there

    @property
    def valid(self) -> bool:
        return bool(self.points) and all(p.validity.valid for p in self.points)


def curve_of(stored: StoredRun) -> CurveResult | None:
    """The load-point analysis of a curve run, from its stored phases."""
    settings = stored.run.search or {}
    if settings.get("kind") != "curve":
        return None
    phases = [ph for ph in run_phases(stored).values() if "fraction" in ph.point]
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
            )
        )
    usable = [p.load for p in points if p.load.achieved_ops_per_s > 0]
    ort = None
    if len({p.achieved_ops_per_s for p in usable}) >= 2:
        ort = ort_of(usable)
    capped = None
    cap = settings.get("cap")
    if cap and phases:
        last = phases[-1]
        if latency_stat(last, cap[0]) > cap[1]:
            capped = last.name
    maximum = float(phases[0].point["max_iops"]) if phases else float("nan")
    return CurveResult(settings, maximum, tuple(points), ort, capped)


# ------------------------------------------------------------ sweep A/B


@dataclass(frozen=True)
class SweepComparison:
    """One run against the baseline across the points of a sweep (seed 003)."""

    label_a: str
    label_b: str
    x_axis: str
    pairs: tuple[PointPair, ...]
    verdicts: tuple[str, ...]  # per pair: the comparison's verdict text
    summaries: tuple[GroupSummary, ...]

    def sentences(self) -> list[str]:
        return [describe(s, self.label_a, self.label_b) for s in self.summaries]


def sweep_comparisons(cmp: Comparison, stored: list[StoredRun]) -> list[SweepComparison]:
    """Per-point ratios of each run against the baseline, when all runs are
    sweeps over the same parameters. Empty otherwise."""
    sweeps = [sweep_of(s) for s in stored]
    if not all(sweeps) or len({sw.axes for sw in sweeps if sw}) != 1:
        return []
    base = sweeps[0]
    assert base is not None
    by_name = {p.phase.name: p for p in base.points}
    out = []
    for i in range(1, len(stored)):
        pairs, verdicts = [], []
        for phase in cmp.phases:
            a, b, diff = phase.entries[0], phase.entries[i], phase.differences[i]
            point = by_name.get(phase.name)
            if a is None or b is None or point is None or a.level <= 0 or a.lat_mean_ns <= 0:
                continue
            others = base.axes[1:]
            # one other axis reads naturally as its value ("read throughput")
            group = (
                point.coords[others[0]]
                if len(others) == 1
                else ",".join(f"{k}={point.coords[k]}" for k in others)
            )
            if len({p.test for p in base.points}) > 1:  # several measured phases per point
                group = f"{point.test} {group}".strip()
            significant = None
            if diff is not None and diff.verdict != "untestable":
                significant = diff.significant
            pairs.append(
                PointPair(
                    group=group,
                    point=f"{base.x_axis}={point.coords[base.x_axis]}",
                    throughput_a=a.level,
                    throughput_b=b.level,
                    lat_mean_ns_a=a.lat_mean_ns,
                    lat_mean_ns_b=b.lat_mean_ns,
                    significant=significant,
                )
            )
            verdicts.append(verdict_text(diff))
        if pairs:
            out.append(
                SweepComparison(
                    cmp.labels[0], cmp.labels[i], base.x_axis, tuple(pairs), tuple(verdicts),
                    tuple(ratio_ranges(pairs)),
                )
            )  # fmt: skip
    return out


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

    @property
    def valid(self) -> bool:
        return not self.problems


@dataclass(frozen=True)
class LoadPointResult:
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


def _requested(resolved: dict, phase: str) -> dict[str, float]:
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
        scopes = [s for s in phase.scopes if s.workload == workload and ALL in s.totals]
        rates.append(sum(s.totals[ALL].iops for s in scopes))
        for s in scopes:
            t = s.totals[ALL]
            ios += t.ios
            lat_sum += t.lat_mean_ns * t.ios
            if t.iops > 0:
                seconds.append(t.ios / t.iops)
    rate = float(np.mean(rates)) if rates else 0.0
    return rate, (lat_sum / ios if ios else math.nan), (min(seconds) if seconds else 0.0)


def loadpoints_of(stored: StoredRun) -> LoadPointResult | None:
    """The load-point analysis of a scenario with ``loadpoints`` (SPEC-like)."""
    settings = stored.run.search or {}
    if settings.get("kind") != "loadpoints":
        return None
    param = settings["parameter"]
    tolerance = float(settings.get("tolerance", 0.05))
    cap = settings.get("latency_cap_ns")
    by_name: dict[str, list[PhaseResult]] = {}
    for phase in stored.phases:
        if phase.kind == "measure":
            by_name.setdefault(phase.name, []).append(phase)
    points = []
    for name, pooled in run_phases(stored).items():
        if param not in pooled.point:
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
        if total and not kept_pace(total, pooled.iops, seconds, tolerance):
            problems.insert(
                0, f"achieved {pooled.iops / total * 100:.1f} % of the {total:g} ops/s requested"
            )
        if cap is not None and pooled.lat_mean_ns > cap:
            problems.append(f"average latency {pooled.lat_mean_ns / 1e6:.2f} ms is above the cap")
        points.append(
            BusinessPoint(
                name=name,
                load=int(pooled.point[param]),
                requested_ops_per_s=total,
                achieved_ops_per_s=pooled.iops,
                bytes_per_s=pooled.bytes_per_s,
                lat_mean_ns=pooled.lat_mean_ns,
                ops=tuple(ops),
                problems=tuple(problems),
            )
        )
    pairs = [(p.achieved_ops_per_s, p.lat_mean_ns / 1e6) for p in points]
    ort = None
    if len({x for x, _ in pairs}) >= 2 and all(math.isfinite(y) for _, y in pairs):
        ort = overall_response_time_ms(pairs)
    return LoadPointResult(settings.get("name", param), tolerance, cap, tuple(points), ort)
