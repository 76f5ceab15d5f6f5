"""What a target's device did besides fio, and limits on it: two
audit findings from the kernel's own view of the device during a phase.

* ``device-busy``: the device's I/O counters (``/sys/block/DEV/stat``,
  taken at the phase's start and end) show materially more I/Os or bytes
  than fio did: something else used the device while it was measured, and
  the phase's figures are what was left of it. fio's I/Os are counted as
  the device sees them: one larger than the device's largest request is
  split into several.
* ``device-throttled``: a block-throttle limit (cgroup v1
  ``blkio.throttle.*``, cgroup v2 ``io.max``) was on the device: the
  figures may show the limit, not the device.
* ``cached-reads``: a phase read with buffered I/O, and the device read
  materially less than fio did: the page cache answered the rest (data an
  earlier phase left there, or the phase's own reads read again), so the
  figures are memory's. How much of the data the page cache held when the
  phase started (``mincore``) is said with it.

Pure functions over what ``run/devwatch.py`` sampled.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

from iorig.model import Finding, PhaseResult
from iorig.units import format_bytes, format_si

# "materially more": beyond fio's own by this share, and by this floor (a
# filesystem's journal and metadata, a daemon's log line, during a phase)
SHARE = 0.25
FLOOR_IOS = 256
FLOOR_BYTES = 16 << 20


@dataclass(frozen=True)
class DeviceTraffic:
    """One device over one phase: the kernel's counts and fio's."""

    device: str  # as messages name it: "loop0 (7:0)"
    ios: int  # reads, writes and discards the device completed
    io_bytes: int
    fio_ios: int  # fio's I/Os on targets on this device
    fio_bytes: int
    # fio's I/Os as the device sees them: each split at the device's largest request
    fio_requests: int


def requests(ios: int, io_bytes: int, max_request_bytes: int | None) -> int:
    """I/Os of ``io_bytes`` in all, as requests to a device that takes at most
    ``max_request_bytes`` at once."""
    if ios <= 0 or not max_request_bytes:
        return max(ios, 0)
    return ios * max(1, math.ceil(io_bytes / ios / max_request_bytes))


def fio_counts(
    result: PhaseResult, workloads: Sequence[str], max_request_bytes: int | None
) -> tuple[int, int, int]:
    """fio's (I/Os, bytes, device requests) of the named workloads of a phase
    (the aggregate's when the phase has no per-workload figures)."""
    scopes = [s for s in result.scopes if s.scope.workload in workloads]
    if not scopes and result.aggregate is not None:
        scopes = [result.aggregate]
    ios = io_bytes = reqs = 0
    for scope in scopes:
        for ddir in ("read", "write", "trim"):
            if (t := scope.totals.get(ddir)) is not None:
                ios += t.ios
                io_bytes += t.io_bytes
                reqs += requests(t.ios, t.io_bytes, max_request_bytes)
    return ios, io_bytes, reqs


def check_device_traffic(phase: str, traffic: DeviceTraffic) -> list[Finding]:
    """``device-busy`` when the device did materially more than fio."""
    extra_ios = traffic.ios - traffic.fio_requests
    extra_bytes = traffic.io_bytes - traffic.fio_bytes
    if not (
        extra_ios > SHARE * traffic.fio_requests + FLOOR_IOS
        or extra_bytes > SHARE * traffic.fio_bytes + FLOOR_BYTES
    ):
        return []
    return [
        Finding(
            "device-busy",
            f"device {traffic.device} did {format_si(traffic.ios)} I/Os "
            f"({format_bytes(traffic.io_bytes)}) during phase {phase!r}, fio "
            f"{format_si(traffic.fio_ios)} ({format_bytes(traffic.fio_bytes)}): something else "
            "used the device while it was measured, and the figures are what it left",
            "measure on a device nothing else uses (iostat or /proc/diskstats show what does)",
            phase,
        )
    ]


@dataclass(frozen=True)
class CachedReads:
    """A phase's buffered reads on one device: what fio read, what the
    device read, and how much of the region read the page cache held at
    the phase's start (None: not measured)."""

    device: str
    fio_bytes: int
    device_bytes: int
    resident_bytes: int | None = None
    region_bytes: int = 0


def fio_read_bytes(result: PhaseResult, workloads: Sequence[str]) -> int:
    """The bytes fio read in the named workloads of a phase."""
    return sum(
        t.io_bytes
        for s in result.scopes
        if s.scope.workload in workloads and (t := s.totals.get("read")) is not None
    )


def check_cached_reads(phase: str, reads: CachedReads) -> list[Finding]:
    """``cached-reads`` when the device read materially less than fio's
    buffered reads (the same share and floor as ``device-busy``)."""
    missing = reads.fio_bytes - reads.device_bytes
    if not (missing > SHARE * reads.fio_bytes and missing > FLOOR_BYTES):
        return []
    share = reads.device_bytes / reads.fio_bytes * 100
    held = ""
    if reads.resident_bytes and reads.region_bytes:
        held = (
            f"; {format_bytes(reads.resident_bytes)} of the {format_bytes(reads.region_bytes)} "
            f"it reads ({reads.resident_bytes / reads.region_bytes * 100:.0f} %) were in the "
            "page cache when it started"
        )
    return [
        Finding(
            "cached-reads",
            f"phase {phase!r} read {format_bytes(reads.fio_bytes)} with buffered I/O and device "
            f"{reads.device} only {format_bytes(reads.device_bytes)} ({share:.0f} %): the page "
            "cache answered the rest (or the filesystem, for blocks never written), so the "
            f"figures are memory's, not the storage's{held}",
            "read with direct I/O, or a working set larger than the page cache can hold "
            "(bare fio's buffered reads of a small file are answered from memory too)",
            phase,
        )
    ]


def check_device_limits(phase: str, device: str, limits: Sequence[str]) -> list[Finding]:
    """``device-throttled`` when a block-throttle limit was on the device."""
    if not limits:
        return []
    return [
        Finding(
            "device-throttled",
            f"device {device} had a block-throttle limit during phase {phase!r}: "
            f"{'; '.join(limits)}: the figures may show the limit, not the device",
            "remove the limit before measuring, or state it with the results",
            phase,
        )
    ]


def merge(found: Sequence[tuple[str, Finding]]) -> list[Finding]:
    """One finding per device and kind (``found``: device, finding): the first
    phase's text, naming the other phases that had it too."""
    first: dict[tuple[str, str], Finding] = {}
    others: dict[tuple[str, str], list[str]] = {}
    for device, f in found:
        key = (device, f.code)
        if key not in first:
            first[key], others[key] = f, []
        elif f.phase and f.phase != first[key].phase and f.phase not in others[key]:
            others[key].append(f.phase)
    return [
        replace(f, message=f"{f.message} — also in {', '.join(others[key])}") if others[key] else f
        for key, f in first.items()
    ]
