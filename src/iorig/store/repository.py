"""The results database: runs, phases and every figure they produced.

One SQLite file, WAL mode, schema version in ``PRAGMA user_version`` with
forward migrations (schema.py); a database written by a newer iorig is
refused rather than misread. A run row exists (``running``) before fio
starts; each finished phase is written in one transaction with its totals,
per-second samples, histograms and artifacts (job file, raw fio output), so
an interrupted run keeps everything it measured.

Reading never writes: runs left ``running`` by a process that died are
marked only by an explicit ``reap_stale()``.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import socket
import sqlite3
import time
import zlib
from collections.abc import Callable, Iterator
from dataclasses import fields
from enum import StrEnum
from pathlib import Path
from typing import Any

import numpy as np

from iorig.errors import UserError
from iorig.model import (
    Finding,
    Metric,
    PhaseKind,
    PhaseResult,
    PhaseStatus,
    RunRecord,
    RunStatus,
    Scope,
    ScopeResult,
    Series,
    SteadyState,
    StoredRun,
    Totals,
    histogram,
)
from iorig.store import codecs
from iorig.store.cells import (
    ARTIFACT_LIMITS,
    DAMAGED_HINT,
    DamagedData,
    command,
    command_text,
    inflate,
    member,
    nan_to_none,
    none_to_nan,
    pack,
    scope_text,
    scope_value,
    unpack,
)
from iorig.store.schema import MIGRATIONS

PCT_COLUMNS = {50.0: "lat_p50_ns", 90.0: "lat_p90_ns", 99.0: "lat_p99_ns", 99.9: "lat_p999_ns",
               99.99: "lat_p9999_ns"}  # fmt: skip
SAMPLE_FIELDS = ("t_s", "iops", "bytes_per_s", "lat_mean_ns")
ARTIFACTS = ("job.fio", "command", "fio-output.json", "fio-stderr.txt")


def default_db_path() -> Path:
    if os.environ.get("IORIG_DB"):
        return Path(os.environ["IORIG_DB"]).expanduser()
    base = os.environ.get("XDG_DATA_HOME") or os.path.join(Path.home(), ".local", "share")
    return Path(base) / "iorig" / "results.sqlite"


def new_run_id() -> str:
    return secrets.token_hex(6)


def _pid_alive(pid: int) -> bool:
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False
    # A reused pid that now belongs to something else counts as dead.
    return b"iorig" in cmdline or b"python" in cmdline


# ---------------------------------------------------------------- rows


def run_row(record: RunRecord) -> dict[str, Any]:
    """A RunRecord as a ``runs`` row: payload fields in ``<field>_json``."""
    row: dict[str, Any] = {}
    for f in fields(RunRecord):
        value = getattr(record, f.name)
        if f.name in codecs.RUN_PAYLOADS:
            row[f"{f.name}_json"] = codecs.RUN_PAYLOADS[f.name].encode(value)
        else:
            row[f.name] = str(value) if isinstance(value, StrEnum) else value
    return row


def run_record(row: dict[str, Any]) -> RunRecord:
    values: dict[str, Any] = {}
    for f in fields(RunRecord):
        if f.name in codecs.RUN_PAYLOADS:
            try:
                values[f.name] = codecs.RUN_PAYLOADS[f.name].decode(row[f"{f.name}_json"])
            except codecs.PayloadError as exc:
                raise UserError(f"run {row.get('id')}: {exc}") from None
        else:
            values[f.name] = row[f.name]
    values["status"] = member(RunStatus, values["status"], "status")
    return RunRecord(**values)


def _insert(c: sqlite3.Connection, table: str, row: dict[str, Any]) -> int:
    # Table and column names come from this package only, never from input.
    sql = f"INSERT INTO {table} ({', '.join(row)}) VALUES ({', '.join('?' * len(row))})"
    return int(c.execute(sql, tuple(row.values())).lastrowid or 0)


class Store:
    """The results database. Use as a context manager or call ``close``."""

    def __init__(
        self, path: Path | str, migrations: list[Callable[[sqlite3.Connection], None]] | None = None
    ) -> None:
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
            except (sqlite3.Error, ValueError) as exc:
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

    def create_run(self, record: RunRecord) -> str:
        """Store a new run (normally ``running``); returns its id."""
        with self.transaction() as c:
            _insert(c, "runs", run_row(record))
        return record.id

    def add_runs(self, runs: list[StoredRun]) -> list[tuple[str, bool]]:
        """Store whole runs (phases included) in one transaction: all or
        nothing. Runs already present are left as they are and skipped.
        Returns (run id, added) pairs."""
        out = []
        with self.transaction() as c:
            for stored in runs:
                if c.execute("SELECT 1 FROM runs WHERE id = ?", (stored.run.id,)).fetchone():
                    out.append((stored.run.id, False))
                    continue
                _insert(c, "runs", run_row(stored.run))
                for phase in stored.phases:
                    self._insert_phase(c, stored.run.id, phase)
                out.append((stored.run.id, True))
        return out

    def add_warnings(self, run_id: str, findings: list[Finding]) -> None:
        with self.transaction() as c:
            row = c.execute("SELECT warnings_json FROM runs WHERE id = ?", (run_id,)).fetchone()
            merged = codecs.WARNINGS.decode(row[0]) + tuple(findings)
            c.execute(
                "UPDATE runs SET warnings_json = ? WHERE id = ?",
                (codecs.WARNINGS.encode(merged), run_id),
            )

    def finish_run(self, run_id: str, status: RunStatus, error: str | None = None) -> None:
        if status is RunStatus.RUNNING:
            raise ValueError(f"bad final status {status!r}")
        with self.transaction() as c:
            c.execute(
                "UPDATE runs SET status = ?, error = ?, ended_at = ? WHERE id = ?",
                (str(RunStatus(status)), error, time.time(), run_id),
            )

    def save_phase(self, run_id: str, phase: PhaseResult) -> int:
        """Store one phase with all its results in a single transaction."""
        with self.transaction() as c:
            return self._insert_phase(c, run_id, phase)

    def _insert_phase(self, c: sqlite3.Connection, run_id: str, phase: PhaseResult) -> int:
        phase_id = _insert(
            c,
            "phases",
            {
                "run_id": run_id,
                "seq": phase.seq,
                "repeat": phase.repeat,
                "name": phase.name,
                "kind": str(phase.kind),
                "status": str(phase.status),
                "headline": str(phase.headline),
                "planned_s": phase.planned_s,
                "started_at": phase.started_at,
                "ended_at": phase.ended_at,
                "engine": phase.engine,
                "fio_version": phase.fio_version,
                "error": phase.error,
                "point_json": codecs.POINT.encode(phase.point),
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
                    "rounds_json": codecs.ROUNDS.encode(st.rounds),
                },
            )
        texts = dict(
            zip(
                ARTIFACTS,
                (phase.job_text, command_text(phase.command), phase.fio_output,
                 phase.fio_stderr),
                strict=True,
            )
        )  # fmt: skip
        c.executemany(
            "INSERT INTO artifacts (phase_id, name, data) VALUES (?,?,?)",
            [(phase_id, n, zlib.compress(t.encode(), 6)) for n, t in texts.items() if t],
        )
        return phase_id

    def _save_scope(self, c: sqlite3.Connection, phase_id: int, result: ScopeResult) -> None:
        result_id = _insert(
            c,
            "phase_results",
            {
                "phase_id": phase_id,
                "workload": scope_text(result.scope.workload),
                "host": scope_text(result.scope.host),
                "jobs": result.jobs,
                "usr_cpu_pct": result.usr_cpu_pct,
                "sys_cpu_pct": result.sys_cpu_pct,
                "busiest_job_cpu_pct": result.busiest_job_cpu_pct,
                "errors": result.errors,
                "status": str(result.status),
                "error": result.error,
            },
        )
        for ddir, t in result.totals.items():
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
                    "lat_mean_ns": nan_to_none(t.lat_mean_ns),
                    "lat_min_ns": nan_to_none(t.lat_min_ns),
                    "lat_max_ns": nan_to_none(t.lat_max_ns),
                    "lat_stddev_ns": nan_to_none(t.lat_stddev_ns),
                    **{col: nan_to_none(pcts[p]) for p, col in PCT_COLUMNS.items()},
                    "slat_mean_ns": nan_to_none(t.slat_mean_ns),
                    "total_lat_mean_ns": nan_to_none(t.total_lat_mean_ns),
                },
            )
            _insert(
                c,
                "histograms",
                {"result_id": result_id, "ddir": ddir, "kind": "total", "rows": 1,
                 "data": pack(t.hist)},
            )  # fmt: skip
        for ddir, s in result.series.items():
            c.executemany(
                "INSERT INTO samples (result_id, ddir, t_s, iops, bytes_per_s, lat_mean_ns) "
                "VALUES (?,?,?,?,?,?)",
                [
                    (result_id, ddir, int(t), float(i), float(b), nan_to_none(float(lat)))
                    for t, i, b, lat in zip(
                        s.t_s, s.iops, s.bytes_per_s, s.lat_mean_ns, strict=True
                    )
                ],
            )
            _insert(
                c,
                "histograms",
                {"result_id": result_id, "ddir": ddir, "kind": "per_second", "rows": len(s),
                 "data": pack(s.hist)},
            )  # fmt: skip

    def reap_stale(self) -> list[str]:
        """Mark runs left ``running`` by an iorig process on this machine that
        no longer exists as aborted; returns their ids."""
        rows = self.conn.execute(
            "SELECT id, pid FROM runs WHERE status = 'running' AND hostname = ?",
            (socket.gethostname(),),
        ).fetchall()
        reaped = []
        for run_id, pid in rows:
            if pid != os.getpid() and not _pid_alive(pid):
                self.finish_run(
                    run_id,
                    RunStatus.ABORTED,
                    f"the iorig process (pid {pid}) ended without finishing",
                )
                reaped.append(run_id)
        return reaped

    # ------------------------------------------------------------ reading

    def list_runs(self, limit: int | None = None) -> list[RunRecord]:
        sql = "SELECT * FROM runs ORDER BY started_at DESC"
        params: tuple = ()
        if limit:
            sql += " LIMIT ?"
            params = (limit,)
        return [run_record(row) for row in self._rows(sql, params)]

    def run_ids(self, *, prefix: str = "", limit: int = -1, offset: int = 0) -> list[str]:
        """Run ids newest first; only those starting with ``prefix`` when given."""
        escaped = prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
        rows = self.conn.execute(
            "SELECT id FROM runs WHERE id LIKE ? ESCAPE '\\' ORDER BY started_at DESC "
            "LIMIT ? OFFSET ?",
            (escaped + "%", limit, offset),
        ).fetchall()
        return [str(r[0]) for r in rows]

    def run_ids_labelled(self, label: str) -> list[str]:
        """Ids of the runs whose label is exactly ``label``, newest first."""
        rows = self.conn.execute(
            "SELECT id FROM runs WHERE label = ? ORDER BY started_at DESC", (label,)
        ).fetchall()
        return [str(r[0]) for r in rows]

    def load_run(self, run_id: str, *, artifacts: bool = False) -> StoredRun:
        """A run with all its phases; ``artifacts`` adds each phase's job
        file, command and raw fio output (for bundles)."""
        found = self._rows("SELECT * FROM runs WHERE id = ?", (run_id,))
        if not found:
            raise UserError(f"no run with id {run_id!r} in {self.path}", hint="see `iorig runs`")
        phases = []
        ids = []
        try:
            record = run_record(found[0])
            for p in self._rows(
                "SELECT * FROM phases WHERE run_id = ? ORDER BY seq, repeat", (run_id,)
            ):
                ids.append(p["id"])
                phases.append(self._phase(p, artifacts))
        except (ValueError, TypeError) as exc:  # DamagedData, and JSON that is not
            where = f"phase {len(phases) + 1}: " if ids else ""
            raise UserError(
                f"run {run_id} in {self.path} is damaged: {where}{exc}", hint=DAMAGED_HINT
            ) from None
        return StoredRun(record, tuple(phases), tuple(ids))

    def headline_series(self, run_id: str) -> list[tuple[str, Metric, list[float]]]:
        """Per measured phase: (name, metric, per-second values of the aggregate)."""
        rows = self.conn.execute(
            "SELECT p.id, p.name, p.headline, s.iops, s.bytes_per_s FROM phases p "
            "JOIN phase_results r ON r.phase_id = p.id AND r.workload = '' AND r.host = '' "
            "JOIN samples s ON s.result_id = r.id AND s.ddir = 'all' "
            "WHERE p.run_id = ? AND p.kind = ? ORDER BY p.seq, p.repeat, s.t_s",
            (run_id, str(PhaseKind.MEASURE)),
        ).fetchall()
        out: dict[int, tuple[str, Metric, list[float]]] = {}
        for phase_id, name, metric, iops, bytes_per_s in rows:
            entry = out.setdefault(phase_id, (name, Metric(metric), []))
            entry[2].append(iops if metric == Metric.IOPS else bytes_per_s)
        return list(out.values())

    def job_texts(self, run_id: str) -> dict[str, str]:
        """Phase name -> the fio job file of its first run (repeats share it)."""
        rows = self.conn.execute(
            "SELECT p.name, a.data FROM phases p JOIN artifacts a ON a.phase_id = p.id "
            "WHERE p.run_id = ? AND a.name = 'job.fio' ORDER BY p.seq, p.repeat DESC",
            (run_id,),
        ).fetchall()
        try:
            return {name: self._text(data, "job.fio") for name, data in rows}
        except DamagedData as exc:
            raise UserError(
                f"run {run_id} in {self.path} is damaged: {exc}", hint=DAMAGED_HINT
            ) from None

    def artifact(self, phase_id: int, name: str) -> str | None:
        row = self.conn.execute(
            "SELECT data FROM artifacts WHERE phase_id = ? AND name = ?", (phase_id, name)
        ).fetchone()
        return self._text(row[0], name) if row else None

    def _text(self, blob: object, name: str) -> str:
        data = inflate(blob, ARTIFACT_LIMITS.get(name, 1 << 20), f"artifact {name}")
        try:
            return data.decode()
        except UnicodeDecodeError:
            raise DamagedData(f"artifact {name} is not text") from None

    def _rows(self, sql: str, params: tuple = ()) -> list[dict[str, Any]]:
        cur = self.conn.execute(sql, params)
        names = [d[0] for d in cur.description]
        return [dict(zip(names, r, strict=True)) for r in cur.fetchall()]

    def _phase(self, p: dict[str, Any], artifacts: bool) -> PhaseResult:
        scopes = [
            self._scope(r)
            for r in self._rows(
                "SELECT * FROM phase_results WHERE phase_id = ? ORDER BY id", (p["id"],)
            )
        ]
        steady = self._rows("SELECT * FROM steady_states WHERE phase_id = ?", (p["id"],))
        texts = (
            {name: self.artifact(p["id"], name) or "" for name in ARTIFACTS} if artifacts else {}
        )
        return PhaseResult(
            steady=_steady(steady[0]) if steady else None,
            seq=p["seq"],
            name=p["name"],
            kind=member(PhaseKind, p["kind"], "kind"),
            status=member(PhaseStatus, p["status"], "status"),
            started_at=p["started_at"],
            ended_at=p["ended_at"],
            planned_s=p["planned_s"],
            headline=member(Metric, p["headline"], "headline"),
            scopes=tuple(scopes),
            fio_version=p["fio_version"],
            engine=p["engine"],
            error=p["error"],
            repeat=p["repeat"],
            point=codecs.POINT.decode(p["point_json"]),
            job_text=texts.get("job.fio", ""),
            command=command(texts.get("command", "")),
            fio_output=texts.get("fio-output.json", ""),
            fio_stderr=texts.get("fio-stderr.txt", ""),
        )

    def _scope(self, r: dict[str, Any]) -> ScopeResult:
        rid = r["id"]
        samples = self._rows(
            "SELECT ddir, t_s, iops, bytes_per_s, lat_mean_ns FROM samples WHERE result_id = ? "
            "ORDER BY ddir, t_s",
            (rid,),
        )
        by_ddir: dict[str, list[dict[str, Any]]] = {}
        for sample in samples:
            by_ddir.setdefault(sample["ddir"], []).append(sample)
        hists = {}
        for h in self._rows("SELECT * FROM histograms WHERE result_id = ?", (rid,)):
            kind, ddir = h["kind"], h["ddir"]
            what = f"histogram ({kind!r:.20}, {ddir!r:.20})"
            # a total is one row; a per-second histogram one row per stored second
            rows = None if kind == "total" else len(by_ddir.get(ddir, ()))
            expected = 1 if rows is None else rows
            if kind not in ("total", "per_second") or h["rows"] != expected:
                raise DamagedData(f"{what} says {h['rows']!r:.20} rows, not {expected}")
            hists[(ddir, kind)] = unpack(h["data"], rows, what)
        totals = {}
        for t in self._rows("SELECT * FROM totals WHERE result_id = ?", (rid,)):
            totals[t["ddir"]] = Totals(
                ddir=t["ddir"],
                ios=t["ios"],
                io_bytes=t["io_bytes"],
                iops=t["iops"],
                bytes_per_s=t["bytes_per_s"],
                lat_mean_ns=none_to_nan(t["lat_mean_ns"]),
                lat_min_ns=none_to_nan(t["lat_min_ns"]),
                lat_max_ns=none_to_nan(t["lat_max_ns"]),
                lat_stddev_ns=none_to_nan(t["lat_stddev_ns"]),
                slat_mean_ns=none_to_nan(t["slat_mean_ns"]),
                total_lat_mean_ns=none_to_nan(t["total_lat_mean_ns"]),
                hist=hists.get((t["ddir"], "total"), histogram.empty()),
            )
        series = {}
        ddirs = [*by_ddir, *(d for d, kind in hists if kind == "per_second")]
        for ddir in dict.fromkeys(ddirs):
            rows = by_ddir.get(ddir, [])
            if any(not isinstance(s[k], int | float | None) for s in rows for k in SAMPLE_FIELDS):
                raise DamagedData(f"a per-second sample of {ddir!r:.20} is not a number")
            series[ddir] = Series(
                ddir=ddir,
                t_s=np.array([s["t_s"] for s in rows], dtype=np.int64),
                iops=np.array([s["iops"] for s in rows], dtype=float),
                bytes_per_s=np.array([s["bytes_per_s"] for s in rows], dtype=float),
                lat_mean_ns=np.array([none_to_nan(s["lat_mean_ns"]) for s in rows], dtype=float),
                hist=hists.get((ddir, "per_second"), np.zeros((0, histogram.NR_BINS), np.uint64)),
            )
        return ScopeResult(
            scope=Scope(scope_value(r["workload"]), scope_value(r["host"])),
            jobs=r["jobs"],
            totals=totals,
            series=series,
            usr_cpu_pct=r["usr_cpu_pct"],
            sys_cpu_pct=r["sys_cpu_pct"],
            busiest_job_cpu_pct=r["busiest_job_cpu_pct"],
            errors=r["errors"],
            status=member(PhaseStatus, r["status"], "status"),
            error=r["error"],
        )


def _steady(row: dict[str, Any]) -> SteadyState:
    return SteadyState(
        metric=row["metric"],
        round_s=row["round_s"],
        window=row["window"],
        max_range=row["max_range"],
        max_slope=row["max_slope"],
        rounds=codecs.ROUNDS.decode(row["rounds_json"]),
        converged=bool(row["converged"]),
        window_start=row["window_start"],
    )
