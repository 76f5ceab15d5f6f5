"""Plain-data views of runs and comparisons: the JSON and CSV exporters.

Every JSON document iorig prints carries ``format_version``: the version of
the documents' layout (key names, nesting, units). A change that could break
a reader (a key removed, renamed or changing meaning or unit) raises it; new
keys do not.

CSV has one row shape for ``show``, ``report`` and ``compare``: one row per
run and measured phase (repeats pooled), the columns of ``CSV_COLUMNS``; the
comparison columns are empty for a single run and for the baseline.
"""

from __future__ import annotations

import csv
import io
import json
import math
from dataclasses import asdict
from typing import Any

from iorig.analyze.analysis import Comparison, RunAnalysis
from iorig.analyze.checkpoint import CheckpointAnalysis
from iorig.analyze.compare import Difference, RunPhase
from iorig.analyze.criteria import Verdict
from iorig.analyze.impact import EventImpact
from iorig.analyze.knee import Point
from iorig.analyze.perhost import HostPhase, per_host
from iorig.analyze.search import (
    AcceleratorsResult,
    CurveResult,
    KneeResult,
    LoadPointResult,
    SearchResult,
    SweepResult,
)
from iorig.analyze.summary import PhaseSummary
from iorig.analyze.training import TrainingAnalysis
from iorig.analyze.verdictcmp import FigureChange, host_verdicts
from iorig.model import PhaseKind, PrecisionState, RunRecord, SeriesStats, StoredRun
from iorig.report.options import RenderOptions
from iorig.report.tables.ab import ab_dict
from iorig.report.tables.verdicts import verdicts_dict
from iorig.untrusted import visible

FORMAT_VERSION = 1


def _num(value: float | None) -> float | None:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    return value


def _pct_key(p: float) -> str:
    return f"p{p:g}"


def series_dict(stats: SeriesStats) -> dict[str, Any]:
    return {
        "seconds": stats.n,
        "median": _num(stats.median),
        "max": _num(stats.maximum),
        "min": _num(stats.minimum),
        "mean": _num(stats.mean),
        "stdev": _num(stats.stdev),
        "cov": _num(stats.cov),
    }


def phase_dict(s: PhaseSummary) -> dict[str, Any]:
    # a phase that trims also has each direction on its own (its figures add
    # unlike I/Os); others keep the shape they always had
    directions = (
        {
            "directions": [
                {
                    "ddir": d.ddir,
                    "ios": d.ios,
                    "iops": _num(d.iops),
                    "bytes_per_s": _num(d.bytes_per_s),
                    "lat_mean_ns": _num(d.lat_mean_ns),
                    "lat_p99_ns": _num(d.lat_p99_ns),
                }
                for d in s.directions
            ]
        }
        if s.trims
        else {}
    )
    return {
        "name": s.name,
        "kind": str(s.kind),
        "repeat": s.repeat,
        "status": str(s.status),
        "metric": str(s.headline),
        # the workloads these figures count; null: every workload of the phase
        "workloads": list(s.headline_workloads) or None,
        "per_second": series_dict(s.per_second),
        "iops": _num(s.iops),
        "bytes_per_s": _num(s.bytes_per_s),
        "ios": s.ios,
        "latency_ns": {
            "kind": "clat",
            "mean": _num(s.lat_mean_ns),
            "min": _num(s.lat_min_ns),
            "max": _num(s.lat_max_ns),
            **{_pct_key(p): _num(v) for p, v in s.lat_percentiles_ns.items()},
        },
        "elapsed_s": s.elapsed_s,
        "jobs": s.jobs,
        "cpu_pct_per_job": {"usr": _num(s.usr_cpu_pct), "sys": _num(s.sys_cpu_pct)},
        # all of fio's processes and threads, as iorig measured them (null: not measured)
        "generator_cpu": (
            None
            if (g := s.generator_cpu) is None
            else {
                "cpu_s": g.cpu_s,
                "wall_s": g.wall_s,
                "cpus_busy": g.cpus_busy,
                # what other processes took of the CPUs fio may run on (null: not measured)
                "others_cpu_s": g.others_cpu_s,
            }
        ),
        "error": s.error,
        "precision": precision_dict(s.precision),
    } | directions


def precision_dict(state: PrecisionState | None) -> dict[str, Any] | None:
    """An ``until: precise`` phase's precision: asked and achieved half-widths
    (% of the median) and the interval itself."""
    if state is None:
        return None
    return state.as_record() | {
        "precise": state.precise,
        "median": _num(state.median),
        "low": _num(state.low),
        "high": _num(state.high),
        "confidence": state.confidence,
        "min_s": state.min_s,
        "max_s": state.max_s,
        "why": state.why or None,
    }


def run_dict(run: RunRecord) -> dict[str, Any]:
    return {
        "id": run.id,
        "label": run.label,
        "scenario": run.scenario,
        "scenario_version": run.scenario_version,
        "title": run.title,
        "origin": run.scenario_origin,
        "profile": run.profile,
        "status": str(run.status),
        "error": run.error,
        "started_at": run.started_at,
        "ended_at": run.ended_at,
        "parameters": {k: v["text"] for k, v in run.params.items()},
        # default, profile, --set or sweep: show lists those not at their default
        "parameter_origins": {k: v.get("origin") for k, v in run.params.items()},
        "targets": run.targets,
        "hosts": run.hosts,
        "fio_version": run.fio_version,
        "iorig_version": run.iorig_version,
        "warnings": [w.as_dict() for w in run.warnings],
        "ab": None
        if run.ab is None
        else {
            "id": run.ab.id,
            "side": run.ab.side,
            "peer": run.ab.peer,
            "first": list(run.ab.first),
        },
        "interface_limit": None
        if run.disclosure.interface_limit is None
        else {
            "bytes_per_s": run.disclosure.interface_limit.bytes_per_s,
            "source": run.disclosure.interface_limit.source,
        },
    }


def sut_dict(run: RunRecord) -> dict[str, Any]:
    """The user's description of the system under test and ``--note`` texts."""
    return {"description": dict(run.sut.description), "notes": list(run.sut.notes)}


def run_document(analysis: RunAnalysis) -> dict[str, Any]:
    """Everything about a run that `show` prints, and its per-second samples."""
    stored = analysis.stored
    return {
        "run": run_dict(stored.run),
        "sut": sut_dict(stored.run),
        "engines": sorted({p.engine for p in stored.phases if p.engine}),
        "steady_state": [
            {
                "phase": p.name,
                "converged": p.steady.converged,
                "metric": p.steady.metric,
                "round_s": p.steady.round_s,
                "window": p.steady.window,
                "max_range": p.steady.max_range,
                "max_slope": p.steady.max_slope,
                "rounds": list(p.steady.rounds),
                "window_start": p.steady.window_start,
            }
            for p in stored.phases
            if p.steady is not None
        ],
        "phases": [phase_dict(s) | {"point": s.point} for s in analysis.measured],
        "other_phases": [
            phase_dict(s) for s in analysis.summaries if s.kind is not PhaseKind.MEASURE
        ],
        "search": search_dict(analysis.search),
        "verdicts": [
            {
                "name": v.name,
                "phase": v.phase,
                "host": v.host,
                "metric": v.metric,
                "bound": v.bound,
                "limit": _num(v.limit),
                "value": _num(v.value),
                "passed": v.passed,
                "margin": _num(v.margin),
            }
            for v in analysis.verdicts
        ],
        "verdict": analysis.verdict,
        "timed_phases": [
            {
                "phase": s.name,
                "kind": str(s.kind),
                "status": str(s.status),
                "elapsed_s": s.elapsed_s,
                "io_bytes": s.io_bytes,
                "bytes_per_s": _num(s.bytes_per_s) if s.ios else None,
                "error": s.error,
            }
            for s in analysis.summaries
            if s.kind.size_based
        ],
        "events": [event_dict(e) for e in analysis.events],
        "per_host": [host_phase_dict(h) for h in per_host(analysis)],
        "training": [training_dict(t) for t in analysis.training],
        "checkpoint": checkpoint_dict(analysis.checkpoint),
        "samples": series_records(stored),
    }


def training_dict(t: TrainingAnalysis) -> dict[str, Any]:
    """A training phase as MLPerf Storage states a result, with every epoch,
    host and accelerator; AU as fractions, throughput in bytes/s."""
    return {
        "model": asdict(t.model),
        "hosts": t.hosts,
        "accelerators_total": t.accelerators_total,
        "steps_per_epoch": t.model.steps_per_epoch,
        "demand_bytes_per_s": t.model.demand_bytes_per_s,
        "au_mean": t.au_mean,
        "samples_per_s": t.samples_per_s,
        "bytes_per_s": t.bytes_per_s,
        "outcome": str(t.outcome),
        "why": t.why,
        "mlperf_outcome": None if t.mlperf_outcome is None else str(t.mlperf_outcome),
        "epochs": [
            {
                "epoch": f.epoch,
                "au": f.au,
                "samples_per_s": f.samples_per_s,
                "bytes_per_s": f.bytes_per_s,
                "wait_ms": {f"p{p:g}": v for p, v in f.wait_p_ms.items()},
                "wait_max_ms": f.wait_max_ms,
            }
            for f in t.epochs
        ],
        "per_host": [
            {"host": h.host, "au": list(h.au), "samples_per_s": h.samples_per_s}
            for h in t.host_figures
        ],
        "per_accelerator": [
            {"host": a.host, "index": a.index, "au": list(a.au), "wait_s": a.wait_s}
            for a in t.accelerators
        ],
    }


def checkpoint_dict(c: CheckpointAnalysis | None) -> dict[str, Any] | None:
    """A checkpoint run's figures: per direction the mean over checkpoints of
    size ÷ slowest process's time (bytes/s), its interval and each checkpoint."""
    if c is None:
        return None
    return {
        "model": asdict(c.model),
        "hosts": c.hosts,
        **{
            op: None
            if s is None
            else {
                "mean_bytes_per_s": s.mean_bytes_per_s,
                "interval": list(s.interval) if s.interval else None,
                "lowest_bytes_per_s": s.lowest_bytes_per_s,
                "highest_bytes_per_s": s.highest_bytes_per_s,
                "checkpoints": [asdict(f) | {"bytes_per_s": f.bytes_per_s} for f in s.checkpoints],
            }
            for op, s in (("write", c.write), ("read", c.read))
        },
    }


def event_dict(e: EventImpact) -> dict[str, Any]:
    """An event as it happened, with its impact (None where not measured)."""
    return {
        "phase": e.phase,
        "repeat": e.repeat,
        **e.event.as_dict(),
        "impact": e.impact.as_dict() if e.impact is not None else None,
    }


def host_phase_dict(h: HostPhase) -> dict[str, Any]:
    """Seed 001's per-host table of one measured phase: each host, the average
    per host and the spread between hosts."""
    return {
        "phase": h.phase,
        "repeat": h.repeat,
        "metric": str(h.headline),
        "hosts": [
            {
                "host": f.host,
                "level": _num(f.level),
                "lat_mean_ns": _num(f.lat_mean_ns),
                "lat_p99_ns": _num(f.lat_p99_ns),
                "latencies_ns": {k: _num(v) for k, v in f.latencies.items()},
                "status": f.status,
                "error": f.error,
            }
            for f in h.hosts
        ],
        "average_per_host": _num(h.average),
        "spread": None
        if h.spread is None
        else {"slowest": h.spread.slowest, "fastest": h.spread.fastest, "cov": _num(h.spread.cov)},
    }


def _knee_point(p: Point) -> dict[str, Any]:
    return {
        "concurrency": p.concurrency,
        "throughput": p.throughput,
        "iops": p.iops,
        "lat_mean_ns": _num(p.lat_mean_ns),
        "lat_p99_ns": _num(p.lat_p99_ns),
    }


def search_dict(result: SearchResult | None) -> dict[str, Any] | None:
    """What a sweep, knee or curve run found."""
    if isinstance(result, AcceleratorsResult):
        return {
            "kind": "accelerators",
            "most": result.most,
            "hosts": result.hosts,
            "au_floor": result.au_floor,
            "points": [
                {
                    "accelerators": p.accelerators,
                    "phase": p.phase,
                    "dataset_bytes": p.training.model.dataset_bytes,  # per host
                    "au_mean": p.training.au_mean,
                    "au_min": p.au_min,
                    "au": [f.au for f in p.training.epochs],
                    "samples_per_s": p.training.samples_per_s,
                    "bytes_per_s": p.training.bytes_per_s,
                    "outcome": str(p.training.outcome),
                }
                for p in result.points
            ],
        }
    if isinstance(result, SweepResult):
        sweep = result
        return {
            "kind": sweep.kind,
            "axes": list(sweep.axes),
            "fewest_passing": sweep.fewest_passing,
            "points": [
                {
                    "phase": p.phase.name,
                    **p.coords,
                    "iops": p.phase.iops,
                    "bytes_per_s": p.phase.bytes_per_s,
                    "lat_mean_ns": _num(p.phase.lat_mean_ns),
                    "lat_p99_ns": _num(p.phase.lat_p99_ns),
                    "repeats": len(p.phase.repeat_levels),
                }
                for p in sweep.points
            ],
        }
    if isinstance(result, KneeResult):
        k = result
        return {
            "kind": "knee",
            "settings": k.settings,
            "metric": k.headline,
            "points": [
                _knee_point(p)
                | {
                    "in_flight": c.outstanding,
                    "queue_kept": not c.short,
                    "queue_deeper": c.deeper,
                    "kept_concurrency": kept,
                }
                for p, c, kept in zip(
                    k.points, k.little, k.kept or (None,) * len(k.points), strict=True
                )
            ],
            "knee": _knee_point(k.knee.point) if k.knee.point else None,
            # the curve never flattened: "knee" is the highest point measured
            "knee_beyond": k.knee.beyond,
            "reason": k.knee.reason,
            "uncertain_between": list(k.uncertain) if k.uncertain else None,
            "remeasured": [
                {
                    "concurrency": s.concurrency,
                    "state": s.settled.state,
                    "left_out": [r + 1 for r in s.settled.left_out],
                    "runs": [
                        {
                            "run": r.repeat + 1,
                            "throughput": r.level,
                            "low": r.low,
                            "high": r.high,
                            "seconds": r.seconds,
                        }
                        for r in s.settled.readings
                    ],
                }
                for s in k.remeasured
            ],
            "depth_rounding": k.rounding,
            "slo_best": _knee_point(k.knee.slo_best) if k.knee.slo_best else None,
            "plateau": {
                "best": k.plateau.best.concurrency,
                "members": list(k.plateau.members),
                "ci": [k.plateau.best.ci_low, k.plateau.best.ci_high],
                "candidates": [
                    {
                        "concurrency": c.concurrency,
                        "n": c.n,
                        "mean": c.mean,
                        "min": c.lowest,
                        "max": c.highest,
                    }
                    for c in k.plateau.candidates
                ],
            }
            if k.plateau
            else None,
            "usl": {
                "lambda": k.usl.lam,
                "sigma": k.usl.sigma,
                "kappa": k.usl.kappa,
                "r2": k.usl.r2,
                "peak_concurrency": k.usl.peak_concurrency,
            }
            if k.usl
            else None,
        }
    if isinstance(result, LoadPointResult):
        lp = result
        return {
            "kind": "loadpoints",
            "settings": lp.settings,
            "metric": lp.metric,
            "valid": lp.valid,
            "max_valid_load": lp.max_valid_load,
            "ort_ms": lp.ort_ms,
            "points": [
                {
                    "phase": p.name,
                    "load": p.load,
                    "requested_ops_per_s": p.requested_ops_per_s,
                    "achieved_ops_per_s": p.achieved_ops_per_s,
                    "bytes_per_s": p.bytes_per_s,
                    "lat_mean_ns": _num(p.lat_mean_ns),
                    "valid": p.valid,
                    "problems": list(p.problems),
                    "ops": [
                        {
                            "workload": o.workload,
                            "requested_ops_per_s": o.requested_ops_per_s,
                            "achieved_ops_per_s": o.achieved_ops_per_s,
                            "lat_mean_ns": _num(o.lat_mean_ns),
                            "valid": o.valid,
                        }
                        for o in p.ops
                    ],
                }
                for p in lp.points
            ],
        }
    if isinstance(result, CurveResult):
        c = result
        return {
            "kind": "curve",
            "settings": c.settings,
            "max_iops": c.max_iops,
            "ort_ms": c.ort_ms,
            "valid": c.valid,
            "capped_at": c.capped_at,
            "points": [
                {
                    "phase": p.name,
                    "fraction": p.fraction,
                    "requested_iops": p.load.requested_ops_per_s,
                    "achieved_iops": p.load.achieved_ops_per_s,
                    "lat_mean_ns": _num(p.load.lat_mean_ns),
                    "lat_p99_ns": _num(p.load.lat_p99_ns),
                    "valid": p.validity.valid,
                    "validity": p.validity.message,
                }
                for p in c.points
            ],
        }
    return None


def phase_record(
    entry: RunPhase, run_id: str, label: str, *, baseline: bool, diff: Difference | None
) -> dict[str, Any]:
    """One run's measured phase (repeats pooled) as a flat record; the change
    and test columns are None for the baseline or a run on its own."""
    stats = entry.stats
    test = diff.test if diff else None
    return {
        "phase": entry.name,
        "metric": str(entry.headline),
        "run_id": run_id,
        "label": label,
        "baseline": baseline,
        "seconds": stats.n,
        "median": _num(stats.median),
        "max": _num(stats.maximum),
        "min": _num(stats.minimum),
        "mean": _num(stats.mean),
        "cov": _num(stats.cov),
        "repeats": len(entry.repeat_levels),
        "lat_mean_ns": _num(entry.lat_mean_ns),
        "lat_p99_ns": _num(entry.lat_p99_ns),
        "change_median": _num(diff.change_median) if diff else None,
        "change_max": _num(diff.change_max) if diff else None,
        "change_min": _num(diff.change_min) if diff else None,
        "change_lat_mean": _num(diff.change_lat_mean) if diff else None,
        "change_lat_p99": _num(diff.change_lat_p99) if diff else None,
        "verdict": diff.verdict if diff else None,
        "method": diff.method if diff else None,
        "ratio": test.ratio if test else None,
        "ci_low": test.ci_low if test else None,
        "ci_high": test.ci_high if test else None,
        "p_value": test.p_value if test else None,
    } | _REQUIREMENT_BLANK


# the columns of a requirement's row (application workloads), empty in a phase's
_REQUIREMENT_BLANK: dict[str, Any] = dict.fromkeys(
    (
        "record",
        "requirement",
        "host",
        "bound",
        "limit",
        "value",
        "passed",
        "change",
        "run_verdict",
        "host_verdict",
    )
) | {"record": "phase"}


def requirement_record(
    v: Verdict,
    run_id: str,
    label: str,
    *,
    baseline: bool,
    change: FigureChange | None,
    run_verdict: str | None,
    host_verdict: str | None,
) -> dict[str, Any]:
    """One run's requirement (a criterion on a phase, per host where it is
    judged per host) in the CSV's row shape: its limit, figure and result,
    and against the baseline the figure's change and its test."""
    test = change.test if change else None
    blank = dict.fromkeys(CSV_COLUMNS)
    return blank | {
        "record": "requirement",
        "phase": v.phase,
        "metric": v.metric,
        "run_id": run_id,
        "label": label,
        "baseline": baseline,
        "requirement": v.name,
        "host": v.host,
        "bound": v.bound,
        "limit": _num(v.limit),
        "value": _num(v.value),
        "passed": v.passed,
        "change": _num(change.change) if change else None,
        "verdict": change.verdict if change else None,
        "method": change.method if change else None,
        "ratio": test.ratio if test else None,
        "ci_low": test.ci_low if test else None,
        "ci_high": test.ci_high if test else None,
        "p_value": test.p_value if test else None,
        "run_verdict": run_verdict,
        "host_verdict": host_verdict,
    }


def comparison_records(cmp: Comparison) -> list[dict[str, Any]]:
    """One flat record per run and phase, with the numbers behind the tables;
    then, for application workloads, one per run and requirement."""
    phases = [
        phase_record(
            entry, cmp.runs[i].run.id, cmp.labels[i], baseline=i == 0, diff=phase.differences[i]
        )
        | {"run_verdict": cmp.runs[i].verdict}
        for phase in cmp.phases
        for i, entry in enumerate(phase.entries)
        if entry is not None
    ]
    vc = cmp.verdicts
    if vc is None:
        return phases
    return phases + [
        requirement_record(
            v,
            cmp.runs[i].run.id,
            cmp.labels[i],
            baseline=i == 0,
            change=row.changes[i],
            run_verdict=vc.runs[i].verdict,
            host_verdict=dict(vc.runs[i].hosts).get(v.host or ""),
        )
        for row in vc.requirements
        for i, v in enumerate(row.verdicts)
        if v is not None
    ]


def run_records(analysis: RunAnalysis) -> list[dict[str, Any]]:
    """A run on its own in the comparison's row shape: one row per measured
    phase, then one per requirement its verdict judged."""
    run, hosts = analysis.run, dict(host_verdicts(analysis.verdicts))
    return [
        phase_record(entry, run.id, run.name, baseline=True, diff=None)
        | {"run_verdict": analysis.verdict}
        for entry in analysis.pooled.values()
    ] + [
        requirement_record(
            v,
            run.id,
            run.name,
            baseline=True,
            change=None,
            run_verdict=analysis.verdict,
            host_verdict=hosts.get(v.host or ""),
        )
        for v in analysis.verdicts
    ]


def comparison_document(cmp: Comparison) -> dict[str, Any]:
    return {
        "runs": [
            run_document(r) | {"label": label}
            for r, label in zip(cmp.runs, cmp.labels, strict=True)
        ],
        "threshold": cmp.threshold,
        "confidence": cmp.confidence,
        "definition_differences": list(cmp.definition_differences),
        "only_in": [{"phase": p, "label": label} for p, label in cmp.only_in],
        "phases": comparison_records(cmp),
        "ab": ab_dict(cmp),  # the rounds of an interleaved A/B (iorig ab), else null
        # application workloads: each requirement run by run and every verdict, else null
        "verdicts": verdicts_dict(cmp),
        "training": None
        if cmp.training is None
        else {
            "runs": [
                {
                    "label": f.label,
                    "accelerators": f.accelerators,
                    "searched": f.searched,
                    "au_mean": f.training.au_mean,
                    "samples_per_s": f.training.samples_per_s,
                    "outcome": str(f.training.outcome),
                }
                for f in cmp.training.figures
            ],
            "changes": [
                {"label": c.label, "change": str(c.change), "sentence": c.sentence}
                for c in cmp.training.changes
            ],
        },
        "checkpoints": [asdict(c) | {"change": str(c.change)} for c in cmp.checkpoints],
        "sweeps": [
            {
                "a": sc.label_a,
                "b": sc.label_b,
                "x_axis": sc.x_axis,
                "sentences": sc.sentences(),
                "points": [
                    asdict(p) | {"verdict": v} for p, v in zip(sc.pairs, sc.verdicts, strict=True)
                ],
            }
            for sc in cmp.sweeps
        ],
    }


CSV_COLUMNS = (  # the keys of phase_record and requirement_record, in order
    "phase",
    "metric",
    "run_id",
    "label",
    "baseline",
    "seconds",
    "median",
    "max",
    "min",
    "mean",
    "cov",
    "repeats",
    "lat_mean_ns",
    "lat_p99_ns",
    "change_median",
    "change_max",
    "change_min",
    "change_lat_mean",
    "change_lat_p99",
    "verdict",
    "method",
    "ratio",
    "ci_low",
    "ci_high",
    "p_value",
    "record",
    "requirement",
    "host",
    "bound",
    "limit",
    "value",
    "passed",
    "change",
    "run_verdict",
    "host_verdict",
)


def csv_text(value: Any) -> Any:
    """A text cell as a spreadsheet should take it: what a terminal would act
    on as an escape (``untrusted.visible``: a newline too), and a cell that
    starts like a formula (``=``, ``+``, ``-``, ``@``: a label
    ``=HYPERLINK(…)``) quoted with ``'`` so that it stays text."""
    if not isinstance(value, str):
        return value
    value = visible(value)
    return "'" + value if value.startswith(("=", "+", "-", "@")) else value


def records_csv(records: list[dict[str, Any]]) -> str:
    """The rows under one fixed header (also when there are none)."""
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=CSV_COLUMNS)
    writer.writeheader()
    writer.writerows({k: csv_text(v) for k, v in r.items()} for r in records)
    return out.getvalue()


def series_records(stored: StoredRun) -> list[dict[str, Any]]:
    """Every per-second sample of every phase of a run (aggregate scope)."""
    out = []
    for phase in stored.phases:
        scope = phase.aggregate
        if scope is None:
            continue
        for ddir, series in scope.series.items():
            for t, iops, bw, lat in zip(
                series.t_s, series.iops, series.bytes_per_s, series.lat_mean_ns, strict=True
            ):
                out.append(
                    {
                        "run_id": stored.run.id,
                        "phase": phase.name,
                        "kind": str(phase.kind),
                        "repeat": phase.repeat,
                        "ddir": ddir,
                        "t_s": int(t),
                        "iops": float(iops),
                        "bytes_per_s": float(bw),
                        "lat_mean_ns": _num(float(lat)),
                    }
                )
    return out


def finite(value: Any) -> Any:
    """``value`` with every non-finite float (NaN, ±inf) as None, through
    dicts, lists and tuples: NaN is not JSON, and strict parsers reject it."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [finite(v) for v in value]
    return value


def to_json(doc: Any) -> str:
    """Every JSON document iorig prints: strict JSON (no NaN), one newline."""
    return json.dumps(finite(doc), indent=1, allow_nan=False) + "\n"


class JsonExporter:
    def run(self, analysis: RunAnalysis, options: RenderOptions) -> str:
        return to_json({"format_version": FORMAT_VERSION, "kind": "run"} | run_document(analysis))

    def comparison(self, cmp: Comparison, options: RenderOptions) -> str:
        doc = {"format_version": FORMAT_VERSION, "kind": "comparison"} | comparison_document(cmp)
        return to_json(doc)


class CsvExporter:
    """One row per run and measured phase, for a run and a comparison alike
    (every second of every scope is in ``--format seconds``)."""

    def run(self, analysis: RunAnalysis, options: RenderOptions) -> str:
        return records_csv(run_records(analysis))

    def comparison(self, cmp: Comparison, options: RenderOptions) -> str:
        return records_csv(comparison_records(cmp))
