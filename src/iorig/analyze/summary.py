"""Per-phase summaries: X-Ray's median / maximum / minimum of the per-second
series, stability figures, and latency percentiles from merged histograms."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import numpy as np

from iorig.model import (
    ALL,
    DDIRS,
    GeneratorCpu,
    Metric,
    PhaseKind,
    PhaseResult,
    PhaseStatus,
    PrecisionState,
    SeriesStats,
    Totals,
    series_stats,
)
from iorig.model.combine import headline_scope

REPORTED_PERCENTILES = (50.0, 90.0, 99.0, 99.9, 99.99)


@dataclass(frozen=True)
class DirectionFigures:
    """One I/O direction of a phase over its whole length (fio's read, write
    and trim sections, all jobs and hosts merged)."""

    ddir: str
    ios: int
    iops: float
    bytes_per_s: float
    lat_mean_ns: float
    lat_p99_ns: float


@dataclass(frozen=True)
class PhaseSummary:
    name: str
    kind: PhaseKind
    status: PhaseStatus
    repeat: int
    headline: Metric
    per_second: SeriesStats  # of the headline metric
    iops: float  # over the whole phase
    bytes_per_s: float
    ios: int
    io_bytes: int
    lat_mean_ns: float
    lat_min_ns: float
    lat_max_ns: float
    lat_percentiles_ns: dict[float, float]
    elapsed_s: float
    jobs: int
    usr_cpu_pct: float
    sys_cpu_pct: float
    error: str | None
    point: dict
    precision: PrecisionState | None = None  # until: precise phases
    directions: tuple[DirectionFigures, ...] = ()  # each direction with I/O, in fio's order
    generator_cpu: GeneratorCpu | None = None  # fio's CPU as iorig measured it
    # the workloads the figures count where the scenario named some; () every one
    headline_workloads: tuple[str, ...] = ()

    @property
    def trims(self) -> bool:
        """The phase discarded: its directions are unlike (a trim moves no data),
        so reports give each direction on its own too."""
        return any(d.ddir == "trim" for d in self.directions)

    @property
    def headline_value(self) -> float:
        return self.iops if self.headline is Metric.IOPS else self.bytes_per_s


def summarize_phase(phase: PhaseResult) -> PhaseSummary:
    scope = headline_scope(phase)
    totals = scope.totals.get(ALL) if scope else None
    series = scope.series.get(ALL) if scope else None
    values = series.values(phase.headline) if series is not None else np.zeros(0)
    nan = float("nan")
    return PhaseSummary(
        name=phase.name,
        kind=phase.kind,
        status=phase.status,
        repeat=phase.repeat,
        headline=phase.headline,
        per_second=series_stats(values),
        iops=totals.iops if totals else nan,
        bytes_per_s=totals.bytes_per_s if totals else nan,
        ios=totals.ios if totals else 0,
        io_bytes=totals.io_bytes if totals else 0,
        lat_mean_ns=totals.lat_mean_ns if totals else nan,
        lat_min_ns=totals.lat_min_ns if totals else nan,
        lat_max_ns=totals.lat_max_ns if totals else nan,
        lat_percentiles_ns=(
            totals.percentiles_ns(REPORTED_PERCENTILES)
            if totals
            else {p: nan for p in REPORTED_PERCENTILES}
        ),
        elapsed_s=phase.elapsed_s,
        jobs=scope.jobs if scope else 0,
        usr_cpu_pct=scope.usr_cpu_pct if scope else nan,
        sys_cpu_pct=scope.sys_cpu_pct if scope else nan,
        error=phase.error,
        point=dict(phase.point),
        precision=phase.precision,
        directions=_directions(scope.totals if scope else {}),
        generator_cpu=phase.generator_cpu,
        headline_workloads=phase.headline_of.workloads if phase.headline_of else (),
    )


def _directions(totals: Mapping[str, Totals]) -> tuple[DirectionFigures, ...]:
    return tuple(
        DirectionFigures(
            d, t.ios, t.iops, t.bytes_per_s, t.lat_mean_ns, t.percentiles_ns((99.0,))[99.0]
        )
        for d in DDIRS
        if (t := totals.get(d)) is not None and t.ios
    )


def measured(phases: Iterable[PhaseResult]) -> list[PhaseSummary]:
    return [summarize_phase(p) for p in phases if p.kind is PhaseKind.MEASURE]
