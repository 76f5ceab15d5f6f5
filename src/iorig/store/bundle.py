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
import shutil
import sqlite3
import tempfile
from pathlib import Path

from iorig.errors import UserError
from iorig.model import StoredRun
from iorig.store.checks import InvalidRun, check_run
from iorig.store.repository import Store, recovery_path
from iorig.untrusted import regular_file

SQLITE_HEADER = b"SQLite format 3\x00"


def export_run(store: Store, run_id: str, path: Path) -> None:
    """Write the run ``run_id`` with all its data to a new results file at ``path``."""
    if path.exists():
        raise UserError(f"{path} already exists", hint="choose a new file name")
    stored = store.load_run(run_id, artifacts=True)
    tmp = path.with_name(path.name + ".partial")
    tmp.unlink(missing_ok=True)
    try:
        with Store(tmp) as bundle:
            bundle.add_runs([stored])
        tmp.rename(path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    finally:
        for suffix in ("-wal", "-shm"):
            Path(str(tmp) + suffix).unlink(missing_ok=True)


def write_recovery(db: Path, stored: StoredRun) -> Path:
    """Keep a run whose database ``db`` could not be written: the whole run
    (as ``stored``) in a results file next to ``db`` (replaced as the run
    goes on), or in the temporary directory when that one is not writable
    either. ``iorig import`` of it adds the run, or completes it in ``db``.
    """
    first = recovery_path(db, stored.run.id)
    second = Path(tempfile.gettempdir()) / first.name
    problems = []
    for path in (first, second):
        tmp = path.with_name(path.name + ".partial")
        try:
            tmp.unlink(missing_ok=True)
            with Store(tmp, lock_wait_s=0) as bundle:
                bundle.add_runs([stored])
            tmp.replace(path)
            return path
        except (OSError, sqlite3.Error, UserError) as exc:
            problems.append(f"{path}: {exc}")
        finally:
            for leftover in (tmp, Path(f"{tmp}-wal"), Path(f"{tmp}-shm")):
                with contextlib.suppress(OSError):
                    leftover.unlink()
    raise UserError(
        f"run {stored.run.id}: its results could not be written anywhere: {'; '.join(problems)}",
        hint="free disk space or make the database's directory writable",
    )


def import_runs(store: Store, path: Path) -> list[tuple[str, bool]]:
    """Copy every run of the results file at ``path`` into ``store``.

    Returns (run id, imported) pairs; runs already present are skipped, so
    importing twice duplicates nothing — except that a recovery file
    completes its unfinished run (``Store.add_runs``). All or nothing.
    """
    regular_file(path, "bundle")  # a device or a FIFO is never opened
    if path.resolve() == store.path.resolve():
        raise UserError("cannot import a database into itself")
    not_ours = UserError(
        f"{path} is not an iorig results file",
        hint="import files written by `iorig export` (or another iorig results database)",
    )
    with path.open("rb") as f:
        if f.read(len(SQLITE_HEADER)) != SQLITE_HEADER:
            raise not_ours
    with tempfile.TemporaryDirectory(prefix="iorig-import-") as tmp:
        copy = Path(tmp) / "bundle.sqlite"
        shutil.copyfile(path, copy)  # opening migrates: never touch the user's file
        try:
            bundle = Store(copy)
        except UserError as exc:  # e.g. written by a newer iorig: say so, of the user's file
            raise UserError(exc.message.replace(str(copy), str(path)), hint=exc.hint) from None
        except sqlite3.DatabaseError:
            raise not_ours from None
        try:
            runs = [_checked(bundle, run_id, path) for run_id in bundle.run_ids()]
        except sqlite3.DatabaseError as exc:
            raise UserError(f"{path} is damaged ({exc})", hint=not_ours.hint) from None
        finally:
            bundle.close()
    return store.add_runs(sorted(runs, key=lambda r: r.run.started_at))


def _checked(bundle: Store, run_id: str, path: Path) -> StoredRun:
    """The run ``run_id`` of a bundle, refused unless iorig could have written it."""
    hint = "the file is damaged or was not written by iorig; nothing was imported"
    try:
        stored = bundle.load_run(run_id, artifacts=True)
        check_run(stored)
    except UserError as exc:
        raise UserError(f"{path}: {exc.message}", hint=hint) from None
    except InvalidRun as exc:
        raise UserError(f"{path}: run {run_id!r:.40}: {exc}", hint=hint) from None
    return stored
