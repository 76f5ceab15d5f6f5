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
import urllib.parse
from collections.abc import Callable
from pathlib import Path

from iorig.errors import UserError

LOCK_WAIT_ENV = "IORIG_DB_LOCK_WAIT"
DEFAULT_LOCK_WAIT_S = 600.0
MAX_ATTEMPT_S = 30.0  # one attempt's busy wait (SQLite's own backoff) at most
OTHER_DB = "choose another file with --db or IORIG_DB"
SQLITE_SIDECARS = ("-wal", "-shm", "-journal")  # what SQLite writes beside a database
LIVE_SUFFIX = "-live"  # a run's live file beside the database (store.live)
# the longest name kept beside a database: a recovery file's journal
# (repository.recovery_path: NAME.recovery-RUNID.sqlite)
LONGEST_BESIDE = ".recovery-0123456789ab.sqlite-journal"
PATH_MAX = 4095  # bytes of a path, without its terminating zero (Linux's PATH_MAX - 1)
SQLITE_BUSY, SQLITE_LOCKED = 5, 6


class Unwritable(UserError):
    """The results database could not be written: locked by another writer
    for longer than the wait, read-only, full or failing."""


def shared_memory_problem(path: Path | str) -> str | None:
    """Why the database's shared-memory file (``-shm``, which SQLite maps
    into memory) cannot be written now, or None. SQLite grows it as the WAL
    grows; a file that no longer may be written (``chattr +i``, another
    owner) is then mapped past its end, and touching that kills the process
    with SIGBUS, a signal no handler survives. So a write checks first."""
    side = Path(f"{path}-shm")
    if os.path.exists(side) and not os.access(side, os.R_OK | os.W_OK):
        return f"{side} (the database's shared memory) may no longer be written"
    return None


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


def _existing_folder(path: Path) -> Path:
    """The nearest folder above ``path`` that exists (where it would be made)."""
    folder = path.parent
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    return folder


def check_name_length(path: Path) -> None:
    """Refuse a database whose name leaves no room for the files SQLite and
    iorig keep beside it (a name of 250 bytes opened, and its ``-wal`` could
    not be made), naming the longest name it may have."""
    extra = len(LONGEST_BESIDE)
    try:
        name_max = os.pathconf(_existing_folder(path), "PC_NAME_MAX")
    except (OSError, ValueError):
        name_max = 255
    name, whole = len(os.fsencode(path.name)), len(os.fsencode(str(path)))
    if name + extra > name_max:
        raise UserError(
            f"the results database's name is {name} bytes: iorig and SQLite keep files beside "
            f"it whose names are up to {extra} bytes longer ({LONGEST_BESIDE}), and a file "
            f"name holds at most {name_max} bytes",
            hint=f"name a file of at most {name_max - extra} bytes with --db or IORIG_DB",
        )
    if whole + extra > PATH_MAX:
        raise UserError(
            f"the results database's path is {whole} bytes: with the {extra} bytes the names "
            f"beside it add, past the {PATH_MAX} bytes a path holds",
            hint="choose a shorter path with --db or IORIG_DB",
        )


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
    check_name_length(path)
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
        folder = _existing_folder(path)
    if not folder.is_dir() or not os.access(folder, os.W_OK | os.X_OK):
        raise UserError(
            f"the directory {folder} of the results database is read-only: SQLite keeps its "
            "write-ahead log next to the database, so a run could not store its results",
            hint=f"make the directory writable (or remount it read-write), or {OTHER_DB}",
        )


def check_sidecars(path: Path) -> None:
    """SQLite writes its journal and shared memory beside the database
    (the file a link resolves to), following any link planted there."""
    for base in {str(path), os.path.realpath(path)}:
        for suffix in SQLITE_SIDECARS:
            side = Path(base + suffix)
            if side.is_symlink():
                raise UserError(
                    f"{side} is a symbolic link: SQLite would write the database's "
                    f"{'journal' if suffix != '-shm' else 'shared memory'} where it points",
                    hint=f"remove the link (rm {side}) or {OTHER_DB}",
                )


def connect(path: Path, wait_s: float) -> sqlite3.Connection:
    """A connection to the database at ``path``, creating it when missing
    (built under a temporary name and linked into place: never 0 bytes)."""
    check_name_length(path)
    check_existing(path)
    check_sidecars(path)
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


# ------------------------------------------------ a file iorig did not write
#
# A bundle is opened where it is, read-only and immutable (no journal, no
# write-ahead log, no lock, nothing written next to it, no copy anywhere),
# with SQLite's own guards: functions in its schema are not trusted, every
# cell's size is checked against its page, strings and blobs are bounded,
# nothing can be attached, and an authorizer allows reading iorig's tables
# and creating this connection's temporary views (schema.reading_views) and
# nothing else. SQLITE_DBCONFIG_DEFENSIVE and ENABLE_TRIGGER are set where
# Python's sqlite3 reaches them (setconfig, Python 3.12+); on 3.11 they
# cannot be, and the authorizer, query_only and mode=ro stand in for them.

PROGRESS_STEPS = 1000  # SQLite instructions between two calls of the guard
READ_LIMITS = {
    sqlite3.SQLITE_LIMIT_LENGTH: (256 << 20) + (1 << 20),  # the largest artifact, compressed
    sqlite3.SQLITE_LIMIT_SQL_LENGTH: 100_000,
    sqlite3.SQLITE_LIMIT_COLUMN: 200,
    sqlite3.SQLITE_LIMIT_EXPR_DEPTH: 100,
    sqlite3.SQLITE_LIMIT_COMPOUND_SELECT: 4,
    sqlite3.SQLITE_LIMIT_FUNCTION_ARG: 8,
    sqlite3.SQLITE_LIMIT_ATTACHED: 0,
    sqlite3.SQLITE_LIMIT_LIKE_PATTERN_LENGTH: 100,
    sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER: 100,
    sqlite3.SQLITE_LIMIT_TRIGGER_DEPTH: 1,
    sqlite3.SQLITE_LIMIT_WORKER_THREADS: 0,
}
READ_PRAGMAS = (
    "trusted_schema = OFF",
    "cell_size_check = ON",
    "temp_store = MEMORY",
    "mmap_size = 0",
)
READ_CONFIG = (
    ("SQLITE_DBCONFIG_DEFENSIVE", True),
    ("SQLITE_DBCONFIG_TRUSTED_SCHEMA", False),
    ("SQLITE_DBCONFIG_ENABLE_TRIGGER", False),
)
# count; typeof, with which reading refuses a per-second sample that is no
# number; and the pure JSON functions with which a file of schema version 3
# to 9 reads as version 10 (schema.reading_views: each payload taken out of
# its envelope); the guard bounds their work like any other
READ_FUNCTIONS = frozenset(
    {
        "count",
        "typeof",
        "json",
        "json_valid",
        "json_type",
        "json_remove",
        "json_object",
        "quote",
        "->",
        "->>",
    }
)
SQLITE_INTERRUPT = 9


class Guard:
    """SQLite's progress handler on a connection reading an untrusted file.

    It ends a query once the connection has done ``budget`` steps (a file
    that makes iorig's own queries work without end), and it lets Ctrl-C end
    one: a KeyboardInterrupt raised in the handler aborts the query, which
    then fails as "interrupted" (Python's sqlite3 swallows the exception).
    ``failure`` says which it was."""

    def __init__(self, conn: sqlite3.Connection, budget: float) -> None:
        self.steps = 0
        self.budget = budget
        self.exhausted = False
        self.every = PROGRESS_STEPS
        conn.set_progress_handler(self._tick, self.every)

    def _tick(self) -> int:
        self.steps += self.every
        if self.steps > self.budget:
            self.exhausted = True
            return 1
        return 0

    def failure(self, exc: sqlite3.Error) -> str | None:
        """ "work" or "interrupt" when ``exc`` is a query this guard ended; else None."""
        code = getattr(exc, "sqlite_errorcode", None)
        if code != SQLITE_INTERRUPT and str(exc) != "interrupted":
            return None
        return "work" if self.exhausted else "interrupt"


class _Authorizer:
    """Reading the tables ``readable`` (and the schema), the functions in
    READ_FUNCTIONS and ``PRAGMA user_version``; temporary views and
    ``PRAGMA query_only`` while ``setting_up``; nothing else."""

    def __init__(self, readable: frozenset[str]) -> None:
        self.readable = readable | {"sqlite_master", "sqlite_schema", "sqlite_temp_master"}
        self.setting_up = True

    def __call__(
        self, action: int, arg1: str | None, arg2: str | None, db: str | None, _inner: str | None
    ) -> int:
        if action == sqlite3.SQLITE_SELECT:
            return sqlite3.SQLITE_OK
        if action == sqlite3.SQLITE_READ:
            return sqlite3.SQLITE_OK if arg1 in self.readable else sqlite3.SQLITE_DENY
        if action == sqlite3.SQLITE_FUNCTION:
            return sqlite3.SQLITE_OK if arg2 in READ_FUNCTIONS else sqlite3.SQLITE_DENY
        if action == sqlite3.SQLITE_PRAGMA and arg1 == "user_version":
            return sqlite3.SQLITE_OK
        if self.setting_up and (
            db == "temp"
            or action == sqlite3.SQLITE_CREATE_TEMP_VIEW
            or (action == sqlite3.SQLITE_PRAGMA and arg1 == "query_only")
        ):
            return sqlite3.SQLITE_OK
        return sqlite3.SQLITE_DENY


def read_only(
    path: Path, readable: frozenset[str], budget: float
) -> tuple[sqlite3.Connection, Guard, Callable[[], None]]:
    """A guarded connection reading ``path`` in place (see above), its
    ``Guard`` (work bound, Ctrl-C), and the function to call once the
    caller's temporary views exist: from then on the connection only reads
    (``PRAGMA query_only``, and the authorizer allows no more views)."""
    uri = "file:" + urllib.parse.quote(str(path.absolute())) + "?mode=ro&immutable=1"
    conn = sqlite3.connect(uri, uri=True, isolation_level=None)
    try:
        for limit, value in READ_LIMITS.items():
            conn.setlimit(limit, value)
        setconfig = getattr(conn, "setconfig", None)  # Python 3.12+
        for name, on in READ_CONFIG:
            option = getattr(sqlite3, name, None)
            if setconfig is not None and option is not None:
                setconfig(option, on)
        for pragma in READ_PRAGMAS:
            conn.execute(f"PRAGMA {pragma}")
        guard = Guard(conn, budget)
        authorizer = _Authorizer(readable)
        conn.set_authorizer(authorizer)
    except BaseException:
        conn.close()
        raise

    def set_up() -> None:
        conn.execute("PRAGMA query_only = ON")
        authorizer.setting_up = False

    return conn, guard, set_up
