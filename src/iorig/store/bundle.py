"""Portable runs: ``export`` writes one run to a new results file, ``import``
reads every run of such a file into another database.

Both go through the typed model (decode every payload, rebuild every
result, write it with the repository's own column lists), never by copying
rows: a bundle is data from elsewhere, and only what iorig can read as a
run reaches the database.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from iorig.errors import UserError
from iorig.store.repository import Store


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
    with tempfile.TemporaryDirectory(prefix="iorig-import-") as tmp:
        copy = Path(tmp) / "bundle.sqlite"
        shutil.copyfile(path, copy)  # opening migrates: never touch the user's file
        with Store(copy) as bundle:
            runs = [bundle.load_run(run_id, artifacts=True) for run_id in bundle.run_ids()]
    return store.add_runs(sorted(runs, key=lambda r: r.run.started_at))
