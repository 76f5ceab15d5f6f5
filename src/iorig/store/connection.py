"""Opening the results database, and writing to it when others write too.

A new database is built under a temporary name and linked into place, so a
results file is never seen half-made (0 bytes) by iorig; an existing 0-byte
file is therefore not iorig's and is refused, never given a schema.
``preflight`` says whether a run could store its results before anything is
written anywhere. Writes wait out another writer's lock with exponential
backoff for ``IORIG_DB_LOCK_WAIT`` seconds (default 600); past that the
database counts as unwritable (``Unwritable``) and the caller keeps the
results elsewhere (see run/safekeeping.py).
"""

from __future__ import annotations

import contextlib
import math
import os
import sqlite3
import tempfile
from pathlib import Path

from iorig.errors import UserError

LOCK_WAIT_ENV = "IORIG_DB_LOCK_WAIT"
DEFAULT_LOCK_WAIT_S = 600.0
MAX_ATTEMPT_S = 30.0  # one attempt's busy wait (SQLite's own backoff) at most
OTHER_DB = "choose another file with --db or IORIG_DB"
SQLITE_BUSY, SQLITE_LOCKED = 5, 6


class Unwritable(UserError):
    """The results database could not be written: locked by another writer
    for longer than the wait, read-only, full or failing."""


def lock_wait_s() -> float:
    """How long a write waits for another writer's lock (``IORIG_DB_LOCK_WAIT``)."""
    text = os.environ.get(LOCK_WAIT_ENV, "").strip()
    if not text:
        return DEFAULT_LOCK_WAIT_S
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not 0 <= value < math.inf:
        raise UserError(
            f"{LOCK_WAIT_ENV}={text!r} is not a number of seconds",
            hint=f"e.g. {LOCK_WAIT_ENV}=600 (the default: wait up to 10 minutes)",
        )
    return value


def is_busy(exc: sqlite3.Error) -> bool:
    """Another connection holds the lock (worth waiting for)."""
    code = getattr(exc, "sqlite_errorcode", None)
    if code is not None:
        return code & 0xFF in (SQLITE_BUSY, SQLITE_LOCKED)
    return "locked" in str(exc) or "busy" in str(exc)


def check_existing(path: Path) -> None:
    """Refuse what is at ``path`` when it cannot be a results database
    (nothing is opened or written)."""
    if path.is_dir():
        raise UserError(f"{path} is a directory, not a results database", hint=OTHER_DB)
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        return
    except OSError as exc:
        raise UserError(f"cannot read the results database {path}: {exc.strerror}") from None
    if size == 0 and path.is_file():
        raise UserError(
            f"{path} is empty (0 bytes): not an iorig results file (iorig never leaves one empty)",
            hint=f"delete it if it is not needed, or {OTHER_DB}",
        )


def preflight(path: Path) -> None:
    """Refuse, before anything is written (the database or a target), a
    results database a run could not store its results in."""
    check_existing(path)
    if path.exists():
        if not os.access(path, os.R_OK | os.W_OK):
            raise UserError(
                f"the results database {path} is read-only: a run could not store its results",
                hint=f"make it writable (chmod u+w, chattr -i, or remount read-write), or "
                f"{OTHER_DB}",
            )
        folder = path.parent
        for side in (Path(f"{path}-wal"), Path(f"{path}-shm")):
            if side.exists() and not os.access(side, os.R_OK | os.W_OK):
                raise UserError(
                    f"{side} (the database's write-ahead log) is read-only",
                    hint=f"make it writable, or {OTHER_DB}",
                )
    else:
        folder = path.parent
        while not folder.exists() and folder != folder.parent:
            folder = folder.parent
    if not folder.is_dir() or not os.access(folder, os.W_OK | os.X_OK):
        raise UserError(
            f"the directory {folder} of the results database is read-only: SQLite keeps its "
            "write-ahead log next to the database, so a run could not store its results",
            hint=f"make the directory writable (or remount it read-write), or {OTHER_DB}",
        )


def connect(path: Path, wait_s: float) -> sqlite3.Connection:
    """A connection to the database at ``path``, creating it when missing
    (built under a temporary name and linked into place: never 0 bytes)."""
    check_existing(path)
    timeout = min(wait_s, MAX_ATTEMPT_S)
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        _create(path, timeout)
    conn = sqlite3.connect(path, isolation_level=None, timeout=timeout)
    conn.execute(f"PRAGMA busy_timeout={int(timeout * 1000):d}")
    return conn


def _create(path: Path, timeout: float) -> None:
    fd, name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".new", dir=path.parent)
    os.close(fd)
    tmp = Path(name)
    try:
        conn = sqlite3.connect(tmp, isolation_level=None, timeout=timeout)
        try:
            conn.execute("PRAGMA journal_mode=WAL")  # writes the header: no longer 0 bytes
        finally:
            conn.close()
        try:
            os.link(tmp, path)  # fails when another iorig created it meanwhile: use theirs
        except FileExistsError:
            pass
        except OSError:  # a filesystem without hard links
            if not path.exists():
                tmp.replace(path)
    finally:
        for leftover in (tmp, Path(f"{tmp}-wal"), Path(f"{tmp}-shm")):
            with contextlib.suppress(OSError):
                leftover.unlink()
