"""The results database (SQLite): schema and migrations, versioned JSON
payloads, the repository of runs, and portable bundles."""

from iorig.store.bundle import export_run, import_runs, write_recovery
from iorig.store.connection import Unwritable, preflight
from iorig.store.repository import Store, new_run_id, recovery_path

__all__ = [
    "Store",
    "Unwritable",
    "export_run",
    "import_runs",
    "new_run_id",
    "preflight",
    "recovery_path",
    "write_recovery",
]
