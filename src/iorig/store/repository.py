"""The results database: runs, phases and every figure they produced.

One SQLite file, WAL mode, schema version in ``PRAGMA user_version`` with
forward migrations (store/schema.py); a database written by a newer iorig is
refused rather than misread. A run row exists (``running``) before fio
starts; each finished phase is written in one transaction with its totals,
per-second samples, histograms and artifacts (job file, raw fio output), so
an interrupted run keeps everything it measured.

Reading never writes: runs left ``running`` by a process that died are
marked only by an explicit ``reap_stale()``. Opening, locking and the write
retry are in connection.py; a run's owner identity in owner.py.
"""

from __future__ import annotations

import contextlib
import functools
import os
import socket
import sqlite3
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any, TypeVar

from iorig.errors import UserError
from iorig.model import (
    AGGREGATE,
    ALL,
    AbLink,
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
from iorig.model.combine import headline_scope
from iorig.store import codecs, connection, owner
from iorig.store.cells import (
    ARTIFACT_LIMITS,
    DAMAGED_HINT,
    DamagedData,
    command,
    inflate,
    member,
    none_to_nan,
    scope_value,
)
from iorig.store.connection import Unwritable
from iorig.store.rows import (
    ARTIFACTS,
    complete,
    ended_without_finishing,
    insert,
    insert_phase,
    new_run_id,
    run_record,
    run_row,
)
from iorig.store.schema import MIGRATIONS, SPARSE_SECONDS
from iorig.store.series import (
    LazySeries,
    decode_histogram,
    in_place_loader,
    loader,
    read_series,
    series_ddirs,
)

__all__ = ["Store", "Unwritable", "new_run_id"]
T = TypeVar("T")
REAP_WAIT_S = 1.0  # reading commands reap stale runs only if that takes no waiting


def _like_literal(text: str) -> str:
    """``text`` matched as itself in a LIKE pattern with ESCAPE '\\'."""
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def not_ours(conn: sqlite3.Connection) -> str:
    """What a database holds that iorig did not make ("" when it is iorig's
    or empty): tables without iorig's schema version, or a schema version
    without iorig's runs table (another application's numbering)."""
    version = int(conn.execute("PRAGMA user_version").fetchone()[0])
    tables = sorted(
        str(row[0])
        for row in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
        )
    )
    if (version == 0 and tables) or (version > 0 and "runs" not in tables):
        shown = ", ".join(repr(t) for t in tables[:5]) + (", …" if len(tables) > 5 else "")
        return f"the tables {shown}" if tables else f"schema version {version} and no tables"
    return ""


STOP_GRACE_S = 2.0  # after a signal, what a write still waits for another writer
BUSY_SLICE_S = 0.25  # SQLite's busy wait per attempt: how soon a signal is seen


class Store:
    """The results database. Use as a context manager or call ``close``."""

    def __init__(
        self,
        path: Path | str,
        migrations: list[Callable[[sqlite3.Connection], None]] | None = None,
        *,
        lock_wait_s: float | None = None,
    ) -> None:
        self.path = Path(path)
        self._migrations = MIGRATIONS if migrations is None else migrations
        self.lock_wait_s = connection.lock_wait_s() if lock_wait_s is None else lock_wait_s
        self._stop_waiting = threading.Event()  # set by a signal: see ``stop_waiting``
        self._stopped_at = 0.0
        # how reading a file in place (``reading``) turns SQLite's errors into what they mean
        self._in_place: Callable[[], AbstractContextManager[None]] | None = None
        try:
            self.conn = connection.connect(self.path, self.lock_wait_s)
        except (OSError, sqlite3.Error) as exc:
            raise UserError(
                f"cannot open the results database {self.path}: {exc}", hint=connection.OTHER_DB
            ) from None
        try:
            # before anything is written to it: not even its journal mode
            foreign = not_ours(self.conn)
            if foreign:
                self.conn.close()
                raise UserError(
                    f"{self.path} is not an iorig results database: it holds {foreign}; "
                    "iorig leaves it as it is",
                    hint=connection.OTHER_DB,
                )
            self.conn.execute("PRAGMA journal_mode=WAL")
            self.conn.execute("PRAGMA foreign_keys=ON")
        except sqlite3.DatabaseError as exc:
            self.conn.close()
            raise UserError(
                f"{self.path} is not an iorig results database ({exc})", hint=connection.OTHER_DB
            ) from None
        try:
            self._migrate()
        except BaseException:
            self.conn.close()
            raise
        self._file = self._identity()  # the file every later write must still be

    @classmethod
    def reading(
        cls,
        conn: sqlite3.Connection,
        path: Path,
        errors: Callable[[], AbstractContextManager[None]] = contextlib.nullcontext,
    ) -> Store:
        """A Store that only reads, over ``conn`` (a file opened in place by
        ``connection.read_only``, with ``schema.reading_views`` for an older
        version): never migrated, never written. ``errors`` wraps each later
        read of a scope's series (Ctrl-C, the work budget, damage)."""
        store = cls.__new__(cls)
        store.path, store.conn = Path(path), conn
        store._migrations, store.lock_wait_s = MIGRATIONS, 0.0
        store._in_place = errors
        return store

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
            self.conn.execute("COMMIT")
        except BaseException:
            if self.conn.in_transaction:  # also when COMMIT itself failed
                self.conn.execute("ROLLBACK")
            raise

    def stop_waiting(self) -> None:
        """A signal arrived: from now on a write waits at most ``STOP_GRACE_S``
        for another writer's lock (then ``Unwritable``, and the run's keeper
        writes a recovery file), so SIGTERM ends iorig within seconds."""
        if not self._stop_waiting.is_set():
            self._stopped_at = time.monotonic()
            self._stop_waiting.set()

    def write(self, work: Callable[[sqlite3.Connection], T], wait_s: float | None = None) -> T:
        """Run ``work`` in one write transaction. While another writer holds
        the lock, try again with exponential backoff for ``wait_s`` seconds
        (the store's ``lock_wait_s``; less once ``stop_waiting`` was called);
        then, or at once for a read-only, full or failing database, raise
        ``Unwritable`` (nothing was written)."""
        self._still_the_file()
        wait = self.lock_wait_s if wait_s is None else wait_s
        started = time.monotonic()
        delay = 0.05
        while True:
            deadline = started + wait
            if self._stop_waiting.is_set():
                deadline = min(deadline, max(started, self._stopped_at) + STOP_GRACE_S)
            # SQLite's own busy wait (its backoff) in short slices: a signal
            # that arrives meanwhile is seen within one
            left = max(deadline - time.monotonic(), 0.0)
            self.conn.execute(f"PRAGMA busy_timeout={int(min(left, BUSY_SLICE_S) * 1000):d}")
            try:
                with self.transaction() as c:
                    return work(c)
            except sqlite3.OperationalError as exc:
                now = time.monotonic()
                if not connection.is_busy(exc) or now >= deadline:
                    raise self._unwritable(exc, now - started) from None
                # a short pause: SQLite's busy wait did the waiting (a lock
                # released is taken within its backoff, not after ours)
                self._stop_waiting.wait(min(delay, deadline - now))
                delay = min(delay * 2, BUSY_SLICE_S)
            except sqlite3.DatabaseError as exc:
                raise self._unwritable(exc, time.monotonic() - started) from None

    def _identity(self) -> tuple[int, int] | None:
        try:
            st = os.stat(self.path)
        except OSError:
            return None
        return st.st_dev, st.st_ino

    def _still_the_file(self) -> None:
        """A write goes to the file this store opened, which must still be
        the database at its path: one removed (or its directory) or replaced
        since would take the write where no one finds it; and its shared
        memory must still be writable, or SQLite's growing it is a SIGBUS
        (issue 48)."""
        problem = connection.shared_memory_problem(self.path)
        if problem is not None:
            raise Unwritable(
                problem,
                hint="make it writable again (chattr -i, chmod u+w); what this run measured "
                "goes to the recovery file iorig names",
            )
        opened = getattr(self, "_file", None)
        if opened is not None and self._identity() != opened:
            raise Unwritable(
                f"the results database {self.path} is no longer the file this run opened: "
                "it (or its directory) was removed or replaced while the run went on",
                hint="put the database back where it was, or import the recovery file "
                "iorig names into the database you want",
            )

    def _unwritable(self, exc: sqlite3.Error, waited: float) -> Unwritable:
        if connection.is_busy(exc):
            return Unwritable(
                f"the results database {self.path} stayed locked by another writer for "
                f"{waited:.0f} s ({exc})",
                hint=f"find the program holding it (e.g. fuser {self.path}); "
                f"{connection.LOCK_WAIT_ENV} sets how many seconds to wait (now "
                f"{self.lock_wait_s:g})",
            )
        return Unwritable(
            f"cannot write to the results database {self.path} ({exc})",
            hint="check that it and its directory are writable and the disk has space",
        )

    # ------------------------------------------------------------ writing

    def create_run(self, record: RunRecord) -> str:
        """Store a new run (normally ``running``) with its owner's identity
        (pid, process start time, boot id, PID namespace); returns its id."""
        started, boot = owner.identity(record.pid)
        namespace = owner.pid_namespace(record.pid)
        row = run_row(record) | {
            "owner_started": started,
            "owner_boot": boot,
            "owner_pidns": namespace,
        }
        self.write(lambda c: insert(c, "runs", row))
        return record.id

    def add_runs(self, runs: Iterable[StoredRun]) -> list[tuple[str, bool]]:
        """Store whole runs (phases included) in one transaction: all or
        nothing. Runs already present are left as they are and skipped —
        except a run this database holds unfinished (``running`` with its
        owner gone, aborted, or marked as having its last results in a
        recovery file), which the same run from elsewhere completes (see
        ``rows.complete``). Returns (run id, added) pairs."""
        kept = list(runs)
        return self.add_stream(lambda: kept)

    def add_stream(self, produce: Callable[[], Iterable[StoredRun]]) -> list[tuple[str, bool]]:
        """``add_runs`` of the runs ``produce()`` yields one at a time (a
        bundle's, read as they are written: memory holds one run, whatever
        their number). ``produce`` is called again if the write is retried."""

        def work(c: sqlite3.Connection) -> list[tuple[str, bool]]:
            out = []
            for stored in produce():
                if c.execute("SELECT 1 FROM runs WHERE id = ?", (stored.run.id,)).fetchone():
                    out.append((stored.run.id, complete(c, stored)))
                    continue
                insert(c, "runs", run_row(stored.run))
                for phase in stored.phases:
                    insert_phase(c, stored.run.id, phase)
                out.append((stored.run.id, True))
            return out

        return self.write(work)

    def add_warnings(self, run_id: str, findings: list[Finding]) -> None:
        def work(c: sqlite3.Connection) -> None:
            row = c.execute("SELECT warnings_json FROM runs WHERE id = ?", (run_id,)).fetchone()
            merged = codecs.WARNINGS.decode(row[0]) + tuple(findings)
            c.execute(
                "UPDATE runs SET warnings_json = ? WHERE id = ?",
                (codecs.WARNINGS.encode(merged), run_id),
            )

        self.write(work)

    def finish_run(
        self,
        run_id: str,
        status: RunStatus,
        error: str | None = None,
        *,
        recovery_file: Path | None = None,
        wait_s: float | None = None,
    ) -> None:
        """Set a run's final status; ``recovery_file`` names the file holding
        its last results (which ``iorig import`` of that file then adds)."""
        if status is RunStatus.RUNNING:
            raise ValueError(f"bad final status {status!r}")
        values = (
            str(RunStatus(status)),
            error,
            time.time(),
            None if recovery_file is None else str(recovery_file),
            run_id,
        )
        self.write(
            lambda c: c.execute(
                "UPDATE runs SET status = ?, error = ?, ended_at = ?, recovery_file = ? "
                "WHERE id = ?",
                values,
            ),
            wait_s,
        )

    def set_ab(self, run_id: str, link: AbLink) -> None:
        """Link a run to its interleaved A/B (``iorig ab``); rewritten after
        every round, as the order of the rounds grows."""

        def work(c: sqlite3.Connection) -> None:
            done = c.execute(
                "UPDATE runs SET ab_json = ? WHERE id = ?", (codecs.AB.encode(link), run_id)
            )
            if done.rowcount != 1:
                raise KeyError(f"no run {run_id}")

        self.write(work)

    def save_phase(self, run_id: str, phase: PhaseResult) -> int:
        """Store one phase with all its results in a single transaction."""
        return self.write(lambda c: insert_phase(c, run_id, phase))

    def reap_stale(self) -> list[str]:
        """Mark as aborted the runs left ``running`` on this machine by a
        process that no longer exists (pid, start time and boot id compared);
        returns their ids. Skipped, reaping nothing, when the database is
        read-only or another writer holds it (reading must not wait)."""
        rows = self.conn.execute(
            "SELECT id, pid, owner_started, owner_boot, owner_pidns FROM runs "
            "WHERE status = 'running' "
            "AND hostname = ?",
            (socket.gethostname(),),
        ).fetchall()
        reaped = []
        for run_id, pid, started, boot, namespace in rows:
            if owner.alive(pid, started, boot, namespace):
                continue
            error = ended_without_finishing(pid)
            # where write_recovery puts it: next to the database, or in TMPDIR
            places = (p for p in recovery_places(self.path, run_id) if p.is_file())
            recovery = next(places, None)
            if recovery is not None:
                error += (
                    f"; its last results are in {recovery}: add them with "
                    f"`iorig --db {self.path} import {recovery}`"
                )
            try:
                self.finish_run(
                    run_id, RunStatus.ABORTED, error, recovery_file=recovery, wait_s=REAP_WAIT_S
                )
            except Unwritable:
                break
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

    def find_runs(
        self,
        *,
        label: str | None = None,
        scenario: str | None = None,
        target: str | None = None,
        status: str | None = None,
        since: float | None = None,
        until: float | None = None,
        limit: int = 200,
    ) -> list[RunRecord]:
        """Runs newest first whose label, scenario or a target (as given, or
        its path) holds the text given (any case), with that status,
        started in [since, until)."""
        where, params = [], []
        for column, text in (("label", label), ("scenario", scenario)):
            if text:
                where.append(f"{column} LIKE ? ESCAPE '\\'")
                params.append(f"%{_like_literal(text)}%")
        if target:  # the targets' paths, not the JSON's keys ("data" is every run's role)
            where.append(
                "json_valid(runs.targets_json) AND EXISTS (SELECT 1 FROM "
                "json_each(runs.targets_json) t WHERE "
                "json_extract(t.value, '$.given') LIKE ? ESCAPE '\\' OR "
                "json_extract(t.value, '$.path') LIKE ? ESCAPE '\\')"
            )
            params += [f"%{_like_literal(target)}%"] * 2
        if status:
            where.append("status = ?")
            params.append(status)
        if since is not None:
            where.append("started_at >= ?")
            params.append(since)
        if until is not None:
            where.append("started_at < ?")
            params.append(until)
        sql = "SELECT * FROM runs"
        if where:
            sql += " WHERE " + " AND ".join(where)
        sql += " ORDER BY started_at DESC LIMIT ?"
        return [run_record(row) for row in self._rows(sql, (*params, limit))]

    def run_status(self, run_id: str) -> RunStatus | None:
        """The run's status, None when there is no such run."""
        row = self.conn.execute("SELECT status FROM runs WHERE id = ?", (run_id,)).fetchone()
        return None if row is None else RunStatus(row[0])

    def run_ids(self, *, prefix: str = "", limit: int = -1, offset: int = 0) -> list[str]:
        """Run ids newest first; only those starting with ``prefix`` when given."""
        rows = self.conn.execute(
            "SELECT id FROM runs WHERE id LIKE ? ESCAPE '\\' ORDER BY started_at DESC "
            "LIMIT ? OFFSET ?",
            (_like_literal(prefix) + "%", limit, offset),
        ).fetchall()
        return [str(r[0]) for r in rows]

    def waiting_recoveries(self, run_ids: Iterable[str]) -> dict[str, Path]:
        """Run id -> the recovery file holding its last results, not yet
        imported, of the runs ``run_ids`` that have one."""
        rows = self.conn.execute(
            "SELECT id, recovery_file FROM runs WHERE recovery_file IS NOT NULL"
        ).fetchall()
        wanted = set(run_ids)
        return {str(i): Path(f) for i, f in rows if i in wanted and isinstance(f, str)}

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
        """Per measured phase: (name, metric, per-second values of what its
        headline counts: the aggregate's, or the named workloads')."""
        kind = str(PhaseKind.MEASURE)
        rows = self.conn.execute(
            "SELECT p.id, p.name, p.headline, s.iops, s.bytes_per_s FROM phases p "
            "JOIN phase_results r ON r.phase_id = p.id AND r.workload = '' AND r.host = '' "
            "JOIN samples s ON s.result_id = r.id AND s.ddir = 'all' "
            "WHERE p.run_id = ? AND p.kind = ? ORDER BY p.seq, p.repeat, s.t_s",
            (run_id, kind),
        ).fetchall()
        out: dict[int, tuple[str, Metric, list[float]]] = {}
        for phase_id, name, metric, iops, bytes_per_s in rows:
            entry = out.setdefault(phase_id, (name, Metric(metric), []))
            entry[2].append(iops if metric == Metric.IOPS else bytes_per_s)
        for p in self._rows(  # a phase whose headline counts some workloads: theirs
            "SELECT * FROM phases WHERE run_id = ? AND kind = ? AND headline_of_json != 'null' "
            "ORDER BY seq, repeat",
            (run_id, kind),
        ):
            try:
                scope = headline_scope(self._phase(p, artifacts=False))
            except (ValueError, TypeError) as exc:
                raise UserError(
                    f"run {run_id} in {self.path} is damaged: {exc}", hint=DAMAGED_HINT
                ) from None
            metric = member(Metric, p["headline"], "headline")
            series = scope.series.get(ALL) if scope is not None else None
            out[p["id"]] = (p["name"], metric, series.values(metric).tolist() if series else [])
        return [out[k] for k in sorted(out)]  # phases are stored as they ran

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

    @functools.cached_property
    def _dense_seconds(self) -> bool:
        """Whether per-second histograms are stored dense (a file of schema
        10 or older, read where it is)."""
        return self.schema_version < SPARSE_SECONDS

    def _phase(self, p: dict[str, Any], artifacts: bool) -> PhaseResult:
        decoded: dict[tuple[int, bytes], Any] = {}  # within this phase
        scopes = [
            self._scope(r, p["run_id"], decoded)
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
            **{
                name: codec.decode(p[f"{name}_json"])
                for name, codec in codecs.PHASE_PAYLOADS.items()
            },
            series_origin=p["series_origin"],
            job_text=texts.get("job.fio", ""),
            command=command(texts.get("command", "")),
            fio_output=texts.get("fio-output.json", ""),
            fio_stderr=texts.get("fio-stderr.txt", ""),
        )

    def _scope(
        self, r: dict[str, Any], run_id: str, decoded: dict[tuple[int, bytes], Any]
    ) -> ScopeResult:
        """One scope's figures. The aggregate's series are read now; another
        scope's when used: through this connection and its guards for a file
        read in place (a bundle), else from the file on a connection of its
        own (store/series.py)."""
        rid = r["id"]
        scope = Scope(scope_value(r["workload"]), scope_value(r["host"]))
        series: Mapping[str, Series]
        if scope == AGGREGATE:
            series = read_series(self.conn, rid, dense=self._dense_seconds, decoded=decoded)
        elif self._in_place is not None:  # through this connection and its guards
            read = in_place_loader(self.conn, self._in_place, self.path, run_id, rid)
            series = LazySeries(series_ddirs(self.conn, rid), read)
        else:
            series = LazySeries(series_ddirs(self.conn, rid), loader(self.path, run_id, rid))
        hists: dict[str, Any] = {}
        for ddir, kind, count, blob in self.conn.execute(
            "SELECT ddir, kind, rows, data FROM histograms WHERE result_id = ? "
            "AND kind != 'per_second'",
            (rid,),
        ):
            what = f"histogram ({kind!r:.20}, {ddir!r:.20})"
            if kind != "total" or count != 1:
                raise DamagedData(f"{what} says {count!r:.20} rows, not 1")
            hists[ddir] = decode_histogram(blob, None, what, dense=False)
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
                hist=hists.get(t["ddir"], histogram.empty()),
            )
        return ScopeResult(
            scope=scope,
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


def recovery_path(db: Path, run_id: str) -> Path:
    """Where a run's results go when its database stays unwritable: next to it."""
    return db.with_name(f"{db.name}.recovery-{run_id}.sqlite")


def recovery_places(db: Path, run_id: str) -> tuple[Path, Path]:
    """Where a run's recovery file is written, in order: next to the
    database, else (that directory full or read-only too) in TMPDIR."""
    first = recovery_path(db, run_id)
    return first, Path(tempfile.gettempdir()) / first.name
