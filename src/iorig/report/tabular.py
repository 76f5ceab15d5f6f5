"""Plain-data views of runs for ``--json`` output and scripts."""

from __future__ import annotations

import math
from typing import Any

from iorig.analyze.summary import PhaseSummary, SeriesStats, summarize_phase
from iorig.store import RunRecord, StoredRun


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
    return {
        "name": s.name,
        "kind": s.kind,
        "repeat": s.repeat,
        "status": s.status,
        "metric": s.headline,
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
        "error": s.error,
    }


def run_dict(run: RunRecord) -> dict[str, Any]:
    return {
        "id": run.id,
        "scenario": run.scenario,
        "scenario_version": run.scenario_version,
        "title": run.title,
        "origin": run.scenario_origin,
        "profile": run.profile,
        "status": run.status,
        "error": run.error,
        "started_at": run.started_at,
        "ended_at": run.ended_at,
        "parameters": {k: v["text"] for k, v in run.params.items()},
        "targets": run.targets,
        "hosts": run.hosts,
        "fio_version": run.fio_version,
        "iorig_version": run.iorig_version,
        "warnings": run.warnings,
    }


def show_dict(stored: StoredRun) -> dict[str, Any]:
    summaries = [summarize_phase(p) for p in stored.phases]
    return {
        "run": run_dict(stored.run),
        "engines": sorted({p.engine for p in stored.phases if p.engine}),
        "phases": [phase_dict(s) for s in summaries if s.kind == "measure"],
        "other_phases": [phase_dict(s) for s in summaries if s.kind != "measure"],
    }
