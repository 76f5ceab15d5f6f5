"""Locks on targets: a run on a target another iorig run is using is refused
before it stores anything or creates any file, naming that run.

A target is locked with flock(2) on files in the machine-wide directory
(``statedir.shared()``), one file per identity the target has:

* a block device: its whole disk's device number (a partition locks its disk);
* a file: its directory's device and inode with its name, and, when it
  exists, its own device and inode (the same file by another path or link);
* a directory target: the directory's device and inode, and its data file
  as a file; a file set: the directory's, and its ``iorig-ROLE/``'s name.

The kernel drops a flock when the process holding it ends, ``kill -9``
included: a dead run's target is free at once, with nothing to clean. The
holder writes its pid and, once known, its run id into the lock file, which
is how a refusal names the run. Within one process locks are shared (the
two sides of ``iorig ab`` on one target run one after the other); an agent
locks for each driver apart (``Claim(shared=False)``).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import re
import socket
import stat
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from iorig.errors import UserError
from iorig.machine import throttle
from iorig.machine.statedir import Stamp, shared
from iorig.targets import DATA_FILE_NAME, FILESET_DIR_NAME

RUN_ID = re.compile(r"[0-9a-f]{6,32}")
CONTENT_LIMIT = 4096
_GUARD = threading.RLock()


# ------------------------------------------------------------ identities


def name_key(path: Path) -> str:
    """A file's place: its absolute path, every link in the part that exists
    resolved (it may not exist yet). The same whichever of its directories
    exist: a run that creates a directory target and one that finds it made
    claim the same data file (issue 48)."""
    place = os.path.realpath(os.path.abspath(path))
    digest = hashlib.sha256(os.fsencode(place)).hexdigest()[:16]
    return f"name-{digest}"


def node_key(st: os.stat_result) -> str:
    """An existing file's or directory's own identity."""
    return f"node-{st.st_dev:x}-{st.st_ino:x}"


def disk_key(rdev: int) -> str:
    """A block device's whole disk."""
    disk = throttle.whole_disk(f"{os.major(rdev)}:{os.minor(rdev)}")
    return "disk-" + disk.replace(":", "-")


def path_keys(path: Path) -> list[str]:
    """The identities of a file or device fio will open at ``path``."""
    try:
        st = os.stat(path)
    except OSError:
        return [name_key(path)]
    if stat.S_ISBLK(st.st_mode):
        return [disk_key(st.st_rdev)]
    return [name_key(path), node_key(st)]


def target_keys(given: str, role: str, *, fileset: bool = False) -> list[str]:
    """The identities of the local target ``given`` (``--target`` as typed)
    for ``role``, from what exists now: nothing is created."""
    path = Path(given).expanduser()
    try:
        st: os.stat_result | None = os.stat(path)
    except OSError:
        st = None
    if st is not None and stat.S_ISBLK(st.st_mode):
        return [disk_key(st.st_rdev)]
    if fileset or given.endswith("/") or (st is not None and stat.S_ISDIR(st.st_mode)):
        inner = FILESET_DIR_NAME if fileset else DATA_FILE_NAME
        keys = [node_key(st)] if st is not None else []
        return keys + path_keys(path / inner.format(role=role))
    return path_keys(path)


# ------------------------------------------------------------ the lock files


@dataclass
class _Lock:
    key: str
    fd: int
    path: Path
    since: float
    claims: list[Claim] = field(default_factory=list)


_HELD: dict[str, _Lock] = {}  # this process's shared locks, by key


def _open(path: Path) -> int:
    """The lock file, made if missing (0666: whoever finds it free next may
    write its own name into it); a link in its place is refused."""
    while True:
        try:
            return os.open(path, os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC)
        except FileNotFoundError:
            pass
        except PermissionError:  # another user's file not writable to us: lock it anyway
            return os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        try:
            fd = os.open(
                path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o666
            )
        except FileExistsError:
            continue  # made by another process in between: open that one
        with contextlib.suppress(OSError):
            os.fchmod(fd, 0o666)
        return fd


def _same(fd: int, path: Path) -> bool:
    """Whether ``path`` still names the file open as ``fd`` (a holder that
    released it may have removed it meanwhile)."""
    try:
        a, b = os.fstat(fd), os.lstat(path)
    except OSError:
        return False
    return (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino)


def _holder(fd: int) -> dict:
    """What the holder of a lock wrote into it (it writes just after taking
    it: an empty file is read again for half a second)."""
    for _ in range(10):
        with contextlib.suppress(OSError, ValueError, UnicodeDecodeError):
            data = json.loads(os.pread(fd, CONTENT_LIMIT, 0))
            if isinstance(data, dict):
                return data
        time.sleep(0.05)
    return {}


def holder_text(data: dict) -> str:
    """Who holds a lock, from its file's (untrusted) content: only a run id
    of iorig's form, a pid and a time are shown."""
    runs = [r for r in data.get("runs", ()) if isinstance(r, str) and RUN_ID.fullmatch(r)]
    stamp = Stamp.of(data.get("owner"))
    since = data.get("since")
    who = f"iorig run {', '.join(runs)}" if runs else "another iorig run (its id not yet known)"
    details = []
    if stamp is not None:
        details.append(f"pid {stamp.pid}")
    if data.get("via") == "agent":
        details.append("through an iorig agent")
    elif data.get("via") == "ssh":
        details.append("over SSH")
    if isinstance(since, int | float) and 0 < since < 1e11:
        details.append("since " + time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(since)))
    return who + (f" ({', '.join(details)})" if details else "")


class Busy(UserError):
    """A target is locked by another run; ``holder``: what its lock file says
    (untrusted: ``holder_text`` shows it)."""

    def __init__(self, what: str, holder: dict) -> None:
        super().__init__(
            f"target {what} is in use by {holder_text(holder)}",
            hint="wait for that run to end; two runs on one target share its I/O, and "
            "neither run's figures would be the target's",
        )
        self.holder = holder


class _Held(Exception):
    def __init__(self, holder: dict) -> None:
        self.holder = holder


def _take(key: str, directory: Path) -> int:
    """The lock file of ``key``, locked; _Held (with what the holder wrote)
    when another process holds it."""
    path = directory / f"{key}.lock"
    for _ in range(20):
        fd = _open(path)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _holder(fd)
            os.close(fd)
            raise _Held(holder) from None
        except BaseException:
            os.close(fd)
            raise
        if _same(fd, path):
            return fd
        os.close(fd)  # removed by its last holder between open and flock: again
    raise UserError(f"could not lock {path}: it keeps being replaced")


def _write(lock: _Lock, via: str) -> None:
    runs = list(dict.fromkeys(r for c in lock.claims for r in c.runs))
    data = {
        "owner": Stamp.mine().as_dict(),
        "host": socket.gethostname(),
        "runs": runs,
        "since": lock.since,
        "via": via,
    }
    with contextlib.suppress(OSError):
        text = json.dumps(data).encode()
        os.ftruncate(lock.fd, 0)
        os.pwrite(lock.fd, text, 0)


def _drop(lock: _Lock) -> None:
    """Remove and close a lock file this process holds (removed while still
    locked, so nobody locks the removed file thinking it is the target's)."""
    if _same(lock.fd, lock.path):
        with contextlib.suppress(OSError):  # another user's file in a sticky directory
            os.unlink(lock.path)
    os.close(lock.fd)


def sweep() -> None:
    """Remove lock files nobody holds (what killed runs left: the kernel
    freed their locks, not their files); another user's stay (a sticky
    directory)."""
    with contextlib.suppress(UserError, OSError):
        for path in shared().glob("*.lock"):
            try:
                fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
            except OSError:
                continue
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                if _same(fd, path):
                    os.unlink(path)  # while locked: whoever opened it sees it replaced
            except OSError:
                pass  # held by a live run, or not ours to remove
            finally:
                os.close(fd)


class Claim:
    """The locks of one run's targets. ``shared``: this process's other
    claims on a key share its lock (one run after the other in one process);
    else the claim locks on its own, as an agent does for each driver."""

    def __init__(self, *, shared: bool = True, via: str = "") -> None:
        self.shared = shared
        self.via = via  # "agent" or "ssh": the holder locks for a driver elsewhere
        self.runs: list[str] = []
        self._locks: list[_Lock] = []

    @property
    def keys(self) -> list[str]:
        return [lock.key for lock in self._locks]

    def take(self, what: str, keys: Sequence[str]) -> None:
        """Lock each of ``keys`` (the identities of the target ``what``);
        Busy naming the run that holds one. What this claim took for
        earlier targets stays held (``release`` frees it)."""
        directory = shared()
        with _GUARD:
            for key in dict.fromkeys(keys):
                if key in self.keys:
                    continue
                held = _HELD.get(key) if self.shared else None
                if held is None:
                    try:
                        fd = _take(key, directory)
                    except _Held as held_by:
                        raise Busy(what, held_by.holder) from None
                    held = _Lock(key, fd, directory / f"{key}.lock", time.time())
                    if self.shared:
                        _HELD[key] = held
                held.claims.append(self)
                self._locks.append(held)
                _write(held, self.via)

    def name_run(self, run_id: str) -> None:
        """The run's id, once known: written into its locks, so a refusal
        names it."""
        if not RUN_ID.fullmatch(run_id):
            raise ValueError(f"not a run id: {run_id!r:.40}")
        with _GUARD:
            if run_id not in self.runs:
                self.runs.append(run_id)
            for lock in self._locks:
                _write(lock, self.via)

    def release(self) -> None:
        """Free every lock of this claim (those other claims share stay)."""
        with _GUARD:
            for lock in self._locks:
                lock.claims.remove(self)
                if lock.claims:
                    _write(lock, self.via)
                    continue
                if _HELD.get(lock.key) is lock:
                    del _HELD[lock.key]
                _drop(lock)
            self._locks.clear()
