"""Whether a target takes trims (discards), asked before a trim workload runs.

fio trims a block device with a discard (``BLKDISCARD``, any engine), which
a device whose queue has ``discard_max_bytes`` 0 refuses; it trims a file
only with its ``falloc`` engine, which punches holes
(``fallocate(PUNCH_HOLE | KEEP_SIZE)``), which some filesystems cannot do.
Either would fail every trim with an error, so iorig asks first: the
device's queue in sysfs, or a hole punched in a scratch file beside the
target (never in the target itself: a refused run leaves it as it was).
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import tempfile
from pathlib import Path
from typing import Any

FALLOC_FL_KEEP_SIZE = 0x01
FALLOC_FL_PUNCH_HOLE = 0x02
_PROBE_BYTES = 8192


def queue_dir(device: Path) -> Path:
    """The sysfs queue of a block device (a partition's is its disk's)."""
    st = os.stat(device)
    node = Path(f"/sys/dev/block/{os.major(st.st_rdev)}:{os.minor(st.st_rdev)}").resolve()
    return node / "queue" if (node / "queue").is_dir() else node.parent / "queue"


def device_problem(device: Path, queue: Path | None = None) -> str | None:
    """Why ``device`` takes no discards, or None when it does."""
    where = (queue or queue_dir(device)) / "discard_max_bytes"
    try:
        most = int(where.read_text().strip())
    except (OSError, ValueError):
        return f"iorig cannot tell whether {device} takes discards ({where} is unreadable)"
    if most <= 0:
        return f"{device} does not take discards (its queue's discard_max_bytes is 0)"
    return None


def _fallocate() -> Any:
    libc = ctypes.CDLL(None, use_errno=True)  # this process's libc (no ldconfig run)
    function = libc.fallocate
    function.argtypes = (ctypes.c_int, ctypes.c_int, ctypes.c_int64, ctypes.c_int64)
    function.restype = ctypes.c_int
    return function


def file_problem(directory: Path) -> str | None:
    """Why files in ``directory`` cannot have holes punched (fio's trims of
    a file), or None when they can: tried on a scratch file there."""
    try:
        fd, name = tempfile.mkstemp(prefix=".iorig-discard-", dir=directory)
    except OSError as exc:
        return f"iorig cannot try a hole punch in {directory}: {exc.strerror}"
    try:
        os.write(fd, b"\xa5" * _PROBE_BYTES)
        flags = FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE
        if _fallocate()(fd, flags, 0, _PROBE_BYTES // 2) == 0:
            return None
        code = ctypes.get_errno()
        if code in (errno.EOPNOTSUPP, errno.ENOSYS, errno.EINVAL):
            return (
                f"the filesystem under {directory} cannot punch holes in files "
                "(fallocate PUNCH_HOLE), which is how fio trims a file"
            )
        return f"a hole punch in {directory} failed: {os.strerror(code)}"
    finally:
        os.close(fd)
        with contextlib.suppress(OSError):
            os.unlink(name)


def discard_problem(path: Path, block: bool) -> str | None:
    """Why trims of the target at ``path`` (a block device when ``block``,
    else a file) would fail, or None."""
    return device_problem(path) if block else file_problem(path.parent)
