"""The kernel's block throttle, for ``throttle`` events: cap a local block
device's IOPS or bandwidth (a degraded disk, a rebuild eating bandwidth).

It uses cgroup v1's root ``blkio.throttle.*_device`` files, which cap every
process of the root blkio cgroup — fio started by iorig among them. Direct
I/O is capped; buffered writes reach the device through writeback, outside
the cap. Caps that were on a device before an event are put back when the
event's cap is lifted. On cgroup v2 only machines (``io.max`` cannot be set
on the root) throttle events are refused before the run, saying so.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from iorig.errors import UserError

V1 = Path("/sys/fs/cgroup/blkio")
_FILES = ("read_iops", "write_iops", "read_bps", "write_bps")


def problem() -> str | None:
    """Why this machine cannot throttle, or None."""
    if not (V1 / "blkio.throttle.read_iops_device").exists():
        return (
            "throttle events need cgroup v1's block throttle "
            f"({V1}/blkio.throttle.*_device), which this machine does not have"
        )
    if not os.access(V1 / "blkio.throttle.read_iops_device", os.W_OK):
        return "throttle events need root (the block throttle is not writable)"
    return None


def whole_disk(majmin: str) -> str:
    """The disk a partition belongs to (the throttle acts on whole disks)."""
    sysfs = Path("/sys/dev/block") / majmin
    if (sysfs / "partition").exists():
        return (sysfs.resolve().parent / "dev").read_text().strip()
    return majmin


def device_of(role: str, path: Path) -> str:
    """major:minor of the disk a local target's I/O goes to: the device
    itself, or the one holding the file or directory (or, before the run
    creates it, its nearest existing parent)."""
    where = path
    while not where.exists() and where != where.parent:
        where = where.parent
    st = os.stat(where)
    number = st.st_rdev if stat.S_ISBLK(st.st_mode) else st.st_dev
    majmin = f"{os.major(number)}:{os.minor(number)}"
    if not (Path("/sys/dev/block") / majmin).exists():
        raise UserError(
            f"target {role!r} ({path}) is not on a block device (device {majmin}: tmpfs, a "
            "network filesystem?): it cannot be throttled",
            hint="throttle a target on a local disk or a block device",
        )
    return whole_disk(majmin)


def set_rule(name: str, majmin: str, value: int) -> None:
    """Write one throttle rule of ``majmin`` (0 removes it)."""
    (V1 / f"blkio.throttle.{name}_device").write_text(f"{majmin} {value}\n")


def rules(majmin: str) -> dict[str, int]:
    """The caps on ``majmin`` now, one per throttle file (0: none)."""
    found = dict.fromkeys(_FILES, 0)
    for name in _FILES:
        for line in (V1 / f"blkio.throttle.{name}_device").read_text().splitlines():
            device, _, value = line.partition(" ")
            if device == majmin and value.strip().isdigit():
                found[name] = int(value)
    return found


def caps(*, iops: int | None = None, bytes_per_s: int | None = None) -> dict[str, int]:
    """The rules :func:`apply` leaves on a device, one per throttle file."""
    chosen = ("read_iops", "write_iops") if iops else ("read_bps", "write_bps")
    return {name: (iops or bytes_per_s or 0) if name in chosen else 0 for name in _FILES}


def apply(
    majmin: str, *, iops: int | None = None, bytes_per_s: int | None = None
) -> dict[str, int]:
    """Cap reads and writes of ``majmin`` at ``iops`` or ``bytes_per_s``
    each; the caps that were there before, for :func:`restore`."""
    before = rules(majmin)
    try:
        remove(majmin)
        for name, value in caps(iops=iops, bytes_per_s=bytes_per_s).items():
            if value:
                set_rule(name, majmin, value)
    except OSError:
        restore(majmin, before)  # half a cap is worse than none: the owner's, as found
        raise
    return before


def restore(majmin: str, before: dict[str, int]) -> None:
    """Put back the caps :func:`apply` found: a cap the machine's owner had
    set outlives iorig's, rather than being lifted with it."""
    for name in _FILES:
        set_rule(name, majmin, before.get(name, 0))


def remove(majmin: str) -> None:
    """No cap on ``majmin`` (0 removes a rule; removing none is fine)."""
    for name in _FILES:
        set_rule(name, majmin, 0)
