"""The results database (SQLite): schema and migrations, versioned JSON
payloads, the repository of runs, and portable bundles."""

from iorig.store.bundle import export_run, import_runs
from iorig.store.repository import Store, default_db_path, new_run_id

__all__ = ["Store", "default_db_path", "export_run", "import_runs", "new_run_id"]
