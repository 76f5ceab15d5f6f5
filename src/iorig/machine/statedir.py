"""Where iorig keeps what must outlive one process on this machine.

One directory all users share, ``iorig/`` in the first of /run/lock,
/var/lock and /tmp that is sticky and world-writable (the same one whoever
asks: the choice depends on the directories' modes, not on the user): the
target locks live in it, one file per target, so that runs of different
users see each other. Each user has a private directory inside it (0700)
for records only that user's runs write: the throttle caps to put back and
the data files laid out. /run is emptied at boot, as the block throttle's
caps are.

``IORIG_STATE_DIR`` names another directory for all of this (made 1777 if
missing): for containers whose /run/lock is not the host's (give them all
the same one), and for tests that must not see each other's runs.

Records are small JSON files written whole (a temporary name, then
renamed) and read back with a size limit; each names its owner by pid,
process start time and boot id (``Stamp``).
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from iorig.errors import UserError
from iorig.store import owner

BASES = (Path("/run/lock"), Path("/var/lock"), Path("/tmp"))
NAME = "iorig"
RECORD_LIMIT = 64 << 10  # bytes a record may hold: anything larger is not iorig's


def _shared_ok(mode: int) -> bool:
    return stat.S_ISDIR(mode) and mode & 0o1777 == 0o1777


def _made(path: Path) -> Path:
    """``path``, made 1777 if missing; UserError when it is something else
    (a link, a file, a directory others cannot write)."""
    try:
        os.mkdir(path, 0o1777)
        os.chmod(path, 0o1777)  # mkdir's mode passes through the umask
    except FileExistsError:
        pass
    except OSError as exc:
        raise UserError(
            f"cannot make {path}, where iorig keeps its target locks: {exc.strerror}"
        ) from None
    st = os.lstat(path)
    if not _shared_ok(st.st_mode):
        raise UserError(
            f"{path} should be a directory every user may write (mode 1777), and it is "
            "not: iorig keeps its target locks there",
            hint=f"remove it (it is made again), or chmod 1777 {path}",
        )
    return path


def shared() -> Path:
    """The machine-wide directory (``IORIG_STATE_DIR`` when set)."""
    if chosen := os.environ.get("IORIG_STATE_DIR"):
        return _made(Path(chosen))
    for base in BASES:
        try:
            mode = os.stat(base).st_mode  # /var/lock is a link to /run/lock on most systems
        except OSError:
            continue
        if stat.S_ISDIR(mode) and mode & 0o1003 == 0o1003:  # sticky, anyone may enter and write
            return _made(base / NAME)
    raise UserError(
        f"no machine-wide directory for iorig's locks: none of {', '.join(map(str, BASES))} "
        "is a sticky, world-writable directory",
        hint="create /run/lock with mode 1777",
    )


def private() -> Path:
    """This user's directory in ``shared()``, 0700 and owned by the user."""
    uid = os.getuid()
    path = shared() / f"user-{uid}"
    with contextlib.suppress(FileExistsError):
        os.mkdir(path, 0o700)
    st = os.lstat(path)
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != uid or st.st_mode & 0o077:
        raise UserError(
            f"{path} is not a private directory of this user (owner {st.st_uid}, mode "
            f"{stat.S_IMODE(st.st_mode):o}): iorig keeps what it must restore there",
            hint=f"remove {path} (it is made again)",
        )
    return path


@dataclass(frozen=True)
class Stamp:
    """A process by pid, start time, boot id and PID namespace: what
    outlives it names it."""

    pid: int
    started: str | None
    boot: str | None
    namespace: str | None = None  # None: recorded before iorig kept it

    @classmethod
    def mine(cls) -> Stamp:
        pid = os.getpid()
        started, boot = owner.identity(pid)
        return cls(pid, started, boot, owner.pid_namespace())

    @classmethod
    def of(cls, data: object) -> Stamp | None:
        """The stamp in a record's ``owner`` field; None when it is not one."""
        if not isinstance(data, dict):
            return None
        pid, started, boot = data.get("pid"), data.get("started"), data.get("boot")
        namespace = data.get("namespace")
        if not (isinstance(pid, int) and not isinstance(pid, bool) and pid > 0):
            return None
        texts = (started, boot, namespace)
        if not all(v is None or (isinstance(v, str) and len(v) < 64) for v in texts):
            return None
        return cls(pid, started, boot, namespace)

    def as_dict(self) -> dict[str, Any]:
        return {
            "pid": self.pid,
            "started": self.started,
            "boot": self.boot,
            "namespace": self.namespace,
        }

    @property
    def alive(self) -> bool:
        """Whether the process still runs (a reused pid, or the same pid after
        a reboot, is not it; one of another PID namespace may be)."""
        return owner.alive(self.pid, self.started, self.boot, self.namespace)

    @property
    def is_me(self) -> bool:
        return self == Stamp.mine()


def write_record(path: Path, data: dict[str, Any]) -> None:
    """``data`` as the JSON file ``path``, whole or not at all: written under
    a temporary name beside it, flushed to disk, then renamed."""
    fd, tmp = tempfile.mkstemp(prefix=".", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(data, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def read_record(path: Path) -> dict[str, Any] | None:
    """A record written by ``write_record``; None when it is gone, a link,
    not a regular file, too large or not a JSON object."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
            return None
        raw = f.read(RECORD_LIMIT + 1)
    if len(raw) > RECORD_LIMIT:
        return None
    try:
        data = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        return None
    return data if isinstance(data, dict) else None
