"""The devices of a phase's local targets, watched for the audit
(``analyze/devices.py``): the kernel's I/O counters of each
(``/sys/block/DEV/stat``, whole disks) at the phase's start and end, and
the block-throttle limits on it then (cgroup v1 ``blkio.throttle.*`` of
this process's cgroup and its parents, cgroup v2 ``io.max`` likewise).

The end is taken after the phase's events are undone: a throttle event's
own cap is an event of the run, not a limit found on the device. A fio
server's devices are not this machine's: only local targets are watched.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path

from iorig.analyze.devices import (
    CachedReads,
    DeviceTraffic,
    check_cached_reads,
    check_device_limits,
    check_device_traffic,
    fio_counts,
    fio_read_bytes,
)
from iorig.machine import throttle
from iorig.machine.pagecache import resident_bytes
from iorig.model import Finding, PhaseResult, PhaseStatus
from iorig.run.plan import Plan, PlannedPhase, PlannedWorkload
from iorig.scenario.schema import READS
from iorig.targets import Target

SYS_DEV = Path("/sys/dev/block")
PROC_CGROUP = Path("/proc/self/cgroup")
PROC_MOUNTS = Path("/proc/self/mounts")
V2_KEYS = ("rbps", "wbps", "riops", "wiops")
PAGE_BYTES = os.sysconf("SC_PAGE_SIZE")


@dataclass(frozen=True)
class Device:
    """A whole disk under some of a phase's workloads."""

    majmin: str
    own: tuple[str, ...]  # the targets' own device numbers (a partition's) and the disk's
    name: str
    max_request_bytes: int | None  # the smallest request fio's I/Os may be split to
    workloads: tuple[str, ...]
    direct: bool  # every workload on it bypasses the page cache
    buffered_reads: tuple[str, ...] = ()  # the workloads that read through the page cache

    @property
    def label(self) -> str:
        return f"{self.name} ({self.majmin})"


def _read(path: Path) -> str | None:
    try:
        return path.read_text()
    except (OSError, UnicodeDecodeError):
        return None


def device_number(target: Target) -> str | None:
    """major:minor of the block device a local target's I/O goes to, None
    where there is none (tmpfs, a network filesystem, a remote target)."""
    if target.kind == "remote":
        return None
    try:
        st = os.stat(target.path)
    except OSError:
        return None
    number = st.st_rdev if stat.S_ISBLK(st.st_mode) else st.st_dev
    majmin = f"{os.major(number)}:{os.minor(number)}"
    return majmin if (SYS_DEV / majmin).exists() else None


def devices(plan: Plan, phase: PlannedPhase) -> list[Device]:
    """The disks under the phase's workloads that do I/O on local files or
    devices (a file set's metadata I/O is no other program's)."""
    if plan.host_targets:
        return []
    found: dict[str, tuple[set[str], list[str], bool]] = {}
    readers: dict[str, list[str]] = {}
    for w in phase.workloads:
        if w.engine == "null" or w.target.kind == "fileset":
            continue
        own = device_number(w.target)
        if own is None:
            continue
        disk = throttle.whole_disk(own)
        owns, labels, direct = found.get(disk, (set(), [], True))
        found[disk] = (owns | {own, disk}, [*labels, w.label], direct and bool(w.spec.direct))
        if _reads_buffered(w):
            readers.setdefault(disk, []).append(w.label)
    out = []
    for disk, (owns, labels, direct) in found.items():
        sysfs = (SYS_DEV / disk).resolve()
        out.append(
            Device(
                disk,
                tuple(sorted(owns)),
                sysfs.name,
                smallest_split(sysfs / "queue"),
                tuple(labels),
                direct,
                tuple(readers.get(disk, ())),
            )
        )
    return out


def smallest_split(queue: Path) -> int | None:
    """The smallest requests the block layer may split fio's I/Os into on a
    device (its ``queue`` directory), None where unknown: at most
    ``max_sectors_kb``, and at most ``max_segments`` segments, each a page
    where fio's buffer is not physically contiguous (a loop device's 128
    split every 1 MiB I/O in two under its 1280 KiB), so the most requests
    fio's I/Os can have made."""
    limits = []
    if (kb := _number(queue / "max_sectors_kb")) is not None:
        limits.append(kb * 1024)
    if (segments := _number(queue / "max_segments")) is not None:
        limits.append(segments * PAGE_BYTES)
    return min(limits, default=None)


def _number(path: Path) -> int | None:
    text = (_read(path) or "").strip()
    return int(text) if text.isdigit() and int(text) > 0 else None


def _reads_buffered(w: PlannedWorkload) -> bool:
    return not w.spec.direct and w.spec.rw in READS and w.spec.read_pct != 0


def read_bytes(majmin: str) -> int | None:
    """Bytes the device has read since boot (sectors of 512 bytes)."""
    text = _read(SYS_DEV / majmin / "stat")
    fields = text.split() if text else []
    if len(fields) < 11 or not fields[2].isdigit():
        return None
    return int(fields[2]) * 512


def resident(phase: PlannedPhase) -> tuple[int, int] | None:
    """How much of what the phase's buffered readers read the page cache
    holds now, and of how much (files and block devices on this machine;
    None where none could be measured)."""
    held = region = 0
    measured = False
    for w in phase.workloads:
        if not _reads_buffered(w) or w.target.kind not in ("file", "block"):
            continue
        try:
            held += resident_bytes(w.target.path, w.offset_bytes, w.size_bytes)
        except OSError:
            continue
        region += w.size_bytes
        measured = True
    return (held, region) if measured else None


def counters(majmin: str) -> tuple[int, int] | None:
    """(I/Os, bytes) the device has completed since boot: reads, writes and
    discards (Documentation/ABI/stable/sysfs-block: sectors of 512 bytes)."""
    text = _read(SYS_DEV / majmin / "stat")
    fields = text.split() if text else []
    if len(fields) < 11 or not all(f.isdigit() for f in fields):
        return None
    n = [int(f) for f in fields]
    discards = (n[11], n[13]) if len(n) >= 15 else (0, 0)
    return n[0] + n[4] + discards[0], (n[2] + n[6] + discards[1]) * 512


def _cgroup_paths() -> tuple[str | None, str | None]:
    """This process's blkio (v1) and unified (v2) cgroup paths."""
    v1 = v2 = None
    for line in (_read(PROC_CGROUP) or "").splitlines():
        number, _, rest = line.partition(":")
        controllers, _, path = rest.partition(":")
        if number == "0" and not controllers:
            v2 = path
        elif "blkio" in controllers.split(","):
            v1 = path
    return v1, v2


def _chain(root: Path, path: str) -> list[Path]:
    """The cgroup ``path`` under ``root`` and each of its parents up to ``root``."""
    parts = [p for p in path.split("/") if p and p not in (".", "..")]
    return [root.joinpath(*parts[:i]) for i in range(len(parts), -1, -1)]


def _v2_root() -> Path | None:
    for line in (_read(PROC_MOUNTS) or "").splitlines():
        fields = line.split()
        if len(fields) > 2 and fields[2] == "cgroup2":
            return Path(fields[1])
    return None


def limits(numbers: tuple[str, ...]) -> list[str]:
    """Every block-throttle limit on the devices ``numbers`` (major:minor)
    that applies to this process, e.g. ``read_iops 500 (cgroup v1 blkio, /)``."""
    out: list[str] = []
    v1, v2 = _cgroup_paths()
    if v1 is not None:
        for where in _chain(throttle.V1, v1):
            for name in ("read_iops", "write_iops", "read_bps", "write_bps"):
                for line in (_read(where / f"blkio.throttle.{name}_device") or "").splitlines():
                    device, _, value = line.partition(" ")
                    if device in numbers and value.strip().isdigit() and int(value):
                        place = "/" + "/".join(where.relative_to(throttle.V1).parts)
                        out.append(f"{name} {int(value)} on {device} (cgroup v1 blkio, {place})")
    root = _v2_root()
    if v2 is not None and root is not None:
        for where in _chain(root, v2):
            for line in (_read(where / "io.max") or "").splitlines():
                device, *pairs = line.split()
                set_ = [
                    p
                    for p in pairs
                    if p.partition("=")[0] in V2_KEYS and p.partition("=")[2] not in ("", "max")
                ]
                if device in numbers and set_:
                    place = "/" + "/".join(where.relative_to(root).parts)
                    out.append(f"{' '.join(set_)} on {device} (cgroup v2 io.max, {place})")
    return out


class DeviceWatch:
    """One phase's devices: sampled when made (before fio starts), judged by
    ``findings`` once the phase's result is known."""

    def __init__(self, plan: Plan, phase: PlannedPhase) -> None:
        try:
            self.devices = devices(plan, phase)
        except (OSError, ValueError):  # sysfs as it should not be: no audit, never no run
            self.devices = []
        self._start = {d.majmin: counters(d.majmin) for d in self.devices}
        self._reads = {d.majmin: read_bytes(d.majmin) for d in self.devices if d.buffered_reads}
        self._limits = {d.majmin: limits(d.own) for d in self.devices}
        # what of its data the page cache holds as it starts (fio's invalidate
        # then drops what is clean): said with a cached-reads finding
        self._resident = resident(phase) if self._reads and not plan.host_targets else None

    def findings(self, result: PhaseResult) -> list[tuple[str, Finding]]:
        """What the phase's devices show, each with its device (for ``merge``)."""
        out: list[tuple[str, Finding]] = []
        for d in self.devices:
            found = list(dict.fromkeys(self._limits[d.majmin] + limits(d.own)))
            out += [(d.label, f) for f in check_device_limits(result.name, d.label, found)]
            if result.status is not PhaseStatus.OK:
                continue
            out += [(d.label, f) for f in self._cached_reads(d, result)]
            start, end = self._start[d.majmin], counters(d.majmin)
            if start is None or end is None or not d.direct:
                continue  # buffered I/O: what reaches the device is the page cache's
            ios, io_bytes, reqs = fio_counts(result, d.workloads, d.max_request_bytes)
            seen = DeviceTraffic(d.label, end[0] - start[0], end[1] - start[1], ios, io_bytes, reqs)
            out += [(d.label, f) for f in check_device_traffic(result.name, seen)]
        return out

    def _cached_reads(self, d: Device, result: PhaseResult) -> list[Finding]:
        start, end = self._reads.get(d.majmin), read_bytes(d.majmin)
        if not d.buffered_reads or start is None or end is None:
            return []
        held, region = self._resident or (None, 0)
        reads = CachedReads(
            d.label, fio_read_bytes(result, d.buffered_reads), end - start, held, region
        )
        return check_cached_reads(result.name, reads)
