"""The live seconds of running runs, beside the results database: the file
``<database>-live`` (SQLite), written by the runs, read by ``iorig serve``
(docs/architecture.md, "Live figures").

It is a channel, not a record: a run's seconds and place go when the run
ends (its stored phases are the figures of record), only the last ``KEEP_S``
seconds of a phase are kept (a day-long run does not grow it), nothing in it
is exported, and a file of another layout is emptied and made again. What a
metrics endpoint ends a run's series on (each finished phase's stored
totals, and what the run is) stays ``KEEP_ENDED_S`` after the run, so that
``serve --metrics``, which reads once a second, has the final figures of a
run that ended between two reads. Writes are best-effort
(``LiveUnwritable``): a run never fails for its live view.
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
import time
from collections.abc import Iterable
from dataclasses import asdict
from pathlib import Path

from iorig.model.live import (
    LiveEvent,
    LivePhase,
    LiveRun,
    LiveSecond,
    LiveSource,
    MetricPhase,
    PhaseTotal,
)
from iorig.store.connection import LIVE_SUFFIX, SQLITE_SIDECARS, shared_memory_problem

LAYOUT = 2  # PRAGMA user_version of the file; another is emptied and made again
KEEP_S = 900  # seconds of each phase kept for a page that opens late
KEEP_ENDED_S = 600  # how long an ended run's totals stay for serve --metrics
SUFFIX = LIVE_SUFFIX

_TABLES = """
CREATE TABLE IF NOT EXISTS live_seconds (
    id INTEGER PRIMARY KEY,
    run_id TEXT NOT NULL,
    phase_index INTEGER NOT NULL,
    phase TEXT NOT NULL,
    host TEXT NOT NULL,
    direction TEXT NOT NULL,
    second INTEGER NOT NULL,
    t_s REAL NOT NULL,
    ios INTEGER,
    io_bytes INTEGER NOT NULL,
    ios_per_s REAL,
    bytes_per_s REAL NOT NULL,
    lat_mean_ns REAL,
    lat_p50_ns REAL,
    lat_p99_ns REAL,
    source TEXT NOT NULL,
    lat_sum_ns REAL,
    lat_buckets TEXT
);
CREATE INDEX IF NOT EXISTS live_seconds_run ON live_seconds (run_id, id);
CREATE TABLE IF NOT EXISTS live_phase (
    run_id TEXT PRIMARY KEY,
    payload TEXT NOT NULL,
    updated_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS live_runs (
    run_id TEXT PRIMARY KEY,
    payload TEXT NOT NULL,
    updated_at REAL NOT NULL,
    ended_at REAL
);
CREATE TABLE IF NOT EXISTS live_totals (
    run_id TEXT NOT NULL,
    phase_index INTEGER NOT NULL,
    host TEXT NOT NULL,
    direction TEXT NOT NULL,
    payload TEXT NOT NULL,
    PRIMARY KEY (run_id, phase_index, host, direction)
);
"""
_DROP = (
    "DROP TABLE IF EXISTS live_seconds; DROP TABLE IF EXISTS live_phase; "
    "DROP TABLE IF EXISTS live_runs; DROP TABLE IF EXISTS live_totals;"
)
_COLUMNS = (
    "run_id, phase_index, phase, host, direction, second, t_s, ios, io_bytes, ios_per_s, "
    "bytes_per_s, lat_mean_ns, lat_p50_ns, lat_p99_ns, source, lat_sum_ns, lat_buckets"
)


class LiveUnwritable(Exception):
    """The live file could not be written (the run goes on without it)."""


def live_path(database: Path) -> Path:
    return database.with_name(database.name + SUFFIX)


class LiveStore:
    """One connection to a database's live file; ``wait_s`` bounds a wait
    for another writer (a run's second is dropped rather than delayed)."""

    def __init__(self, database: Path, *, wait_s: float = 0.2) -> None:
        self.path = live_path(database)
        # SQLite follows links: one planted here would take the tables elsewhere
        for path in (self.path, *(Path(f"{self.path}{s}") for s in SQLITE_SIDECARS)):
            if path.is_symlink():
                raise LiveUnwritable(f"{path} is a symbolic link, not iorig's live file")
        try:
            # one user at a time, from whichever thread (serve's workers)
            self.conn = sqlite3.connect(
                self.path, timeout=wait_s, isolation_level=None, check_same_thread=False
            )
            self.conn.execute("PRAGMA journal_mode=WAL")
            self.conn.execute("PRAGMA synchronous=OFF")  # a second lost in a crash is no loss
            if int(self.conn.execute("PRAGMA user_version").fetchone()[0]) not in (0, LAYOUT):
                self.conn.executescript(_DROP)
            self.conn.executescript(_TABLES)
            self.conn.execute(f"PRAGMA user_version = {LAYOUT:d}")
        except sqlite3.Error as exc:
            raise LiveUnwritable(f"{self.path}: {exc}") from None

    @classmethod
    def reading(cls, database: Path, *, wait_s: float = 1.0) -> LiveStore:
        """A read-only connection to an existing live file: a reader that
        wrote (the tables, the layout's version) could hold up a run's write
        past its ``wait_s`` and the run would drop that second."""
        store = object.__new__(cls)
        store.path = live_path(database)
        try:
            if not store.path.exists():
                raise sqlite3.OperationalError("no live file yet")
            # as a URI, so a "?" or "#" in the path is the path's (percent-encoded)
            uri = f"{store.path.resolve().as_uri()}?mode=ro"
            store.conn = sqlite3.connect(uri, uri=True, timeout=wait_s, check_same_thread=False)
        except sqlite3.Error as exc:
            raise LiveUnwritable(f"{store.path}: {exc}") from None
        return store

    def close(self) -> None:
        self.conn.close()

    def __enter__(self) -> LiveStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------ writing

    def _write(self, sql_and_args: Iterable[tuple[str, tuple]]) -> None:
        if (problem := shared_memory_problem(self.path)) is not None:
            raise LiveUnwritable(problem)
        try:
            self.conn.execute("BEGIN IMMEDIATE")
            try:
                for sql, args in sql_and_args:
                    self.conn.execute(sql, args)
                self.conn.execute("COMMIT")
            except BaseException:
                if self.conn.in_transaction:
                    self.conn.execute("ROLLBACK")
                raise
        except sqlite3.Error as exc:
            raise LiveUnwritable(f"{self.path}: {exc}") from None

    def put_phase(self, run_id: str, phase: LivePhase) -> None:
        payload = json.dumps(asdict(phase))
        self._write(
            [
                (
                    "INSERT OR REPLACE INTO live_phase (run_id, payload, updated_at) "
                    "VALUES (?, ?, ?)",
                    (run_id, payload, time.time()),
                )
            ]
        )

    def put_run(self, run_id: str, run: LiveRun) -> None:
        self._write(
            [
                (
                    "INSERT INTO live_runs (run_id, payload, updated_at) VALUES (?, ?, ?) "
                    "ON CONFLICT (run_id) DO UPDATE SET payload = excluded.payload, "
                    "updated_at = excluded.updated_at",
                    (run_id, json.dumps(asdict(run)), time.time()),
                )
            ]
        )

    def put_seconds(self, run_id: str, seconds: Iterable[LiveSecond]) -> None:
        rows = [
            (
                f"INSERT INTO live_seconds ({_COLUMNS}) VALUES ({', '.join('?' * 17)})",
                (
                    run_id,
                    s.phase_index,
                    s.phase,
                    s.host,
                    s.direction,
                    s.second,
                    s.t_s,
                    s.ios,
                    s.io_bytes,
                    s.ios_per_s,
                    s.bytes_per_s,
                    s.lat_mean_ns,
                    s.lat_p50_ns,
                    s.lat_p99_ns,
                    str(s.source),
                    s.lat_sum_ns,
                    json.dumps(s.lat_buckets) if s.lat_buckets is not None else None,
                ),
            )
            for s in seconds
        ]
        if not rows:
            return
        newest = max(s.second for s in seconds)
        phase_index = max(s.phase_index for s in seconds)
        rows.append(  # older phases and seconds past what is kept
            (
                "DELETE FROM live_seconds WHERE run_id = ? AND (phase_index < ? OR second < ?)",
                (run_id, phase_index, newest - KEEP_S),
            )
        )
        self._write(rows)

    def put_totals(self, run_id: str, totals: Iterable[PhaseTotal], *, aborted: bool) -> None:
        """Kept after the run, for a metrics endpoint's final figures."""
        self._write(
            (
                "INSERT OR REPLACE INTO live_totals "
                "(run_id, phase_index, host, direction, payload) VALUES (?, ?, ?, ?, ?)",
                (run_id, t.phase_index, t.host, t.direction, json.dumps(asdict(t))),
            )
            for t in totals
        )

    def drop_run(self, run_id: str) -> None:
        """The run ended: its stored phases say what it measured. What a
        metrics endpoint ends on stays ``KEEP_ENDED_S``; runs that ended
        before that go."""
        now = time.time()
        old = "SELECT run_id FROM live_runs WHERE ended_at < ?"
        self._write(
            [
                ("DELETE FROM live_seconds WHERE run_id = ?", (run_id,)),
                ("DELETE FROM live_phase WHERE run_id = ?", (run_id,)),
                ("UPDATE live_runs SET ended_at = ? WHERE run_id = ?", (now, run_id)),
                (f"DELETE FROM live_totals WHERE run_id IN ({old})", (now - KEEP_ENDED_S,)),
                (f"DELETE FROM live_runs WHERE run_id IN ({old})", (now - KEEP_ENDED_S,)),
            ]
        )

    # ------------------------------------------------------------ reading

    def phase(self, run_id: str) -> LivePhase | None:
        """Where the run is, None when it writes nothing (or wrote nonsense)."""
        row = self.conn.execute(
            "SELECT payload FROM live_phase WHERE run_id = ?", (run_id,)
        ).fetchone()
        if row is None:
            return None
        with contextlib.suppress(ValueError, TypeError, KeyError):
            data = json.loads(row[0])
            if isinstance(data, dict):
                source = data.get("source")
                data["source"] = LiveSource(source) if source is not None else None
                data["events"] = tuple(LiveEvent(**e) for e in data.get("events") or ())
                data["coming"] = tuple(str(name) for name in data.get("coming") or ())
                return LivePhase(**data)
        return None

    def seconds_after(self, run_id: str, after_id: int = 0) -> list[tuple[int, LiveSecond]]:
        """The run's seconds written after row ``after_id``, oldest first;
        rows that do not make a ``LiveSecond`` are left out."""
        out = []
        for row in self.conn.execute(
            f"SELECT id, {_COLUMNS} FROM live_seconds WHERE run_id = ? AND id > ? ORDER BY id",
            (run_id, after_id),
        ):
            with contextlib.suppress(ValueError, TypeError):
                out.append((int(row[0]), _second(row[2:])))
        return out

    def runs(self) -> list[str]:
        return [r[0] for r in self.conn.execute("SELECT run_id FROM live_phase ORDER BY run_id")]

    def metric_runs(self) -> dict[str, tuple[LiveRun, float | None]]:
        """Each run a metrics endpoint shows: what it is, and when it ended
        (unix seconds; None while it runs). Rows that do not make a
        ``LiveRun`` are left out."""
        out = {}
        for run_id, payload, ended_at in self.conn.execute(
            "SELECT run_id, payload, ended_at FROM live_runs ORDER BY run_id"
        ):
            with contextlib.suppress(ValueError, TypeError, KeyError):
                out[run_id] = (_run(json.loads(payload)), _number(ended_at))
        return out

    def totals(self, run_id: str) -> list[PhaseTotal]:
        """The run's finished phases' totals; rows that do not make one are left out."""
        out = []
        for (payload,) in self.conn.execute(
            "SELECT payload FROM live_totals WHERE run_id = ? "
            "ORDER BY phase_index, host, direction",
            (run_id,),
        ):
            with contextlib.suppress(ValueError, TypeError, KeyError):
                data = json.loads(payload)
                if data.get("lat_buckets") is not None:
                    data["lat_buckets"] = tuple(data["lat_buckets"])
                out.append(PhaseTotal(**data))
        return out


def _number(value: object) -> float | None:
    if value is None:
        return None
    if not isinstance(value, (int, float)):
        raise TypeError("not a number")
    return float(value)


def _run(data: dict) -> LiveRun:
    """A ``LiveRun`` from its JSON, or ValueError/TypeError/KeyError."""
    hosts = tuple((str(h), str(t)) for h, t in data["hosts"])
    phases = []
    for p in data["phases"]:
        point = p["point"]
        if not isinstance(p["phase_index"], int) or not (point is None or isinstance(point, int)):
            raise TypeError("not an integer")
        phases.append(
            MetricPhase(p["phase_index"], str(p["phase"]), point, tuple(map(str, p["directions"])))
        )
    return LiveRun(str(data["label"]), str(data["scenario"]), hosts, tuple(phases))


def _second(row: tuple) -> LiveSecond:
    (phase_index, phase, host, direction, second, t_s, ios, io_bytes) = row[:8]
    (ios_per_s, bytes_per_s, lat_mean, p50, p99, source, lat_sum, buckets) = row[8:]
    for value in (phase_index, second, io_bytes, *((ios,) if ios is not None else ())):
        if not isinstance(value, int):
            raise TypeError("not an integer")
    for value in (phase, host, direction, source):
        if not isinstance(value, str):
            raise TypeError("not text")
    return LiveSecond(
        phase_index=phase_index,
        phase=phase,
        host=host,
        direction=direction,
        second=second,
        t_s=float(t_s),
        ios=ios,
        io_bytes=io_bytes,
        ios_per_s=None if ios_per_s is None else float(ios_per_s),
        bytes_per_s=float(bytes_per_s),
        lat_mean_ns=None if lat_mean is None else float(lat_mean),
        lat_p50_ns=None if p50 is None else float(p50),
        lat_p99_ns=None if p99 is None else float(p99),
        source=LiveSource(source),
        lat_sum_ns=None if lat_sum is None else float(lat_sum),
        lat_buckets=None if buckets is None else tuple(json.loads(buckets)),
    )
