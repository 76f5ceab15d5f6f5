"""Portable runs: ``export`` writes one run to a new results file, ``import``
reads every run of such a file into another database.

Both go through the typed model (decode every payload, rebuild every
result, write it with the repository's own column lists), never by copying
rows: a bundle is data from elsewhere, and only what iorig can read as a
run reaches the database.
"""

from __future__ import annotations

import shutil
import sqlite3
import tempfile
from pathlib import Path

from iorig.errors import UserError
from iorig.model import StoredRun
from iorig.store.checks import InvalidRun, check_run
from iorig.store.repository import Store

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


def import_runs(store: Store, path: Path) -> list[tuple[str, bool]]:
    """Copy every run of the results file at ``path`` into ``store``.

    Returns (run id, imported) pairs; runs already present are skipped, so
    importing twice duplicates nothing. All or nothing.
    """
    if not path.is_file():
        raise UserError(f"{path} does not exist")
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
