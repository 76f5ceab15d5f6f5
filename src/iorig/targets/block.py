"""Block devices as targets: is one safe to write? Mounted (always refused),
partitioned, used by another device, or carrying a filesystem or partition
signature (refused unless ``--allow-destroy``)."""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import stat
import subprocess
from pathlib import Path

from iorig.errors import UserError


def _sysfs_dir(dev: Path) -> Path:
    st = os.stat(dev)
    return Path(f"/sys/dev/block/{os.major(st.st_rdev)}:{os.minor(st.st_rdev)}")


def _mounted_devnums() -> set[str]:
    """major:minor of every mounted filesystem's device, plus active swap."""
    nums: set[str] = set()
    with contextlib.suppress(OSError), open("/proc/self/mountinfo") as f:
        for line in f:
            fields = line.split()
            if len(fields) > 2:
                nums.add(fields[2])
    with contextlib.suppress(OSError), open("/proc/swaps") as f:
        for line in list(f)[1:]:
            name = line.split()[0]
            with contextlib.suppress(OSError):
                st = os.stat(name)
                if stat.S_ISBLK(st.st_mode):
                    nums.add(f"{os.major(st.st_rdev)}:{os.minor(st.st_rdev)}")
    return nums


def _children(sysdir: Path) -> list[Path]:
    """Partitions of the device (sysfs entries with a 'partition' file)."""
    with contextlib.suppress(OSError):
        return [p for p in sysdir.resolve().iterdir() if (p / "partition").exists()]
    return []


def _devnum(sysdir: Path) -> str:
    try:
        return (sysdir / "dev").read_text().strip()
    except OSError:
        return ""


_MAGICS: tuple[tuple[int, bytes, str], ...] = (
    (510, b"\x55\xaa", "an MBR partition table or boot sector"),
    (512, b"EFI PART", "a GPT partition table"),
    (0x438, b"\x53\xef", "an ext2/3/4 filesystem"),
    (0, b"XFSB", "an XFS filesystem"),
    (0x10040, b"_BHRfS_M", "a btrfs filesystem"),
    (0, b"LUKS\xba\xbe", "a LUKS encrypted volume"),
    (0x218, b"LVM2 001", "an LVM physical volume"),
    (4086, b"SWAPSPACE2", "a swap area"),
    (3, b"NTFS    ", "an NTFS filesystem"),
    (0x52, b"FAT32   ", "a FAT32 filesystem"),
    (0x36, b"FAT", "a FAT filesystem"),
)


def find_blkid() -> str | None:
    for candidate in (shutil.which("blkid"), "/usr/sbin/blkid", "/sbin/blkid"):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    return None


def signature(dev: Path, blkid: str | None) -> str | None:
    """What the device's first blocks say it holds, or None when blank.

    util-linux's blkid knows every filesystem and partition table; without it
    the common signatures are checked directly.
    """
    if blkid:
        try:
            done = subprocess.run(
                [blkid, "-p", "-o", "export", str(dev)], capture_output=True, text=True, timeout=30
            )
        except (OSError, subprocess.TimeoutExpired):
            done = None
        if done is not None and done.returncode == 0:
            info = dict(line.split("=", 1) for line in done.stdout.splitlines() if "=" in line)
            if "PTTYPE" in info:
                return f"a {info['PTTYPE']} partition table (blkid)"
            if "TYPE" in info:
                return f"{info.get('USAGE', 'data')} of type {info['TYPE']} (blkid)"
            return "a signature blkid recognises"
        if done is not None and done.returncode == 2:
            return None  # blkid: nothing found
    # No usable blkid: look for the common signatures ourselves.
    try:
        with open(dev, "rb") as f:
            head = f.read(0x10048)
    except OSError as exc:
        raise UserError(f"cannot read {dev} to check what it holds: {exc}") from None
    for offset, magic, what in _MAGICS:
        if head[offset : offset + len(magic)] == magic:
            return what
    return None


def device_size(dev: Path) -> int:
    fd = os.open(dev, os.O_RDONLY)
    try:
        return os.lseek(fd, 0, os.SEEK_END)
    finally:
        os.close(fd)


def check_not_held(dev: Path, sysdir: Path) -> None:
    """Refuse a device the kernel holds exclusively: mounted in any mount
    namespace (this one's table shows only its own), swap, an LVM or md
    member in use, or another process's O_EXCL open. Opening it with
    O_EXCL fails with EBUSY then (open(2)); the holder is named where
    sysfs tells."""
    try:
        fd = os.open(dev, os.O_RDONLY | os.O_EXCL | os.O_CLOEXEC)
    except OSError as exc:
        if exc.errno != errno.EBUSY:
            raise UserError(f"cannot open {dev}: {exc.strerror}") from None
        found = sysdir / "holders"
        holders = sorted(h.name for h in found.iterdir()) if found.is_dir() else []
        held = f"held by {', '.join(holders)}" if holders else "in use by the system"
        raise UserError(
            f"refusing to write to {dev}: it is {held} (mounted in another mount namespace or "
            "container, used as swap, a member of an active LVM or RAID device, or opened "
            "exclusively by another process)",
            hint="find the holder (lsblk, findmnt --all in every namespace, fuser -v) and free "
            "the device; iorig never writes to a device in use, even with --allow-destroy",
        ) from None
    os.close(fd)


def check_block_device(dev: Path, allow_destroy: bool) -> None:
    """Raise UserError unless writing to ``dev`` destroys nothing unoffered."""
    sysdir = _sysfs_dir(dev)
    mounted = _mounted_devnums()
    devnums = {_devnum(sysdir)} | {_devnum(p) for p in _children(sysdir)}
    if devnums & mounted:
        raise UserError(
            f"refusing to write to {dev}: it (or one of its partitions) is mounted or used as swap",
            hint="unmount it first; iorig never writes to a mounted device, even with "
            "--allow-destroy",
        )
    check_not_held(dev, sysdir)
    if allow_destroy:
        return
    advice = "pass --allow-destroy if everything on it may be overwritten"
    parts = _children(sysdir)
    if parts:
        raise UserError(
            f"refusing to write to {dev}: it has partitions ({', '.join(p.name for p in parts)})",
            hint=advice,
        )
    holders = list((sysdir / "holders").iterdir()) if (sysdir / "holders").is_dir() else []
    if holders:
        raise UserError(
            f"refusing to write to {dev}: it is in use by {', '.join(h.name for h in holders)} "
            "(LVM, RAID or encryption)",
            hint=advice,
        )
    what = signature(dev, find_blkid())
    if what:
        raise UserError(f"refusing to write to {dev}: it holds {what}", hint=advice)
