"""What the fault tests watch while a real ``iorig`` runs in a subprocess:
how far it has stored its run, and which processes are left."""

from __future__ import annotations

import contextlib
import sqlite3
import subprocess
from pathlib import Path

from tests.waiting import wait_until

# fixed queries, one per table the tests count (no SQL built from names)
_COUNT = {
    "runs": "SELECT COUNT(*) FROM runs",
    "phases": "SELECT COUNT(*) FROM phases",
}


def stored(db: Path, table: str) -> int:
    """Rows in ``table`` ("runs" or "phases"); 0 while the database does not
    exist yet or is being written."""
    with contextlib.suppress(sqlite3.Error):
        if db.exists():
            with sqlite3.connect(db) as conn:
                return int(conn.execute(_COUNT[table]).fetchone()[0])
    return 0


def wait_stored(
    proc: subprocess.Popen,
    db: Path,
    table: str = "phases",
    at_least: int = 1,
    timeout_s: float = 60.0,
) -> None:
    """Wait until ``proc`` has stored ``at_least`` rows in ``table`` (the
    prefill stored: the measured phase is starting); fail if it ends first."""
    wait_until(
        lambda: stored(db, table) >= at_least,
        timeout_s,
        f"{at_least} or more {table} stored in {db}",
        detail=lambda: f"{stored(db, table)} {table}",
        proc=proc,
    )


def processes_with(*needles: bytes) -> list[int]:
    """Live processes whose command line contains every one of ``needles``."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                cmdline = (entry / "cmdline").read_bytes()
                if all(n in cmdline for n in needles):
                    found.append(int(entry.name))
    return found


def stored_hosts(
    db: Path,
) -> tuple[tuple[str, str], dict[str, tuple[str, int | None, str | None]]]:
    """The run's (status, error) and the measured phase's host rows:
    host -> (status, I/Os, error); the aggregate's row is under ''."""
    with sqlite3.connect(db) as conn:
        run = conn.execute("SELECT status, error FROM runs").fetchone()
        rows = conn.execute(
            "SELECT r.host, r.status, t.ios, r.error FROM phases p JOIN phase_results r "
            "ON r.phase_id = p.id LEFT JOIN totals t ON t.result_id = r.id AND t.ddir = 'all' "
            "WHERE p.kind = 'measure' AND r.workload = ''"
        ).fetchall()
    return run, {h: (s, ios, e) for h, s, ios, e in rows}
