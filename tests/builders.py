"""Model objects built by hand for unit tests: a phase with a given
per-second series, a stored run around some phases."""

from __future__ import annotations

from typing import Any

import numpy as np

from iorig.model import (
    AGGREGATE,
    ALL,
    Disclosure,
    Metric,
    PhaseKind,
    PhaseResult,
    PhaseStatus,
    RunRecord,
    RunStatus,
    Scope,
    ScopeResult,
    SecondHists,
    Series,
    StoredRun,
    Totals,
    histogram,
)


def totals(
    level: float,
    seconds: int,
    headline: Metric = Metric.IOPS,
    *,
    lat_ns: float = 1e6,
    hist: np.ndarray | None = None,
    bs: int = 8192,
) -> Totals:
    """Totals of a phase that ran ``seconds`` at ``level`` (IOPS or bytes/s)."""
    iops = level if headline is Metric.IOPS else level / bs
    if hist is None:
        hist = histogram.empty()
        hist[600] = 1000
    return Totals(
        ddir=ALL,
        ios=int(iops * seconds),
        io_bytes=int(iops * seconds * bs),
        iops=iops,
        bytes_per_s=iops * bs,
        lat_mean_ns=lat_ns,
        lat_min_ns=lat_ns / 10,
        lat_max_ns=lat_ns * 10,
        lat_stddev_ns=lat_ns / 10,
        slat_mean_ns=1e3,
        total_lat_mean_ns=lat_ns + 1e3,
        hist=hist,
    )


def series(
    per_second: np.ndarray,
    headline: Metric = Metric.IOPS,
    *,
    lat_ns: float | np.ndarray = 1e6,
    bs: int = 8192,
) -> Series:
    """``lat_ns``: every second's mean latency, or one per second."""
    n = per_second.size
    iops = per_second if headline is Metric.IOPS else per_second / bs
    return Series(
        ALL,
        np.arange(1, n + 1),
        np.asarray(iops, dtype=float),
        np.asarray(iops * bs, dtype=float),
        np.broadcast_to(np.asarray(lat_ns, dtype=float), (n,)).copy(),
        SecondHists.empty(n),
    )


def scope(
    per_second: np.ndarray,
    headline: Metric = Metric.IOPS,
    where: Scope = AGGREGATE,
    *,
    cpu: float = 10.0,
    lat_ns: float | np.ndarray = 1e6,
    hist: np.ndarray | None = None,
) -> ScopeResult:
    """``lat_ns``: the mean latency, or each second's (the phase's is their mean)."""
    level = float(np.mean(per_second)) if per_second.size else 0.0
    return ScopeResult(
        where,
        1,
        {ALL: totals(level, per_second.size, headline, lat_ns=float(np.mean(lat_ns)), hist=hist)},
        {ALL: series(per_second, headline, lat_ns=lat_ns)},
        cpu,
        0.0,
        cpu,
        0,
    )


def phase(
    name: str,
    per_second: np.ndarray,
    headline: Metric = Metric.IOPS,
    *,
    repeat: int = 0,
    kind: PhaseKind = PhaseKind.MEASURE,
    scopes: tuple[ScopeResult, ...] | None = None,
    point: dict[str, Any] | None = None,
    **over: Any,
) -> PhaseResult:
    n = per_second.size
    return PhaseResult(
        **{
            "seq": 1,
            "name": name,
            "kind": kind,
            "status": PhaseStatus.OK,
            "started_at": 0.0,
            "ended_at": float(n),
            "planned_s": float(n),
            "headline": headline,
            "scopes": scopes if scopes is not None else (scope(per_second, headline),),
            "engine": "libaio",
            "fio_version": "fio-3.33",
            "repeat": repeat,
            "point": point or {},
        }
        | over
    )


def record(run_id: str = "a1", label: str | None = None, **over: Any) -> RunRecord:
    fields: dict[str, Any] = dict(
        id=run_id,
        label=label,
        scenario="peak",
        scenario_version=1,
        title="Peak",
        scenario_origin="builtin:peak",
        scenario_text="",
        resolved={},
        params={"size": {"value": 1, "text": "16GiB", "origin": "default"}},
        profile=None,
        targets=[
            {"role": "data", "kind": "block", "path": "/dev/x", "given": "/dev/x", "size_bytes": 1}
        ],
        hosts=["local"],
        command="",
        iorig_version="0.1.0",
        fio_version="fio-3.33",
        status=RunStatus.OK,
        error=None,
        warnings=(),
        disclosure=Disclosure(),
        hostname="h",
        pid=1,
        started_at=0.0,
        ended_at=60.0,
    )
    fields.update(over)
    return RunRecord(**fields)


def stored(run_id: str, label: str | None, phases: list[PhaseResult], **over: Any) -> StoredRun:
    return StoredRun(record(run_id, label, **over), tuple(phases))
