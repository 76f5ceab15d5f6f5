"""Is what fio reported possible? Its figures checked against each other and
against physics before any is stored.

fio's own figures are redundant: its rates are its totals over its runtime,
its bytes are its I/Os times their sizes, its per-second logs add up to its
totals, and by Little's law its rate times its latency is the number of I/Os
it kept in flight, which its queue depth bounds. A fio with a bug, an output
file damaged on its way, or a binary that lies breaks one of these; such a
phase fails naming what does not add up, and its raw output is kept (see
docs/guide/running.md, Safety). The bounds are loose on purpose: a real fio meets each
identity to its rounding, so only a contradiction fails.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

import numpy as np

from iorig.fio.parse import DirStats, JobStats
from iorig.model import ScopeResult
from iorig.run.plan import PlannedPhase
from iorig.units import format_bytes

MAX_COUNT = 2**62  # I/Os or bytes beyond this are no fio's (and no SQLite integer's)
RATE_TOLERANCE = 0.001  # fio rounds its rates from its totals to this and better
# no job submits and completes an I/O in under a nanosecond, whatever the engine
MAX_IOPS_PER_JOB = 1e9
# in flight by Little's law against the depth asked: io_uring may round a ring
# up to a power of two, and a job's latency includes its own submission
IN_FLIGHT_FACTOR = 2.0
LOG_TOLERANCE = 0.10  # the logged seconds' sum against the total: window edges
WALL_SLACK_S = 5.0  # fio's runtime against the phase's wall time: clock steps, rounding

_FIELDS = (
    ("ios", "I/Os"),
    ("io_bytes", "bytes"),
    ("runtime_ms", "runtime (ms)"),
    ("iops", "IOPS"),
    ("bytes_per_s", "bytes/s"),
    ("clat_min_ns", "minimum latency"),
    ("clat_max_ns", "maximum latency"),
    ("clat_mean_ns", "mean latency"),
    ("lat_mean_ns", "mean total latency"),
)


def _number(value: float) -> str:
    return f"{value:.4g}" if abs(value) >= 1e6 or value != int(value) else f"{int(value):,}"


def _direction(  # noqa: PLR0911
    job: JobStats,
    ddir: str,
    d: DirStats,
    phase: PlannedPhase,
    wall_s: float | None,
) -> str | None:
    """What in one direction of one job cannot be, or None."""
    what = f"job {job.name}{'' if job.host == 'local' else ' on ' + job.host} ({ddir})"
    for name, label in _FIELDS:
        value = float(getattr(d, name))
        if not math.isfinite(value):
            return f"fio reported {label} of {what} as {value}: not a finite number"
        if value < 0:
            return f"fio reported {label} of {what} as {_number(value)}: negative"
    if d.ios > MAX_COUNT or d.io_bytes > MAX_COUNT:
        return (
            f"fio reported {_number(d.ios)} I/Os and {_number(d.io_bytes)} bytes for {what}: "
            "beyond what any storage moves (2^62)"
        )
    if (d.ios == 0) != (d.io_bytes == 0):
        return f"fio reported {d.ios:,} I/Os but {d.io_bytes:,} bytes for {what}"
    sizes = [s for w in phase.workloads if w.label == job.name for s in w.spec.block_sizes]
    if sizes and d.io_bytes > d.ios * max(sizes):
        return (
            f"fio reported {d.io_bytes:,} bytes from {d.ios:,} I/Os for {what}: more than "
            f"{format_bytes(max(sizes))} an I/O, the largest block size asked"
        )
    if d.runtime_ms > 0:
        for rate, total, label in ((d.iops, d.ios, "IOPS"), (d.bytes_per_s, d.io_bytes, "bytes/s")):
            expected = total * 1000 / d.runtime_ms
            if abs(rate - expected) > RATE_TOLERANCE * expected + 1:
                unit = "I/Os" if label == "IOPS" else "bytes"
                return (
                    f"fio reported {_number(rate)} {label} for {what} but {total:,} {unit} in "
                    f"{d.runtime_ms / 1000:g} s is {_number(expected)}"
                )
    if wall_s is not None and d.runtime_ms / 1000 > wall_s + WALL_SLACK_S:
        return (
            f"fio reported {d.runtime_ms / 1000:g} s of I/O for {what} in a phase that lasted "
            f"{wall_s:.1f} s"
        )
    if d.iops > MAX_IOPS_PER_JOB:
        return f"fio reported {_number(d.iops)} IOPS for {what}: more than one I/O a nanosecond"
    depth = max((w.spec.iodepth for w in phase.workloads if w.label == job.name), default=None)
    in_flight = d.iops * d.lat_mean_ns / 1e9
    if depth is not None and in_flight > IN_FLIGHT_FACTOR * depth + 1:
        return (
            f"fio reported {_number(d.iops)} IOPS at a mean latency of {d.lat_mean_ns / 1e3:.4g} µs"
            f" for {what}: {_number(round(in_flight))} I/Os in flight where its queue depth is "
            f"{depth}"
        )
    return None


def implausible_jobs(
    jobs: Iterable[JobStats], phase: PlannedPhase, wall_s: float | None
) -> str | None:
    """The first thing in fio's per-job figures that cannot be, or None.
    ``wall_s``: how long the phase took on this machine's clock."""
    for job in jobs:
        for name, value in (("usr CPU", job.usr_cpu_pct), ("sys CPU", job.sys_cpu_pct)):
            if not math.isfinite(value) or value < 0:
                return f"fio reported {name} of job {job.name} as {value}"
        for ddir, d in job.dirs.items():
            if problem := _direction(job, ddir, d, phase, wall_s):
                return problem
    return None


def implausible_series(scopes: Sequence[ScopeResult]) -> str | None:
    """The first scope whose per-second figures contradict its totals: a
    second that is not a finite non-negative rate, or seconds adding up to
    more I/Os than the whole phase did."""
    for scope in scopes:
        for ddir, series in scope.series.items():
            totals = scope.totals.get(ddir)
            for values, what in ((series.iops, "IOPS"), (series.bytes_per_s, "bytes/s")):
                if values.size and not (np.isfinite(values).all() and (values >= 0).all()):
                    return (
                        f"fio's per-second {what} of {scope.scope} ({ddir}) hold a value "
                        "that is negative or not a finite number"
                    )
            if totals is None or not series.iops.size:
                continue
            logged = float(series.iops.sum())
            # whole one-second windows: never more than the phase did, but for
            # a window's edges (fio closes one a millisecond or so late)
            if logged > (1 + LOG_TOLERANCE) * totals.ios + 10:
                return (
                    f"fio's per-second logs of {scope.scope} ({ddir}) add up to "
                    f"{_number(logged)} I/Os, more than the {totals.ios:,} it reported for "
                    "the whole phase"
                )
    return None


def did_nothing(jobs: Sequence[JobStats], phase: PlannedPhase) -> str | None:
    """A size-based phase (prefill, creation, checksum) whose jobs moved no
    byte: it has not done what the phases after it rely on."""
    if phase.duration_s is not None or not jobs or phase.bytes_to_write <= 0:
        return None
    if any(d.io_bytes > 0 for job in jobs for d in job.dirs.values()):
        return None
    return (
        f"fio reported that phase {phase.name!r} did no I/O: it was to go over "
        f"{format_bytes(phase.bytes_to_write)}"
    )
