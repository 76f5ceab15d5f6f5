"""Seed 001's per-host figures of a multi-host run, as data: each measured
phase per host, the average per host and the spread between hosts. The
terminal/Markdown/HTML table and the JSON document are both made from it."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from iorig.analyze.analysis import RunAnalysis
from iorig.model import ALL, Metric, PhaseKind, Spread, spread
from iorig.model.combine import headline_scope


@dataclass(frozen=True)
class HostFigures:
    host: str
    level: float  # the phase's headline (IOPS or bytes/s) over the whole phase; NaN unknown
    lat_mean_ns: float | None
    lat_p99_ns: float | None
    latencies: Mapping[str, float]  # the criteria's mean latencies ("db read lat" -> ns)
    status: str
    error: str | None


@dataclass(frozen=True)
class HostPhase:
    phase: str
    repeat: int
    label: str  # "random-read", "random-read #2" for a later repeat
    headline: Metric
    hosts: tuple[HostFigures, ...]
    average: float | None  # per host, over the hosts with a figure
    spread: Spread | None  # slowest, fastest, CoV (None with fewer than two figures)


def per_host(analysis: RunAnalysis) -> list[HostPhase]:
    """Every measured phase of a run on two or more hosts; empty otherwise."""
    if len(analysis.run.hosts) < 2:
        return []
    out = []
    for phase in analysis.stored.phases:
        if phase.kind is not PhaseKind.MEASURE or not phase.host_scopes:
            continue
        label = phase.name + (f" #{phase.repeat + 1}" if phase.repeat else "")
        hosts = []
        for scope in phase.host_scopes:
            counted = headline_scope(phase, scope.scope.host)
            totals = counted.totals.get(ALL) if counted is not None else None
            host = scope.scope.host or ""
            hosts.append(
                HostFigures(
                    host=host,
                    level=totals.level(phase.headline) if totals else math.nan,
                    lat_mean_ns=totals.lat_mean_ns if totals else None,
                    lat_p99_ns=totals.percentiles_ns((99.0,))[99.0] if totals else None,
                    latencies=dict(analysis.host_latencies.get(label, {}).get(host, {})),
                    status=str(scope.status),
                    error=scope.error,
                )
            )
        levels = {h.host: h.level for h in hosts}
        finite = [v for v in levels.values() if not math.isnan(v)]
        out.append(
            HostPhase(
                phase=phase.name,
                repeat=phase.repeat,
                label=label,
                headline=phase.headline,
                hosts=tuple(hosts),
                average=sum(finite) / len(finite) if finite else None,
                spread=spread(levels),
            )
        )
    return out
