"""Result types. Units are in the field names; latencies are fio completion
latency (clat: from submission to completion) unless the name says otherwise.

Histograms are counts in fio's 1,856-bin layout (see ``iorig.model.histogram``);
percentiles are always computed from them, never averaged.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

import numpy as np

from iorig.model import histogram
from iorig.model.checkpoint import CheckpointRecord
from iorig.model.events import EventRecord, EventStatus
from iorig.model.kinds import Metric, PhaseKind, PhaseStatus
from iorig.model.precision import PrecisionState
from iorig.model.secondhists import SecondHists
from iorig.model.steady import SteadyState
from iorig.model.training import TrainingRecord


class ScopeKind(StrEnum):
    AGGREGATE = "aggregate"  # every workload on every host
    HOST = "host"  # every workload on one host (multi-host runs)
    WORKLOAD = "workload"  # one workload on one host


@dataclass(frozen=True)
class Scope:
    """What a set of figures covers. ``None`` means "all": the aggregate is
    ``Scope()``, a host's share ``Scope(host=h)``, a workload on a host
    ``Scope(workload=w, host=h)``."""

    workload: str | None = None
    host: str | None = None

    @property
    def kind(self) -> ScopeKind:
        if self.workload is not None:
            return ScopeKind.WORKLOAD
        return ScopeKind.AGGREGATE if self.host is None else ScopeKind.HOST

    def __str__(self) -> str:
        parts = [p for p in (self.workload, self.host) if p is not None]
        return " on ".join(parts) or "all"


AGGREGATE = Scope()


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
        """Within the fastest and slowest completion (see ``histogram.percentiles``)."""
        return histogram.percentiles(self.hist, points, (self.lat_min_ns, self.lat_max_ns))

    def level(self, metric: Metric) -> float:
        return self.iops if metric is Metric.IOPS else self.bytes_per_s


@dataclass(frozen=True)
class Series:
    """Per-second samples of one direction of one scope.

    ``t_s[i]`` is the end of the i-th one-second window since the phase's fio
    jobs started; only windows complete in every job are kept.
    ``lat_mean_ns`` is NaN for a second without completions; ``hist`` holds
    one histogram row per second, sparse (no rows when fio logged none).
    """

    ddir: str
    t_s: np.ndarray = field(compare=False)
    iops: np.ndarray = field(compare=False)
    bytes_per_s: np.ndarray = field(compare=False)
    lat_mean_ns: np.ndarray = field(compare=False)
    hist: SecondHists = field(compare=False, repr=False)

    def __len__(self) -> int:
        return int(self.t_s.size)

    def values(self, metric: Metric) -> np.ndarray:
        return self.iops if metric is Metric.IOPS else self.bytes_per_s


@dataclass(frozen=True)
class ScopeResult:
    """The figures of one scope of a phase."""

    scope: Scope
    jobs: int
    totals: dict[str, Totals]
    # by direction; a stored scope's may be read only when used (store/series.py)
    series: Mapping[str, Series]
    usr_cpu_pct: float  # mean per fio job, % of one CPU
    sys_cpu_pct: float
    busiest_job_cpu_pct: float  # usr+sys of the busiest job
    errors: int  # fio jobs that ended with an error
    status: PhaseStatus = PhaseStatus.OK  # FAILED for a host that dropped out of a phase
    error: str | None = None

    @classmethod
    def failed(cls, scope: Scope, error: str) -> ScopeResult:
        """A scope that produced nothing (a host that gave no results)."""
        return cls(scope, 0, {}, {}, 0.0, 0.0, 0.0, 0, PhaseStatus.FAILED, error)


ERROR_KINDS = ("read", "write", "verify", "unknown")


@dataclass(frozen=True)
class IoErrorCount:
    """I/O errors fio reported in a phase, of one type on one host.

    ``kind`` is fio's error class (td_error.c): ``verify`` for EILSEQ (a
    block that failed its check), else the I/O's direction, ``read`` or
    ``write`` (a sync or trim counts as write); ``unknown`` for errors fio
    counted (``total_err``) but did not print, named by its first error."""

    kind: str
    message: str  # fio's text of the error, e.g. "Input/output error"
    count: int
    host: str | None = None  # the fio server it happened on (None: this machine)

    @property
    def type(self) -> str:
        return f"{self.kind}: {self.message}"


def errors_by_type(counts: tuple[IoErrorCount, ...]) -> dict[str, int]:
    """Counts per type (``"read: Input/output error"``), hosts added up, most first."""
    out: dict[str, int] = {}
    for c in counts:
        out[c.type] = out.get(c.type, 0) + c.count
    return dict(sorted(out.items(), key=lambda kv: (-kv[1], kv[0])))


@dataclass(frozen=True)
class GeneratorCpu:
    """The CPU time fio used during a phase, measured by iorig from outside
    fio (/proc): every thread of every fio process, which fio's own per-job
    figures are not (they leave out io_uring's worker threads and fio's
    parent), over ``wall_s`` seconds while its jobs did I/O; and the CPU
    time other processes took of the CPUs fio may run on meanwhile (None:
    not measured, runs stored before)."""

    cpu_s: float
    wall_s: float
    others_cpu_s: float | None = None

    @property
    def cpus_busy(self) -> float:
        """CPUs' worth kept busy on average."""
        return self.cpu_s / self.wall_s if self.wall_s > 0 else 0.0

    @property
    def others_cpus_busy(self) -> float:
        """CPUs' worth other processes kept busy of those fio may run on."""
        if self.others_cpu_s is None or self.wall_s <= 0:
            return 0.0
        return self.others_cpu_s / self.wall_s


@dataclass(frozen=True)
class HeadlineOf:
    """The workloads a phase's headline figures count, where the scenario
    named some (Exchange's transactional I/O is its database threads, not
    its log or maintenance streams; docs/methodology.md §4), and how many
    seconds each host's series began after the first host's, to sum the
    named workloads' hosts on the aggregate's axis."""

    workloads: tuple[str, ...]
    host_shifts_s: Mapping[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class PhaseResult:
    """A finished (or interrupted) phase, ready to store."""

    seq: int
    name: str
    kind: PhaseKind
    status: PhaseStatus
    started_at: float  # unix seconds
    ended_at: float
    planned_s: float | None
    headline: Metric
    scopes: tuple[ScopeResult, ...]  # the aggregate first, then hosts, then workloads
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
    events: tuple[EventRecord, ...] = ()  # what was done to the system during the phase
    # unix seconds at t_s = 0 of the series: where fio servers' wall-clock logs
    # tell, else when fio's live status said its jobs began; None (runs stored
    # before, phases too short for a status) and started_at stands in for it
    series_origin: float | None = None
    # I/O errors fio reported, per type and host: every one where a workload
    # sets continue_on_error (fio prints each), else the error that ended a job
    io_errors: tuple[IoErrorCount, ...] = ()
    precision: PrecisionState | None = None  # measure phases that ran "until: precise"
    # fio's CPU as iorig measured it (this machine); None where it could not
    # (fio servers, runs stored before) and fio's per-job figures stand in
    generator_cpu: GeneratorCpu | None = None
    # a training phase's accelerators and when each batch arrived (MLPerf Storage)
    training: TrainingRecord | None = None
    # a checkpoint phase's processes and how long each took (MLPerf Storage)
    checkpoint: CheckpointRecord | None = None
    # the workloads its headline counts; None: every one (model.combine.headline_scope)
    headline_of: HeadlineOf | None = None

    @property
    def io_error_total(self) -> int:
        return sum(c.count for c in self.io_errors)

    @property
    def origin(self) -> float:
        """Unix seconds at the series' second 0: where events and phases meet on one axis."""
        return self.series_origin if self.series_origin is not None else self.started_at

    def event_at_s(self, event: EventRecord) -> float | None:
        """Where an event of this phase fell: seconds from ``origin``, the axis
        of the per-second figures its impact is read from, the timeline and
        the events table; None for one that never happened. It may differ
        from when the event was asked for (``at_s``, on the events' clock):
        fio servers' series count from the first host to begin, the events
        from the last; runs stored before commit 542d934 counted them from
        fio's launch."""
        if event.started_at == 0 or event.status is EventStatus.SKIPPED:
            return None
        return event.started_at - self.origin

    @property
    def aggregate(self) -> ScopeResult | None:
        return next((s for s in self.scopes if s.scope == AGGREGATE), None)

    @property
    def host_scopes(self) -> list[ScopeResult]:
        """Each host's share of a multi-host phase (empty on one host)."""
        return [s for s in self.scopes if s.scope.kind is ScopeKind.HOST]

    def workload_scopes(self, names: list[str] | None = None) -> list[ScopeResult]:
        """Per workload and host, optionally only the named workloads."""
        return [
            s
            for s in self.scopes
            if s.scope.kind is ScopeKind.WORKLOAD and (names is None or s.scope.workload in names)
        ]

    @property
    def elapsed_s(self) -> float:
        return self.ended_at - self.started_at
