"""The database schema as a list of forward migrations.

``MIGRATIONS[i]`` takes a database from schema version i to i + 1; the
version is kept in ``PRAGMA user_version``. A migration is history: once
released it never changes, and a new change is a new migration.
"""

from __future__ import annotations

import functools
import json
import sqlite3
from collections.abc import Callable

from iorig.store import cells

_SCHEMA_V1 = """
CREATE TABLE runs (
    id TEXT PRIMARY KEY,
    label TEXT,
    scenario TEXT NOT NULL,
    scenario_version INTEGER NOT NULL,
    title TEXT NOT NULL,
    scenario_origin TEXT NOT NULL,
    scenario_text TEXT NOT NULL,
    resolved_json TEXT NOT NULL,
    params_json TEXT NOT NULL,
    profile TEXT,
    targets_json TEXT NOT NULL,
    hosts_json TEXT NOT NULL,
    command TEXT NOT NULL,
    iorig_version TEXT NOT NULL,
    fio_version TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('running', 'ok', 'failed', 'aborted')),
    error TEXT,
    warnings_json TEXT NOT NULL DEFAULT '[]',
    disclosure_json TEXT NOT NULL DEFAULT '{}',
    hostname TEXT NOT NULL,
    pid INTEGER NOT NULL,
    started_at REAL NOT NULL,
    ended_at REAL
);
CREATE INDEX runs_started ON runs (started_at);
CREATE TABLE phases (
    id INTEGER PRIMARY KEY,
    run_id TEXT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    seq INTEGER NOT NULL,
    repeat INTEGER NOT NULL DEFAULT 0,
    name TEXT NOT NULL,
    kind TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('ok', 'failed', 'aborted')),
    headline TEXT NOT NULL,
    planned_s REAL,
    started_at REAL NOT NULL,
    ended_at REAL NOT NULL,
    engine TEXT NOT NULL,
    fio_version TEXT NOT NULL,
    error TEXT,
    UNIQUE (run_id, seq, repeat)
);
CREATE TABLE phase_results (
    id INTEGER PRIMARY KEY,
    phase_id INTEGER NOT NULL REFERENCES phases (id) ON DELETE CASCADE,
    workload TEXT NOT NULL,
    host TEXT NOT NULL,
    jobs INTEGER NOT NULL,
    usr_cpu_pct REAL NOT NULL,
    sys_cpu_pct REAL NOT NULL,
    busiest_job_cpu_pct REAL NOT NULL,
    errors INTEGER NOT NULL,
    UNIQUE (phase_id, workload, host)
);
CREATE TABLE totals (
    result_id INTEGER NOT NULL REFERENCES phase_results (id) ON DELETE CASCADE,
    ddir TEXT NOT NULL,
    ios INTEGER NOT NULL,
    io_bytes INTEGER NOT NULL,
    iops REAL NOT NULL,
    bytes_per_s REAL NOT NULL,
    lat_mean_ns REAL,
    lat_min_ns REAL,
    lat_max_ns REAL,
    lat_stddev_ns REAL,
    lat_p50_ns REAL,
    lat_p90_ns REAL,
    lat_p99_ns REAL,
    lat_p999_ns REAL,
    lat_p9999_ns REAL,
    slat_mean_ns REAL,
    total_lat_mean_ns REAL,
    PRIMARY KEY (result_id, ddir)
);
CREATE TABLE samples (
    result_id INTEGER NOT NULL REFERENCES phase_results (id) ON DELETE CASCADE,
    ddir TEXT NOT NULL,
    t_s INTEGER NOT NULL,
    iops REAL NOT NULL,
    bytes_per_s REAL NOT NULL,
    lat_mean_ns REAL,
    PRIMARY KEY (result_id, ddir, t_s)
);
CREATE TABLE histograms (
    result_id INTEGER NOT NULL REFERENCES phase_results (id) ON DELETE CASCADE,
    ddir TEXT NOT NULL,
    kind TEXT NOT NULL CHECK (kind IN ('total', 'per_second')),
    rows INTEGER NOT NULL,
    data BLOB NOT NULL,
    PRIMARY KEY (result_id, ddir, kind)
);
CREATE TABLE steady_states (
    phase_id INTEGER PRIMARY KEY REFERENCES phases (id) ON DELETE CASCADE,
    metric TEXT NOT NULL,
    round_s REAL NOT NULL,
    window INTEGER NOT NULL,
    max_range REAL NOT NULL,
    max_slope REAL NOT NULL,
    converged INTEGER NOT NULL,
    window_start INTEGER,
    rounds_json TEXT NOT NULL
);
CREATE TABLE artifacts (
    phase_id INTEGER NOT NULL REFERENCES phases (id) ON DELETE CASCADE,
    name TEXT NOT NULL,
    data BLOB NOT NULL,
    PRIMARY KEY (phase_id, name)
);
"""


def _execute_script(conn: sqlite3.Connection, script: str) -> None:
    # Not executescript(): it would COMMIT the migration's open transaction.
    for statement in script.split(";"):
        if statement.strip():
            conn.execute(statement)


def _migrate_to_v1(conn: sqlite3.Connection) -> None:
    _execute_script(conn, _SCHEMA_V1)


# Version 2: searches (sweep points, knee steps, load points) and multi-host runs.
_SCHEMA_V2 = """
ALTER TABLE runs ADD COLUMN search_json TEXT NOT NULL DEFAULT '{}';
ALTER TABLE phases ADD COLUMN point_json TEXT NOT NULL DEFAULT '{}';
ALTER TABLE phase_results ADD COLUMN status TEXT NOT NULL DEFAULT 'ok';
ALTER TABLE phase_results ADD COLUMN error TEXT
"""


def _migrate_to_v2(conn: sqlite3.Connection) -> None:
    _execute_script(conn, _SCHEMA_V2)


# Version 3: every JSON column holds a versioned payload, {"version": 1,
# "data": <what versions 1 and 2 stored>}, so that its shape can change later
# by payload migrations (see codecs.py) without a schema migration.
JSON_COLUMNS = {
    "runs": (
        "id",
        (
            "resolved_json",
            "params_json",
            "targets_json",
            "hosts_json",
            "warnings_json",
            "disclosure_json",
            "search_json",
        ),
    ),
    "phases": ("id", ("point_json",)),
    "steady_states": ("phase_id", ("rounds_json",)),
}


def _migrate_to_v3(conn: sqlite3.Connection) -> None:
    for table, (key, columns) in JSON_COLUMNS.items():
        rows = conn.execute(f"SELECT {key}, {', '.join(columns)} FROM {table}").fetchall()
        for row in rows:
            wrapped = [json.dumps({"version": 1, "data": json.loads(v)}) for v in row[1:]]
            assignments = ", ".join(f"{c} = ?" for c in columns)
            conn.execute(f"UPDATE {table} SET {assignments} WHERE {key} = ?", (*wrapped, row[0]))


# Version 4: a run's owner is its pid plus the process's start time and the
# boot id (NULL in older rows), and a run whose last results went to a
# recovery file names it (import may then complete the run from that file).
_SCHEMA_V4 = """
ALTER TABLE runs ADD COLUMN owner_started TEXT;
ALTER TABLE runs ADD COLUMN owner_boot TEXT;
ALTER TABLE runs ADD COLUMN recovery_file TEXT
"""


def _migrate_to_v4(conn: sqlite3.Connection) -> None:
    _execute_script(conn, _SCHEMA_V4)


# Version 5: what was done to the system during a phase (events: a host
# stopped, a device throttled, a command run), a versioned payload, and the
# wall-clock time of the phase's second 0 where fio's logs tell it.
_SCHEMA_V5 = """
ALTER TABLE phases ADD COLUMN events_json TEXT NOT NULL DEFAULT '{"version": 1, "data": []}';
ALTER TABLE phases ADD COLUMN series_origin REAL
"""


def _migrate_to_v5(conn: sqlite3.Connection) -> None:
    _execute_script(conn, _SCHEMA_V5)


# Version 6: the I/O errors fio reported in a phase, per type and host (a
# versioned payload, see codecs.IO_ERRORS).
_SCHEMA_V6 = """
ALTER TABLE phases ADD COLUMN io_errors_json TEXT NOT NULL DEFAULT '{"version": 1, "data": []}'
"""


def _migrate_to_v6(conn: sqlite3.Connection) -> None:
    _execute_script(conn, _SCHEMA_V6)


# Version 7: the system under test as the user described it (--sut, a
# scenario's sut: section) and --note texts, a versioned payload (see
# codecs.SUT); older runs described nothing.
_SCHEMA_V7 = """
ALTER TABLE runs ADD COLUMN sut_json TEXT NOT NULL
    DEFAULT '{"version": 1, "data": {"description": {}, "notes": []}}'
"""


def _migrate_to_v7(conn: sqlite3.Connection) -> None:
    _execute_script(conn, _SCHEMA_V7)


# Version 8: how precisely a measure phase that ran "until: precise" knows its
# median (a versioned payload, see codecs.PRECISION; null for other phases),
# and the interleaved A/B comparison a run is one side of (codecs.AB; null
# for runs made alone). Older rows have neither.
_SCHEMA_V8 = """
ALTER TABLE phases ADD COLUMN precision_json TEXT NOT NULL DEFAULT '{"version": 1, "data": null}';
ALTER TABLE runs ADD COLUMN ab_json TEXT NOT NULL DEFAULT '{"version": 1, "data": null}'
"""


def _migrate_to_v8(conn: sqlite3.Connection) -> None:
    _execute_script(conn, _SCHEMA_V8)


# Version 9: the CPU fio used in a phase as iorig measured it from /proc (a
# versioned payload, see codecs.GENERATOR_CPU; null where it could not:
# fio servers, and every phase stored before, whose audit keeps fio's own
# per-job figures).
_SCHEMA_V9 = """
ALTER TABLE phases ADD COLUMN generator_cpu_json TEXT NOT NULL
    DEFAULT '{"version": 1, "data": null}'
"""


def _migrate_to_v9(conn: sqlite3.Connection) -> None:
    _execute_script(conn, _SCHEMA_V9)


# Version 10: a payload is its data alone. Versions 3 to 9 wrapped each in
# {"version": N, "data": …} so that its shape could change without a schema
# migration; the schema's version now covers the data too, and a change of
# a payload's shape is a migration like this one. The one such change ever
# made is applied here: a disclosure of payload version 1 kept the derived
# interface limit among its sections. (Columns added in versions 5 to 9
# keep an enveloped DEFAULT, which SQLite cannot alter; no row takes it:
# every INSERT names every column.)
PAYLOAD_COLUMNS = {
    "runs": (
        "id",
        (
            "resolved_json",
            "params_json",
            "targets_json",
            "hosts_json",
            "warnings_json",
            "disclosure_json",
            "search_json",
            "sut_json",
            "ab_json",
        ),
    ),
    "phases": (
        "id",
        ("point_json", "events_json", "io_errors_json", "precision_json", "generator_cpu_json"),
    ),
    "steady_states": ("phase_id", ("rounds_json",)),
}


def _disclosure_v2(data: object) -> object:
    """A disclosure of payload version 1 in version 2's shape."""
    if not isinstance(data, dict):
        return data  # not iorig's: reading it refuses it, as before
    sections = {k: v for k, v in data.items() if k != "interface_limit"}
    return {"sections": sections, "interface_limit": data.get("interface_limit")}


def _unwrapped(column: str, text: str) -> str:
    """A versioned payload's data, as JSON; anything else as it was (reading
    it refuses it by name, as reading the envelope did)."""
    try:
        payload = json.loads(text)
    except (TypeError, ValueError):
        return text
    if not isinstance(payload, dict) or set(payload) != {"version", "data"}:
        return text
    data = payload["data"]
    if column == "disclosure_json" and payload["version"] == 1:
        data = _disclosure_v2(data)
    return json.dumps(data)


def _migrate_to_v10(conn: sqlite3.Connection) -> None:
    for table, (key, columns) in PAYLOAD_COLUMNS.items():
        rows = conn.execute(f"SELECT {key}, {', '.join(columns)} FROM {table}").fetchall()
        assignments = ", ".join(f"{c} = ?" for c in columns)
        for row in rows:
            values = [_unwrapped(c, v) for c, v in zip(columns, row[1:], strict=True)]
            conn.execute(f"UPDATE {table} SET {assignments} WHERE {key} = ?", (*values, row[0]))


def _migrate_to_v11(conn: sqlite3.Connection) -> None:
    """Per-second histograms sparse (cells.pack_seconds): each second's
    non-empty bins and their counts, every count kept. A blob that does not
    read as dense rows is left as it was: reading the run refuses it by name,
    as before, and the other runs are upgraded."""
    rows = conn.execute("SELECT rowid, rows FROM histograms WHERE kind = 'per_second'").fetchall()
    for rowid, count in rows:  # one blob in memory at a time
        (blob,) = conn.execute("SELECT data FROM histograms WHERE rowid = ?", (rowid,)).fetchone()
        try:
            sparse = cells.unpack_dense_seconds(blob, count, "histogram")
        except (cells.DamagedData, TypeError):
            continue
        conn.execute(
            "UPDATE histograms SET data = ? WHERE rowid = ?", (cells.pack_seconds(sparse), rowid)
        )


# Version 12: a training phase's accelerator model and when each simulated
# accelerator's batches arrived (codecs.TRAINING), and a checkpoint phase's
# processes and their times (codecs.CHECKPOINT); null for other phases.
_SCHEMA_V12 = """
ALTER TABLE phases ADD COLUMN training_json TEXT NOT NULL DEFAULT 'null';
ALTER TABLE phases ADD COLUMN checkpoint_json TEXT NOT NULL DEFAULT 'null'
"""


def _migrate_to_v12(conn: sqlite3.Connection) -> None:
    _execute_script(conn, _SCHEMA_V12)


def _migrate_to_v13(conn: sqlite3.Connection) -> None:
    """Version 13: a phase's generator CPU (codecs.GENERATOR_CPU) may hold
    ``others_cpu_s``, what other processes took of the CPUs fio may run on.
    Nothing to rewrite: a payload without it reads as not measured, as it
    was; the version keeps an older iorig from misreading the new key."""


# Version 14: the PID namespace of a run's owner (owner.pid_namespace): a
# process in another namespace cannot see the owner, and must not take a run
# that is still going for one whose process is gone.
def _migrate_to_v14(conn: sqlite3.Connection) -> None:
    _execute_script(conn, "ALTER TABLE runs ADD COLUMN owner_pidns TEXT")


# Version 15: the workloads a phase's headline counts and the hosts' series
# shifts to sum them on (codecs.HEADLINE_OF); null: every workload, as before.
def _migrate_to_v15(conn: sqlite3.Connection) -> None:
    _execute_script(
        conn, "ALTER TABLE phases ADD COLUMN headline_of_json TEXT NOT NULL DEFAULT 'null'"
    )


MIGRATIONS: list[Callable[[sqlite3.Connection], None]] = [
    _migrate_to_v1,
    _migrate_to_v2,
    _migrate_to_v3,
    _migrate_to_v4,
    _migrate_to_v5,
    _migrate_to_v6,
    _migrate_to_v7,
    _migrate_to_v8,
    _migrate_to_v9,
    _migrate_to_v10,
    _migrate_to_v11,
    _migrate_to_v12,
    _migrate_to_v13,
    _migrate_to_v14,
    _migrate_to_v15,
]
LATEST = len(MIGRATIONS)
UNWRAPPED = 10  # payloads without their version envelopes from this version on
SPARSE_SECONDS = 11  # per-second histograms stored sparse from this version on


# ------------------------------------------------- reading a file in place
#
# A bundle is read where it is, read-only: it is never migrated. What each
# version's migrations create is the exact schema a file of that version
# must have (checks.check_schema), and an older file reads as the latest
# through temporary views of its tables that supply each later column's
# DEFAULT and take each payload out of the envelope of versions 3 to 9, as
# version 10 did.


def _normal(sql: str | None) -> str | None:
    return None if sql is None else " ".join(sql.split())


@functools.cache
def _built(
    version: int,
) -> tuple[
    frozenset[tuple[str, str, str, str | None]], dict[str, tuple[tuple[str, str | None], ...]]
]:
    conn = sqlite3.connect(":memory:", isolation_level=None)
    try:
        for migrate in MIGRATIONS[:version]:
            migrate(conn)
        rows = conn.execute("SELECT type, name, tbl_name, sql FROM sqlite_master").fetchall()
        objects = frozenset((t, n, tbl, _normal(sql)) for t, n, tbl, sql in rows)
        columns = {
            name: tuple((c[1], c[4]) for c in conn.execute(f"PRAGMA table_info({name})"))
            for t, name, _, _ in rows
            if t == "table"
        }
    finally:
        conn.close()
    return objects, columns


def schema_objects(version: int) -> frozenset[tuple[str, str, str, str | None]]:
    """(type, name, table, SQL with whitespace collapsed) of every object a
    database of ``version`` holds: its tables and indexes, nothing else."""
    return _built(version)[0]


def file_objects(conn: sqlite3.Connection) -> frozenset[tuple[str, str, str, str | None]]:
    """What ``schema_objects`` lists, of the database open on ``conn``."""
    rows = conn.execute("SELECT type, name, tbl_name, sql FROM main.sqlite_master").fetchall()
    return frozenset((t, n, tbl, _normal(sql)) for t, n, tbl, sql in rows)


def reading_views(version: int) -> list[str]:
    """``CREATE TEMP VIEW`` statements under which a database of ``version``
    reads as one of the latest version (unqualified names find TEMP first).
    Names and defaults come from iorig's own DDL, never from the file."""
    if version == LATEST:
        return []
    old, new = _built(version)[1], _built(LATEST)[1]
    # before version 3 these held the data alone (and so did their defaults)
    bare = {t: cols for t, (_, cols) in JSON_COLUMNS.items()} if version < 3 else {}
    payloads = {t: cols for t, (_, cols) in PAYLOAD_COLUMNS.items()}
    views = []
    for table, columns in new.items():
        have = {name for name, _ in old.get(table, ())}
        parts = []
        for name, default in columns:
            value = f"main.{table}.{name}" if name in have else (default or "NULL")
            if name in payloads.get(table, ()) and version < UNWRAPPED:
                value = _payload_data(name, value, enveloped=name not in bare.get(table, ()))
            parts.append(f"{value} AS {name}")
        source = f"main.{table}" if table in old else "(SELECT 1) WHERE 0"
        views.append(f"CREATE TEMP VIEW {table} AS SELECT {', '.join(parts)} FROM {source}")
    return views


def _payload_data(column: str, value: str, *, enveloped: bool) -> str:
    """SQL for a payload column's data as version 10 stores it: out of its
    envelope (versions 3 to 9), a version-1 disclosure reshaped as
    ``_migrate_to_v10`` reshapes it."""
    # what is not an envelope (a crafted file) is passed on as text that is
    # no JSON at all, which reading refuses naming the run and the payload
    data = (
        f"CASE WHEN json_valid({value}) AND json_type({value}) = 'object' "
        f"AND json_type({value}, '$.version') = 'integer' "
        f"AND json_type({value}, '$.data') IS NOT NULL "
        f"THEN json({value} -> '$.data') ELSE 'not a payload: ' || quote({value}) END"
        if enveloped
        else value
    )
    if column != "disclosure_json":
        return data
    reshaped = (
        f"json_object('sections', json(json_remove({data}, '$.interface_limit')), "
        f"'interface_limit', json({data} -> '$.interface_limit'))"
    )
    if not enveloped:  # before version 3: every disclosure was of version 1
        return f"CASE WHEN json_valid({value}) THEN {reshaped} ELSE {value} END"
    return (
        f"CASE WHEN json_valid({value}) AND json_type({value}, '$.version') = 'integer' "
        f"AND {value} ->> '$.version' = 1 AND json_type({value}, '$.data') = 'object' "
        f"THEN {reshaped} ELSE {data} END"
    )
