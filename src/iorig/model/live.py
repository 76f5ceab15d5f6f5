"""What a running phase shows before it is stored: each host's figures per
second of its I/O, as they come (docs/methodology.md, "Live figures").

They are not the stored figures. Where fio streams its status (this
machine) a live second is fio's own cumulative counters and latency
histogram differenced once a second, with the error of a status's timing;
on fio servers it is what the host's kernel counted for fio's processes
(bytes per direction), with counts and latency derived from the phase's
job (``LiveSource``). The stored series, from fio's per-second logs, are
the figures of record.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import StrEnum

from iorig.model.histogram import METRIC_BOUNDS_NS


class LiveSource(StrEnum):
    """Where a live second's figures come from, which says how exact they are."""

    FIO_STATUS = "fio status"  # fio's counters and histogram: exact but for timing
    HOST_IO = "host I/O counters"  # the kernel's per-process bytes: counts, latency derived


@dataclass(frozen=True)
class LiveSecond:
    """One host's (or every host's) one direction over one second of I/O.

    ``ios`` and ``io_bytes`` are cumulative since the phase's I/O began (the
    counters a metrics endpoint exports); the ``_per_s`` figures are this
    second's. A figure the source cannot give is None: latency on fio
    servers of a paced workload, counts of I/O sizes that are not known."""

    phase_index: int  # the run's phases in order, from 0
    phase: str
    host: str  # the host's label, as results name it
    direction: str  # read, write or trim
    second: int  # whole seconds since the phase's I/O began (its end)
    t_s: float  # unix seconds (this machine's clock) when the second was read
    ios: int | None
    io_bytes: int
    ios_per_s: float | None
    bytes_per_s: float
    lat_mean_ns: float | None
    lat_p50_ns: float | None
    lat_p99_ns: float | None
    source: LiveSource
    # since the phase's I/O began, where the source has fio's histogram: the
    # completions' latencies added up, and counted in the metric buckets
    # (``histogram.metric_buckets``)
    lat_sum_ns: float | None = None
    lat_buckets: tuple[int, ...] | None = None

    def __post_init__(self) -> None:
        for name in (
            "bytes_per_s", "ios_per_s", "lat_mean_ns", "lat_p50_ns", "lat_p99_ns", "lat_sum_ns"
        ):  # fmt: skip
            value = getattr(self, name)
            if value is not None and not (math.isfinite(value) and value >= 0):
                raise ValueError(f"a live {name} must be a finite figure ≥ 0, not {value!r}")
        check_buckets(self.lat_buckets)


def check_buckets(buckets: tuple[int, ...] | None) -> None:
    """Counts in the metric buckets, or ValueError (the live file is data)."""
    if buckets is None:
        return
    if len(buckets) != len(METRIC_BOUNDS_NS) + 1 or not all(
        isinstance(n, int) and n >= 0 for n in buckets
    ):
        raise ValueError(f"not counts in the {len(METRIC_BOUNDS_NS) + 1} metric buckets")


@dataclass(frozen=True)
class PhaseTotal:
    """What one host did in one direction over a whole finished phase, as
    stored (fio's final figures): the exact value a counter ends on, and
    the latency histogram's (None where fio gave no histogram)."""

    phase_index: int
    phase: str
    host: str
    direction: str
    ios: int
    io_bytes: int
    lat_sum_ns: float | None = None
    lat_buckets: tuple[int, ...] | None = None

    def __post_init__(self) -> None:
        if self.lat_sum_ns is not None and not (
            math.isfinite(self.lat_sum_ns) and self.lat_sum_ns >= 0
        ):
            raise ValueError(f"a latency sum must be a finite figure ≥ 0, not {self.lat_sum_ns!r}")
        check_buckets(self.lat_buckets)


@dataclass(frozen=True)
class MetricPhase:
    """One phase of a run as its metrics label it, with bounded values only:
    ``phase`` is the scenario's phase (a sweep's or search's point has the
    name of the phase it runs, not its own), ``point`` the point's place
    among the run's points, from 0 (None outside sweeps and searches);
    ``directions`` what its workloads do, whose series count from 0 from
    the moment the phase is known."""

    phase_index: int
    phase: str
    point: int | None
    directions: tuple[str, ...]


@dataclass(frozen=True)
class LiveRun:
    """What a run is, for its metrics (``iorig_run_info``), and its phases
    known so far: all of them from its start where its plan says them, else
    each as it starts (a search decides them as it goes)."""

    label: str  # the run's --label, "" without one
    scenario: str
    hosts: tuple[tuple[str, str], ...]  # each host's label and its target(s), as text
    phases: tuple[MetricPhase, ...] = ()


@dataclass(frozen=True)
class LivePhase:
    """Where a running run is: the phase, how far into it, and its stop rule."""

    phase_index: int
    phase: str
    repeat: int
    index: int  # the phase's number in this run, from 1
    total: int | None  # phases in all, None while a search decides them
    elapsed_s: float
    fraction: float | None
    rule: str | None  # the steady-state or precision rule's state, in words
    source: LiveSource | None  # None before the first live second
    events: tuple[LiveEvent, ...] = ()  # the phase's events done so far
    # the phase's headline (what its report and summary lead with) and its
    # planned length (None: it runs through its data), for the live page
    metric: str = "bytes_per_s"
    duration_s: float | None = None
    coming: tuple[str, ...] = ()  # the phases still to run, where the plan says them


@dataclass(frozen=True)
class LiveEvent:
    """One event of the phase as it happened (``model/events.py``), as shown live."""

    at_s: float  # when the scenario asked for it, seconds from the phase's start
    label: str  # "stop-host 2", "throttle data to 50MB/s"
    status: str  # done, failed, skipped
    started_at: float  # unix seconds
    detail: str
