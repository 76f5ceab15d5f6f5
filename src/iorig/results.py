"""Result types. Units are in the field names; latencies are fio completion
latency (clat: from submission to completion) unless the name says otherwise.

Histograms are counts in fio's 1,856-bin layout (see ``iorig.fio.histogram``);
percentiles are always computed from them, never averaged.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from iorig.fio import histogram

if TYPE_CHECKING:
    from iorig.analyze.steady import SteadyState

ALL = "all"  # the ddir key that combines read, write and trim
ALL_WORKLOADS = ""  # ScopeResult.workload of a phase's aggregate
ALL_HOSTS = ""  # ScopeResult.host of an aggregate over hosts


@dataclass(frozen=True)
class Totals:
    """One I/O direction (or ``all``) of one scope over a whole phase."""

    ddir: str
    ios: int
    io_bytes: int
    iops: float
    bytes_per_s: float
    lat_mean_ns: float
    lat_min_ns: float
    lat_max_ns: float
    lat_stddev_ns: float
    slat_mean_ns: float
    total_lat_mean_ns: float  # slat + clat, fio's "lat"
    hist: np.ndarray = field(compare=False, repr=False)

    def percentiles_ns(
        self, points: tuple[float, ...] = histogram.DEFAULT_PERCENTILES
    ) -> dict[float, float]:
        return histogram.percentiles(self.hist, points)


@dataclass(frozen=True)
class Series:
    """Per-second samples of one direction of one scope.

    ``t_s[i]`` is the end of the i-th one-second window since the phase's fio
    jobs started; only windows complete in every job are kept.
    ``lat_mean_ns`` is NaN for a second without completions; ``hist`` holds
    one histogram row per second (may be empty when fio logged none).
    """

    ddir: str
    t_s: np.ndarray = field(compare=False)
    iops: np.ndarray = field(compare=False)
    bytes_per_s: np.ndarray = field(compare=False)
    lat_mean_ns: np.ndarray = field(compare=False)
    hist: np.ndarray = field(compare=False, repr=False)

    def __len__(self) -> int:
        return int(self.t_s.size)


@dataclass(frozen=True)
class ScopeResult:
    """One workload on one host, or an aggregate (empty workload/host name)."""

    workload: str
    host: str
    jobs: int
    totals: dict[str, Totals]
    series: dict[str, Series]
    usr_cpu_pct: float  # mean per fio job, % of one CPU
    sys_cpu_pct: float
    busiest_job_cpu_pct: float  # usr+sys of the busiest job
    errors: int  # fio jobs that ended with an error
    status: str = "ok"  # "failed" for a host that dropped out of a multi-host phase
    error: str | None = None

    @property
    def is_aggregate(self) -> bool:
        return self.workload == ALL_WORKLOADS


@dataclass(frozen=True)
class PhaseResult:
    """A finished (or interrupted) phase, ready to store."""

    seq: int
    name: str
    kind: str
    status: str  # ok | aborted | failed
    started_at: float  # unix seconds
    ended_at: float
    planned_s: float | None
    headline: str  # "iops" for random workloads, "bytes_per_s" for sequential
    scopes: tuple[ScopeResult, ...]  # aggregate first, then per workload
    job_text: str = ""
    command: tuple[str, ...] = ()
    fio_version: str = ""
    engine: str = ""
    fio_output: str = ""
    fio_stderr: str = ""
    error: str | None = None
    repeat: int = 0
    steady: SteadyState | None = None  # warm-up phases that ran "until: steady"
    # Where a search put this phase: {"bs": "4KiB", "rw": "read"} for a sweep
    # point, {"iodepth": 16, ...} for a knee step, {"fraction": 0.5, ...} for a
    # load point. Empty for an ordinary scenario phase.
    point: dict[str, Any] = field(default_factory=dict)

    @property
    def aggregate(self) -> ScopeResult | None:
        return self.scopes[0] if self.scopes else None
