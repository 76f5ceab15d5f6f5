"""Portable runs: ``export`` writes one run to a new results file, ``import``
reads every run of such a file into another database. A recovery file (a
run's results kept when its database stayed unwritable) is such a file too.

Both go through the typed model (decode every payload, rebuild every
result, write it with the repository's own column lists), never by copying
rows: a bundle is data from elsewhere, and only what iorig can read as a
run reaches the database.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path

from iorig.errors import UserError
from iorig.model import StoredRun
from iorig.store import connection
from iorig.store.checks import NOT_OURS_HINT, RUN_ID, InvalidRun, check_run, check_schema
from iorig.store.files import private_dir, refuse_own
from iorig.store.repository import Store, recovery_places
from iorig.store.schema import LATEST, file_objects, reading_views, schema_objects
from iorig.untrusted import regular_file

SQLITE_HEADER = b"SQLite format 3\x00"
TABLES = frozenset(name for kind, name, _, _ in schema_objects(LATEST) if kind == "table")
# The SQLite work reading a bundle may take, in steps of the progress
# handler (connection.Guard): importing real-size runs (tests/bundles.py)
# takes 0.02 per byte of the file, a run of nothing but 300,000 per-second
# samples 0.2; a file that needs 16 makes iorig's own queries work without
# end, and is refused.
WORK_PER_BYTE = 16.0
SMALL_FILE_BYTES = 1 << 20  # what the smallest files are allowed, as if this big


def export_run(store: Store, run_id: str, path: Path) -> None:
    """Write the run ``run_id`` with all its data to a new results file at ``path``."""
    refuse_own(path, store.path, "the bundle")
    if path.exists() or path.is_symlink():
        raise UserError(f"{path} already exists", hint="choose a new file name")
    stored = store.load_run(run_id, artifacts=True)
    with private_dir(path) as building:
        tmp = building / "bundle.sqlite"
        with Store(tmp) as bundle:
            bundle.add_runs([stored])
        try:
            os.link(tmp, path)  # never over a file that appeared meanwhile
        except FileExistsError:
            raise UserError(f"{path} already exists", hint="choose a new file name") from None
        except OSError:  # a filesystem without hard links: checked, then renamed
            if path.exists() or path.is_symlink():
                raise UserError(f"{path} already exists", hint="choose a new file name") from None
            tmp.rename(path)


def write_recovery(db: Path, stored: StoredRun) -> Path:
    """Keep a run whose database ``db`` could not be written: the whole run
    (as ``stored``) in a results file next to ``db`` (replaced as the run
    goes on), or in the temporary directory when that one is not writable
    either. ``iorig import`` of it adds the run, or completes it in ``db``.
    Each is built in a private directory beside it and renamed into place:
    a link planted at its name is replaced, never followed.
    """
    problems = []
    for path in recovery_places(db, stored.run.id):
        try:
            with private_dir(path) as building:
                tmp = building / "recovery.sqlite"
                with Store(tmp, lock_wait_s=0) as bundle:
                    bundle.add_runs([stored])
                tmp.replace(path)
            return path
        except (OSError, sqlite3.Error, UserError) as exc:
            problems.append(f"{path}: {exc}")
    raise UserError(
        f"run {stored.run.id}: its results could not be written anywhere: {'; '.join(problems)}",
        hint="free disk space or make the database's directory writable",
    )


def import_runs(
    store: Store, path: Path, progress: Callable[[int, int], None] | None = None
) -> list[tuple[str, bool]]:
    """Copy every run of the results file at ``path`` into ``store``.

    Returns (run id, imported) pairs; runs already present are skipped, so
    importing twice duplicates nothing — except that a recovery file
    completes its unfinished run (``Store.add_runs``). All or nothing.

    The file is read in place (``connection.read_only``: never copied, never
    migrated), refused unless its schema is exactly iorig's, and its runs are
    streamed oldest first into one transaction, each checked field by field
    before it is written: memory holds one run whatever their number.
    ``progress(done, total)`` is called after each run. The reading is
    bounded (``WORK_PER_BYTE``) and Ctrl-C ends it (KeyboardInterrupt;
    nothing is written).
    """
    size = _plain_file(store, path)
    budget = WORK_PER_BYTE * (size + SMALL_FILE_BYTES)
    conn, guard, set_up = connection.read_only(path, TABLES, budget)
    try:
        with _reading(guard, path):
            version = int(conn.execute("PRAGMA user_version").fetchone()[0])
            check_schema(version, file_objects(conn), path)
            for view in reading_views(version):  # an older file reads as the latest
                conn.execute(view)
            set_up()
            total = int(conn.execute("SELECT COUNT(*) FROM runs").fetchone()[0])
        bundle = Store.reading(conn, path, lambda: _reading(guard, path))

        def produce() -> Iterator[StoredRun]:
            with _reading(guard, path):
                ids = conn.execute("SELECT id FROM runs ORDER BY started_at")
                for done, (run_id,) in enumerate(ids, 1):
                    yield _checked(bundle, run_id, path)
                    if progress is not None:
                        progress(done, total)

        return store.add_stream(produce)
    finally:
        conn.close()


def _plain_file(store: Store, path: Path) -> int:
    """The size of ``path``, refused unless it is a whole SQLite file that
    is not ``store``'s own: a regular file with SQLite's header, with no
    write-ahead log or hot journal beside it holding writes not in it yet."""
    info = regular_file(path, "bundle")  # a device or a FIFO is never opened
    if os.path.samefile(path, store.path):  # also through a hard link
        raise UserError("cannot import a database into itself")
    with path.open("rb") as f:
        if f.read(len(SQLITE_HEADER)) != SQLITE_HEADER:
            raise UserError(f"{path} is not an iorig results file", hint=NOT_OURS_HINT)
    for side, what in (("-wal", "write-ahead log"), ("-journal", "rollback journal")):
        beside = Path(f"{path}{side}")
        with contextlib.suppress(OSError):
            if beside.stat().st_size > 0:
                raise UserError(
                    f"{path} has a {what} beside it ({beside}) holding writes that are not in "
                    "the file yet: it is open in another program, or that program was stopped "
                    "while writing",
                    hint=f"close that program, or open the file once with `iorig --db {path} "
                    "runs` (which folds them in), then import it again",
                )
    return info.st_size


@contextlib.contextmanager
def _reading(guard: connection.Guard, path: Path) -> Iterator[None]:
    """SQLite's errors while reading the bundle, as what they mean."""
    try:
        yield
    except sqlite3.Error as exc:
        why = guard.failure(exc)
        if why == "interrupt":
            raise KeyboardInterrupt from None
        if why == "work":
            raise UserError(
                f"{path}: reading it took more work than a results file of its size can need "
                f"({guard.steps:,} steps); nothing was imported",
                hint="the file is damaged or was crafted; import files written by `iorig export`",
            ) from None
        raise UserError(
            f"{path} is damaged or not an iorig results file ({exc})", hint=NOT_OURS_HINT
        ) from None


def _checked(bundle: Store, run_id: object, path: Path) -> StoredRun:
    """The run ``run_id`` of a bundle, refused unless iorig could have written it."""
    hint = "the file is damaged or was not written by iorig; nothing was imported"
    try:
        if not isinstance(run_id, str) or not RUN_ID.fullmatch(run_id):
            raise InvalidRun(f"run id {run_id!r:.40} is not of the form iorig writes (hex digits)")
        stored = bundle.load_run(run_id, artifacts=True)
        check_run(stored)
    except UserError as exc:
        raise UserError(f"{path}: {exc.message}", hint=hint) from None
    except InvalidRun as exc:
        raise UserError(f"{path}: run {run_id!r:.40}: {exc}", hint=hint) from None
    return stored
