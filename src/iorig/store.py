"""SQLite storage of runs, phases and every figure they produced.

One file, WAL mode, schema version in ``PRAGMA user_version`` with forward
migrations; a database written by a newer iorig is refused rather than
misread. A run row exists (``running``) before fio starts; each finished
phase is written in one transaction with its totals, per-second samples,
histograms and artifacts (job file, raw fio output), so an interrupted run
keeps everything it measured.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import socket
import sqlite3
import tempfile
import time
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from iorig.analyze.steady import SteadyState, check_window
from iorig.errors import UserError
from iorig.fio import histogram
from iorig.results import PhaseResult, ScopeResult, Series, Totals

RUN_STATUSES = ("running", "ok", "failed", "aborted")
PCT_COLUMNS = {50.0: "lat_p50_ns", 90.0: "lat_p90_ns", 99.0: "lat_p99_ns", 99.9: "lat_p999_ns",
               99.99: "lat_p9999_ns"}  # fmt: skip

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


# MIGRATIONS[i] takes a database from version i to i + 1.
MIGRATIONS: list[Callable[[sqlite3.Connection], None]] = [_migrate_to_v1, _migrate_to_v2]


def default_db_path() -> Path:
    if os.environ.get("IORIG_DB"):
        return Path(os.environ["IORIG_DB"]).expanduser()
    base = os.environ.get("XDG_DATA_HOME") or os.path.join(Path.home(), ".local", "share")
    return Path(base) / "iorig" / "results.sqlite"


def new_run_id() -> str:
    return secrets.token_hex(6)


def _pack(array: np.ndarray) -> bytes:
    return zlib.compress(histogram.encode(array), 6)


def _unpack(blob: bytes, rows: int | None) -> np.ndarray:
    return histogram.decode(zlib.decompress(blob), rows)


@dataclass(frozen=True)
class RunRecord:
    id: str
    label: str | None
    scenario: str
    scenario_version: int
    title: str
    scenario_origin: str
    scenario_text: str
    resolved: dict[str, Any]
    params: dict[str, Any]
    profile: str | None
    targets: list[dict[str, Any]]
    hosts: list[str]
    command: str
    iorig_version: str
    fio_version: str
    status: str
    error: str | None
    warnings: list[dict[str, Any]]
    disclosure: dict[str, Any]
    hostname: str
    pid: int
    started_at: float
    ended_at: float | None
    search: dict[str, Any] = field(default_factory=dict)  # sweep / knee / curve settings


@dataclass(frozen=True)
class StoredRun:
    run: RunRecord
    phases: tuple[PhaseResult, ...]
    phase_ids: tuple[int, ...] = field(default=())


def _pid_alive(pid: int) -> bool:
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False
    # A reused pid that now belongs to something else counts as dead.
    return b"iorig" in cmdline or b"python" in cmdline


class Store:
    """The results database. Use as a context manager or call ``close``."""

    def __init__(self, path: Path | str, migrations: list | None = None) -> None:
        self.path = Path(path)
        self._migrations = MIGRATIONS if migrations is None else migrations
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self.conn = sqlite3.connect(self.path, isolation_level=None, timeout=30)
        except (OSError, sqlite3.Error) as exc:
            raise UserError(
                f"cannot open the results database {self.path}: {exc}",
                hint="choose another file with --db or IORIG_DB",
            ) from None
        try:
            self.conn.execute("PRAGMA journal_mode=WAL")
            self.conn.execute("PRAGMA foreign_keys=ON")
            self.conn.execute("PRAGMA busy_timeout=30000")
            self.schema_version  # noqa: B018 - fails here when the file is not SQLite
        except sqlite3.DatabaseError as exc:
            self.conn.close()
            raise UserError(
                f"{self.path} is not an iorig results database ({exc})",
                hint="choose another file with --db or IORIG_DB",
            ) from None
        try:
            self._migrate()
        except BaseException:
            self.conn.close()
            raise

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.conn.close()

    # ------------------------------------------------------------ schema

    @property
    def schema_version(self) -> int:
        return int(self.conn.execute("PRAGMA user_version").fetchone()[0])

    def _migrate(self) -> None:
        known = len(self._migrations)
        version = self.schema_version
        if version > known:
            raise UserError(
                f"{self.path} has schema version {version}, newer than this iorig understands "
                f"({known})",
                hint="upgrade iorig to read it; iorig never downgrades a database",
            )
        for target in range(version + 1, known + 1):
            try:
                with self.transaction():
                    self._migrations[target - 1](self.conn)
                    self.conn.execute(f"PRAGMA user_version = {target:d}")
            except sqlite3.Error as exc:
                raise UserError(
                    f"upgrading {self.path} from schema version {target - 1} to {target} "
                    f"failed ({exc}); the database was left unchanged at version {target - 1}",
                    hint="free disk space or check file permissions, then retry",
                ) from None

    @contextlib.contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        self.conn.execute("BEGIN IMMEDIATE")
        try:
            yield self.conn
        except BaseException:
            self.conn.execute("ROLLBACK")
            raise
        self.conn.execute("COMMIT")

    # ------------------------------------------------------------ writing

    def create_run(
        self,
        *,
        scenario: str,
        scenario_version: int,
        title: str,
        scenario_origin: str,
        scenario_text: str,
        resolved: dict[str, Any],
        params: dict[str, Any],
        profile: str | None,
        targets: list[dict[str, Any]],
        hosts: list[str],
        command: str,
        iorig_version: str,
        fio_version: str,
        warnings: list[dict[str, Any]] | None = None,
        disclosure: dict[str, Any] | None = None,
        run_id: str | None = None,
        started_at: float | None = None,
        label: str | None = None,
        search: dict[str, Any] | None = None,
    ) -> str:
        run_id = run_id or new_run_id()
        row = {
            "id": run_id,
            "label": label,
            "scenario": scenario,
            "scenario_version": scenario_version,
            "title": title,
            "scenario_origin": scenario_origin,
            "scenario_text": scenario_text,
            "resolved_json": json.dumps(resolved),
            "params_json": json.dumps(params),
            "profile": profile,
            "targets_json": json.dumps(targets),
            "hosts_json": json.dumps(hosts),
            "command": command,
            "iorig_version": iorig_version,
            "fio_version": fio_version,
            "status": "running",
            "warnings_json": json.dumps(warnings or []),
            "disclosure_json": json.dumps(disclosure or {}),
            "hostname": socket.gethostname(),
            "pid": os.getpid(),
            "started_at": started_at or time.time(),
            "search_json": json.dumps(search or {}),
        }
        with self.transaction() as c:
            _insert(c, "runs", row)
        return run_id

    def add_warnings(self, run_id: str, warnings: list[dict[str, Any]]) -> None:
        with self.transaction() as c:
            row = c.execute("SELECT warnings_json FROM runs WHERE id = ?", (run_id,)).fetchone()
            merged = json.loads(row[0]) + warnings
            c.execute(
                "UPDATE runs SET warnings_json = ? WHERE id = ?", (json.dumps(merged), run_id)
            )

    def finish_run(self, run_id: str, status: str, error: str | None = None) -> None:
        if status not in RUN_STATUSES or status == "running":
            raise ValueError(f"bad final status {status!r}")
        with self.transaction() as c:
            c.execute(
                "UPDATE runs SET status = ?, error = ?, ended_at = ? WHERE id = ?",
                (status, error, time.time(), run_id),
            )

    def save_phase(self, run_id: str, phase: PhaseResult) -> int:
        """Store one phase with all its results in a single transaction."""
        with self.transaction() as c:
            phase_id = _insert(
                c,
                "phases",
                {
                    "run_id": run_id,
                    "seq": phase.seq,
                    "repeat": phase.repeat,
                    "name": phase.name,
                    "kind": phase.kind,
                    "status": phase.status,
                    "headline": phase.headline,
                    "planned_s": phase.planned_s,
                    "started_at": phase.started_at,
                    "ended_at": phase.ended_at,
                    "engine": phase.engine,
                    "fio_version": phase.fio_version,
                    "error": phase.error,
                    "point_json": json.dumps(phase.point),
                },
            )
            for scope in phase.scopes:
                self._save_scope(c, phase_id, scope)
            if phase.steady is not None:
                st = phase.steady
                _insert(
                    c,
                    "steady_states",
                    {
                        "phase_id": phase_id,
                        "metric": st.metric,
                        "round_s": st.round_s,
                        "window": st.window,
                        "max_range": st.max_range,
                        "max_slope": st.max_slope,
                        "converged": int(st.converged),
                        "window_start": st.window_start,
                        "rounds_json": json.dumps(list(st.rounds)),
                    },
                )
            artifacts = {
                "job.fio": phase.job_text,
                "command": json.dumps(list(phase.command)),
                "fio-output.json": phase.fio_output,
                "fio-stderr.txt": phase.fio_stderr,
            }
            c.executemany(
                "INSERT INTO artifacts (phase_id, name, data) VALUES (?,?,?)",
                [(phase_id, n, zlib.compress(t.encode(), 6)) for n, t in artifacts.items() if t],
            )
        return phase_id

    def _save_scope(self, c: sqlite3.Connection, phase_id: int, scope: ScopeResult) -> None:
        result_id = _insert(
            c,
            "phase_results",
            {
                "phase_id": phase_id,
                "workload": scope.workload,
                "host": scope.host,
                "jobs": scope.jobs,
                "usr_cpu_pct": scope.usr_cpu_pct,
                "sys_cpu_pct": scope.sys_cpu_pct,
                "busiest_job_cpu_pct": scope.busiest_job_cpu_pct,
                "errors": scope.errors,
                "status": scope.status,
                "error": scope.error,
            },
        )
        for ddir, t in scope.totals.items():
            pcts = t.percentiles_ns(tuple(PCT_COLUMNS))
            _insert(
                c,
                "totals",
                {
                    "result_id": result_id,
                    "ddir": ddir,
                    "ios": t.ios,
                    "io_bytes": t.io_bytes,
                    "iops": t.iops,
                    "bytes_per_s": t.bytes_per_s,
                    "lat_mean_ns": t.lat_mean_ns,
                    "lat_min_ns": t.lat_min_ns,
                    "lat_max_ns": t.lat_max_ns,
                    "lat_stddev_ns": t.lat_stddev_ns,
                    **{col: _nan_to_none(pcts[p]) for p, col in PCT_COLUMNS.items()},
                    "slat_mean_ns": t.slat_mean_ns,
                    "total_lat_mean_ns": t.total_lat_mean_ns,
                },
            )
            _insert(
                c,
                "histograms",
                {"result_id": result_id, "ddir": ddir, "kind": "total", "rows": 1,
                 "data": _pack(t.hist)},
            )  # fmt: skip
        for ddir, s in scope.series.items():
            c.executemany(
                "INSERT INTO samples (result_id, ddir, t_s, iops, bytes_per_s, lat_mean_ns) "
                "VALUES (?,?,?,?,?,?)",
                [
                    (result_id, ddir, int(t), float(i), float(b), _nan_to_none(float(lat)))
                    for t, i, b, lat in zip(
                        s.t_s, s.iops, s.bytes_per_s, s.lat_mean_ns, strict=True
                    )
                ],
            )
            _insert(
                c,
                "histograms",
                {"result_id": result_id, "ddir": ddir, "kind": "per_second", "rows": len(s),
                 "data": _pack(s.hist)},
            )  # fmt: skip

    # ------------------------------------------------------------ reading

    def _reap_stale(self) -> None:
        """Runs left 'running' by a process that no longer exists become aborted."""
        rows = self.conn.execute(
            "SELECT id, pid FROM runs WHERE status = 'running' AND hostname = ?",
            (socket.gethostname(),),
        ).fetchall()
        for run_id, pid in rows:
            if pid != os.getpid() and not _pid_alive(pid):
                self.finish_run(
                    run_id, "aborted", f"the iorig process (pid {pid}) ended without finishing"
                )

    def list_runs(self, limit: int | None = None) -> list[RunRecord]:
        self._reap_stale()
        sql = "SELECT * FROM runs ORDER BY started_at DESC"
        params: tuple = ()
        if limit:
            sql += " LIMIT ?"
            params = (limit,)
        return [self._run_record(row) for row in self._rows(sql, params)]

    def resolve_run_id(self, ref: str) -> str:
        """A run id from a full id, a unique prefix, ``last`` or ``last~N``."""
        ref = ref.strip()
        if ref == "last" or ref.startswith("last~"):
            back = int(ref[5:]) if ref.startswith("last~") and ref[5:].isdigit() else 0
            row = self.conn.execute(
                "SELECT id FROM runs ORDER BY started_at DESC LIMIT 1 OFFSET ?", (back,)
            ).fetchone()
            if not row:
                raise UserError(
                    f"no run matches {ref!r}: the database {self.path} has "
                    f"{'no' if back == 0 else 'too few'} runs"
                )
            return str(row[0])
        if not ref or not all(ch in "0123456789abcdef" for ch in ref.lower()):
            raise UserError(f"{ref!r} is not a run id", hint="use an id from `iorig runs`, or last")
        rows = self.conn.execute(
            "SELECT id FROM runs WHERE id LIKE ? ORDER BY started_at", (ref.lower() + "%",)
        ).fetchall()
        if not rows:
            raise UserError(f"no run with id {ref!r} in {self.path}", hint="see `iorig runs`")
        if len(rows) > 1:
            raise UserError(
                f"{ref!r} matches {len(rows)} runs ({', '.join(r[0] for r in rows[:5])})",
                hint="type more characters of the id",
            )
        return str(rows[0][0])

    def load_run(self, ref: str) -> StoredRun:
        self._reap_stale()
        run_id = self.resolve_run_id(ref)
        row = self._rows("SELECT * FROM runs WHERE id = ?", (run_id,))[0]
        phases = []
        ids = []
        for p in self._rows(
            "SELECT * FROM phases WHERE run_id = ? ORDER BY seq, repeat", (run_id,)
        ):
            ids.append(p["id"])
            phases.append(self._phase(p))
        return StoredRun(self._run_record(row), tuple(phases), tuple(ids))

    def headline_series(self, run_id: str) -> list[tuple[str, str, list[float]]]:
        """Per measured phase: (name, metric, per-second values of the aggregate)."""
        rows = self.conn.execute(
            "SELECT p.id, p.name, p.headline, s.iops, s.bytes_per_s FROM phases p "
            "JOIN phase_results r ON r.phase_id = p.id AND r.workload = '' AND r.host = '' "
            "JOIN samples s ON s.result_id = r.id AND s.ddir = 'all' "
            "WHERE p.run_id = ? AND p.kind = 'measure' ORDER BY p.seq, p.repeat, s.t_s",
            (run_id,),
        ).fetchall()
        out: dict[int, tuple[str, str, list[float]]] = {}
        for phase_id, name, metric, iops, bytes_per_s in rows:
            entry = out.setdefault(phase_id, (name, metric, []))
            entry[2].append(iops if metric == "iops" else bytes_per_s)
        return list(out.values())

    def job_texts(self, run_id: str) -> dict[str, str]:
        """Phase name -> the fio job file of its first run (repeats share it)."""
        rows = self.conn.execute(
            "SELECT p.name, a.data FROM phases p JOIN artifacts a ON a.phase_id = p.id "
            "WHERE p.run_id = ? AND a.name = 'job.fio' ORDER BY p.seq, p.repeat DESC",
            (run_id,),
        ).fetchall()
        return {name: zlib.decompress(data).decode() for name, data in rows}

    def export_run(self, ref: str, path: Path) -> str:
        """Write one run with all its data to a new results file at ``path``."""
        run_id = self.resolve_run_id(ref)
        if path.exists():
            raise UserError(f"{path} already exists", hint="choose a new file name")
        tmp = path.with_name(path.name + ".partial")
        tmp.unlink(missing_ok=True)
        try:
            with Store(tmp) as bundle, bundle.transaction() as c:
                copy_run(self.conn, c, run_id)
            tmp.rename(path)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
        finally:
            for suffix in ("-wal", "-shm"):
                Path(str(tmp) + suffix).unlink(missing_ok=True)
        return run_id

    def import_runs(self, path: Path) -> list[tuple[str, bool]]:
        """Copy every run of the results file at ``path`` into this database.

        Returns (run id, imported) pairs; runs already present are skipped,
        so importing twice duplicates nothing. All or nothing.
        """
        if not path.is_file():
            raise UserError(f"{path} does not exist")
        if path.resolve() == self.path.resolve():
            raise UserError("cannot import a database into itself")
        with tempfile.TemporaryDirectory(prefix="iorig-import-") as tmp:
            copy = Path(tmp) / "bundle.sqlite"
            shutil.copyfile(path, copy)  # opening migrates: never touch the user's file
            with Store(copy) as bundle:
                ids = [r[0] for r in bundle.conn.execute("SELECT id FROM runs ORDER BY started_at")]
                with self.transaction() as c:
                    return [(run_id, copy_run(bundle.conn, c, run_id)) for run_id in ids]

    def artifact(self, phase_id: int, name: str) -> str | None:
        row = self.conn.execute(
            "SELECT data FROM artifacts WHERE phase_id = ? AND name = ?", (phase_id, name)
        ).fetchone()
        return zlib.decompress(row[0]).decode() if row else None

    def _rows(self, sql: str, params: tuple = ()) -> list[sqlite3.Row]:
        cur = self.conn.execute(sql, params)
        names = [d[0] for d in cur.description]
        return [dict(zip(names, r, strict=True)) for r in cur.fetchall()]  # type: ignore[misc]

    @staticmethod
    def _run_record(row: dict) -> RunRecord:
        return RunRecord(
            id=row["id"],
            label=row["label"],
            scenario=row["scenario"],
            scenario_version=row["scenario_version"],
            title=row["title"],
            scenario_origin=row["scenario_origin"],
            scenario_text=row["scenario_text"],
            resolved=json.loads(row["resolved_json"]),
            params=json.loads(row["params_json"]),
            profile=row["profile"],
            targets=json.loads(row["targets_json"]),
            hosts=json.loads(row["hosts_json"]),
            command=row["command"],
            iorig_version=row["iorig_version"],
            fio_version=row["fio_version"],
            status=row["status"],
            error=row["error"],
            warnings=json.loads(row["warnings_json"]),
            disclosure=json.loads(row["disclosure_json"]),
            hostname=row["hostname"],
            pid=row["pid"],
            started_at=row["started_at"],
            ended_at=row["ended_at"],
            search=json.loads(row["search_json"]),
        )

    def _phase(self, p: dict) -> PhaseResult:
        scopes = [
            self._scope(r)
            for r in self._rows(
                "SELECT * FROM phase_results WHERE phase_id = ? ORDER BY id", (p["id"],)
            )
        ]
        steady = self._rows("SELECT * FROM steady_states WHERE phase_id = ?", (p["id"],))
        return PhaseResult(
            steady=_steady(steady[0]) if steady else None,
            seq=p["seq"],
            name=p["name"],
            kind=p["kind"],
            status=p["status"],
            started_at=p["started_at"],
            ended_at=p["ended_at"],
            planned_s=p["planned_s"],
            headline=p["headline"],
            scopes=tuple(scopes),
            fio_version=p["fio_version"],
            engine=p["engine"],
            error=p["error"],
            repeat=p["repeat"],
            point=json.loads(p["point_json"]),
        )

    def _scope(self, r: dict) -> ScopeResult:
        rid = r["id"]
        hists = {
            (h["ddir"], h["kind"]): _unpack(h["data"], None if h["kind"] == "total" else h["rows"])
            for h in self._rows("SELECT * FROM histograms WHERE result_id = ?", (rid,))
        }
        totals = {}
        for t in self._rows("SELECT * FROM totals WHERE result_id = ?", (rid,)):
            totals[t["ddir"]] = Totals(
                ddir=t["ddir"],
                ios=t["ios"],
                io_bytes=t["io_bytes"],
                iops=t["iops"],
                bytes_per_s=t["bytes_per_s"],
                lat_mean_ns=_none_to_nan(t["lat_mean_ns"]),
                lat_min_ns=_none_to_nan(t["lat_min_ns"]),
                lat_max_ns=_none_to_nan(t["lat_max_ns"]),
                lat_stddev_ns=_none_to_nan(t["lat_stddev_ns"]),
                slat_mean_ns=_none_to_nan(t["slat_mean_ns"]),
                total_lat_mean_ns=_none_to_nan(t["total_lat_mean_ns"]),
                hist=hists.get((t["ddir"], "total"), histogram.empty()),
            )
        series = {}
        samples = self._rows(
            "SELECT ddir, t_s, iops, bytes_per_s, lat_mean_ns FROM samples WHERE result_id = ? "
            "ORDER BY ddir, t_s",
            (rid,),
        )
        ddirs = [s["ddir"] for s in samples] + [d for d, kind in hists if kind == "per_second"]
        for ddir in dict.fromkeys(ddirs):
            rows = [s for s in samples if s["ddir"] == ddir]
            series[ddir] = Series(
                ddir=ddir,
                t_s=np.array([s["t_s"] for s in rows], dtype=np.int64),
                iops=np.array([s["iops"] for s in rows], dtype=float),
                bytes_per_s=np.array([s["bytes_per_s"] for s in rows], dtype=float),
                lat_mean_ns=np.array([_none_to_nan(s["lat_mean_ns"]) for s in rows], dtype=float),
                hist=hists.get((ddir, "per_second"), np.zeros((0, histogram.NR_BINS), np.uint64)),
            )
        return ScopeResult(
            workload=r["workload"],
            host=r["host"],
            jobs=r["jobs"],
            totals=totals,
            series=series,
            usr_cpu_pct=r["usr_cpu_pct"],
            sys_cpu_pct=r["sys_cpu_pct"],
            busiest_job_cpu_pct=r["busiest_job_cpu_pct"],
            errors=r["errors"],
            status=r["status"],
            error=r["error"],
        )


# Child tables in dependency order, with the column linking each to its parent.
_CHILDREN = (
    ("phases", "run_id", "runs"),
    ("phase_results", "phase_id", "phases"),
    ("totals", "result_id", "phase_results"),
    ("samples", "result_id", "phase_results"),
    ("histograms", "result_id", "phase_results"),
    ("artifacts", "phase_id", "phases"),
    ("steady_states", "phase_id", "phases"),
)


def copy_run(src: sqlite3.Connection, dst: sqlite3.Connection, run_id: str) -> bool:
    """Copy one run with all its rows from ``src`` to ``dst`` (same schema).

    Integer ids are re-assigned in ``dst`` and references follow them. The
    caller holds a transaction on ``dst``. Returns False (and copies nothing)
    when ``dst`` already has the run.
    """
    if dst.execute("SELECT 1 FROM runs WHERE id = ?", (run_id,)).fetchone():
        return False
    cur = src.execute("SELECT * FROM runs WHERE id = ?", (run_id,))
    names = [d[0] for d in cur.description]
    row = cur.fetchone()
    if row is None:
        raise UserError(f"run {run_id} is not in the source database")
    _insert(dst, "runs", dict(zip(names, row, strict=True)))
    new_ids: dict[str, dict[Any, Any]] = {"runs": {run_id: run_id}}
    for table, parent_col, parent in _CHILDREN:
        parent_ids = new_ids[parent]
        new_ids.setdefault(table, {})
        if not parent_ids:
            continue
        marks = ",".join("?" * len(parent_ids))
        cur = src.execute(
            f"SELECT * FROM {table} WHERE {parent_col} IN ({marks})", tuple(parent_ids)
        )
        names = [d[0] for d in cur.description]
        for values in cur.fetchall():
            record = dict(zip(names, values, strict=True))
            record[parent_col] = parent_ids[record[parent_col]]
            old_id = record.pop("id", None)
            new_id = _insert(dst, table, record)
            if old_id is not None:
                new_ids[table][old_id] = new_id
    return True


def _steady(row: dict) -> SteadyState:
    rounds = json.loads(row["rounds_json"])
    check = None
    if len(rounds) >= row["window"]:
        check = check_window(rounds[-row["window"] :], row["max_range"], row["max_slope"])
    return SteadyState(
        metric=row["metric"],
        round_s=row["round_s"],
        window=row["window"],
        max_range=row["max_range"],
        max_slope=row["max_slope"],
        rounds=tuple(rounds),
        converged=bool(row["converged"]),
        window_start=row["window_start"],
        check=check,
    )


def _insert(c: sqlite3.Connection, table: str, row: dict[str, Any]) -> int:
    # Table and column names come from this module only, never from input.
    sql = f"INSERT INTO {table} ({', '.join(row)}) VALUES ({', '.join('?' * len(row))})"
    return int(c.execute(sql, tuple(row.values())).lastrowid or 0)


def _nan_to_none(value: float | None) -> float | None:
    if value is None or (isinstance(value, float) and value != value):
        return None
    return float(value)


def _none_to_nan(value: float | None) -> float:
    return float("nan") if value is None else float(value)
