"""Per-phase summaries: X-Ray's median / maximum / minimum of the per-second
series, stability figures, and latency percentiles from merged histograms."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from iorig.results import ALL, PhaseResult

REPORTED_PERCENTILES = (50.0, 90.0, 99.0, 99.9, 99.99)


@dataclass(frozen=True)
class SeriesStats:
    """Statistics of one per-second series (e.g. IOPS each second)."""

    n: int
    median: float
    maximum: float
    minimum: float
    mean: float
    stdev: float

    @property
    def cov(self) -> float:
        """Coefficient of variation (stdev / mean); NaN when undefined."""
        return self.stdev / self.mean if self.mean and self.n > 1 else float("nan")


def series_stats(values: np.ndarray) -> SeriesStats:
    values = np.asarray(values, dtype=float)
    values = values[~np.isnan(values)]
    if values.size == 0:
        nan = float("nan")
        return SeriesStats(0, nan, nan, nan, nan, nan)
    return SeriesStats(
        n=int(values.size),
        median=float(np.median(values)),
        maximum=float(values.max()),
        minimum=float(values.min()),
        mean=float(values.mean()),
        stdev=float(values.std(ddof=1)) if values.size > 1 else 0.0,
    )


@dataclass(frozen=True)
class PhaseSummary:
    name: str
    kind: str
    status: str
    repeat: int
    headline: str  # "iops" or "bytes_per_s"
    per_second: SeriesStats  # of the headline metric
    iops: float  # over the whole phase
    bytes_per_s: float
    ios: int
    lat_mean_ns: float
    lat_min_ns: float
    lat_max_ns: float
    lat_percentiles_ns: dict[float, float]
    elapsed_s: float
    jobs: int
    usr_cpu_pct: float
    sys_cpu_pct: float
    error: str | None

    @property
    def headline_value(self) -> float:
        return self.iops if self.headline == "iops" else self.bytes_per_s


def summarize_phase(phase: PhaseResult) -> PhaseSummary:
    scope = phase.aggregate
    totals = scope.totals.get(ALL) if scope else None
    series = scope.series.get(ALL) if scope else None
    values = getattr(series, phase.headline) if series is not None else np.zeros(0)
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
        lat_mean_ns=totals.lat_mean_ns if totals else nan,
        lat_min_ns=totals.lat_min_ns if totals else nan,
        lat_max_ns=totals.lat_max_ns if totals else nan,
        lat_percentiles_ns=(
            totals.percentiles_ns(REPORTED_PERCENTILES)
            if totals
            else {p: nan for p in REPORTED_PERCENTILES}
        ),
        elapsed_s=phase.ended_at - phase.started_at,
        jobs=scope.jobs if scope else 0,
        usr_cpu_pct=scope.usr_cpu_pct if scope else nan,
        sys_cpu_pct=scope.sys_cpu_pct if scope else nan,
        error=phase.error,
    )


def measured(phases: tuple[PhaseResult, ...] | list[PhaseResult]) -> list[PhaseSummary]:
    return [summarize_phase(p) for p in phases if p.kind == "measure"]


def is_number(value: float | None) -> bool:
    return value is not None and not math.isnan(value)
