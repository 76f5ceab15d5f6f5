"""How runs sit in rows: a RunRecord as a ``runs`` row and back, a phase
with all its figures as rows, completing an unfinished run, and the one
INSERT helper (table and column names come from this package only)."""

from __future__ import annotations

import secrets
import sqlite3
import zlib
from dataclasses import fields
from enum import StrEnum
from typing import Any

from iorig.errors import UserError
from iorig.model import PhaseResult, RunRecord, RunStatus, ScopeResult, StoredRun
from iorig.store import codecs, owner
from iorig.store.cells import command_text, member, nan_to_none, pack, pack_seconds, scope_text

PCT_COLUMNS = {
    50.0: "lat_p50_ns",
    90.0: "lat_p90_ns",
    99.0: "lat_p99_ns",
    99.9: "lat_p999_ns",
    99.99: "lat_p9999_ns",
}
ARTIFACTS = ("job.fio", "command", "fio-output.json", "fio-stderr.txt")


def new_run_id() -> str:
    return secrets.token_hex(6)


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


def insert(c: sqlite3.Connection, table: str, row: dict[str, Any]) -> int:
    # Table and column names come from this package only, never from input.
    sql = f"INSERT INTO {table} ({', '.join(row)}) VALUES ({', '.join('?' * len(row))})"
    return int(c.execute(sql, tuple(row.values())).lastrowid or 0)


def insert_phase(c: sqlite3.Connection, run_id: str, phase: PhaseResult) -> int:
    phase_id = insert(
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
            **{
                f"{name}_json": codec.encode(getattr(phase, name))
                for name, codec in codecs.PHASE_PAYLOADS.items()
            },
            "series_origin": phase.series_origin,
        },
    )
    for scope in phase.scopes:
        _save_scope(c, phase_id, scope)
    if phase.steady is not None:
        st = phase.steady
        insert(
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
            (phase.job_text, command_text(phase.command), phase.fio_output, phase.fio_stderr),
            strict=True,
        )
    )
    c.executemany(
        "INSERT INTO artifacts (phase_id, name, data) VALUES (?,?,?)",
        [(phase_id, n, zlib.compress(t.encode(), 6)) for n, t in texts.items() if t],
    )
    return phase_id


def _save_scope(c: sqlite3.Connection, phase_id: int, result: ScopeResult) -> None:
    result_id = insert(
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
        insert(
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
        insert(
            c,
            "histograms",
            {
                "result_id": result_id,
                "ddir": ddir,
                "kind": "total",
                "rows": 1,
                "data": pack(t.hist),
            },
        )
    for ddir, s in result.series.items():
        c.executemany(
            "INSERT INTO samples (result_id, ddir, t_s, iops, bytes_per_s, lat_mean_ns) "
            "VALUES (?,?,?,?,?,?)",
            [
                (result_id, ddir, int(t), float(i), float(b), nan_to_none(float(lat)))
                for t, i, b, lat in zip(s.t_s, s.iops, s.bytes_per_s, s.lat_mean_ns, strict=True)
            ],
        )
        insert(
            c,
            "histograms",
            {
                "result_id": result_id,
                "ddir": ddir,
                "kind": "per_second",
                "rows": len(s),
                "data": pack_seconds(s.hist),
            },
        )


def ended_without_finishing(pid: int) -> str:
    """A run's error when its iorig process was found gone while it was ``running``."""
    return f"the iorig process (pid {pid}) ended without finishing"


def complete(c: sqlite3.Connection, stored: StoredRun) -> bool:
    """Complete the stored run ``stored.run.id`` from ``stored`` (its
    recovery file): only the same run (host, pid, start, command, scenario)
    that its own process did not finish — marked as having its results in
    a recovery file, or, its owner gone, still ``running`` or ``aborted``
    (by a later iorig that found it gone: whatever ran in between, the file
    stays importable) — and only when ``stored`` holds every phase the
    database has. Adds the missing phases and sets the final status (a file
    still ``running``, its process killed, ends ``aborted``). Returns
    whether anything changed: importing the file again changes nothing."""
    run = stored.run
    row = c.execute(
        "SELECT status, hostname, pid, started_at, command, scenario_text, owner_started, "
        "owner_boot, owner_pidns, recovery_file, error, warnings_json FROM runs WHERE id = ?",
        (run.id,),
    ).fetchone()
    status, *same, started, boot, namespace, recovery, error, warnings = row
    if same != [run.hostname, run.pid, run.started_at, run.command, run.scenario_text]:
        return False
    gone = not owner.alive(run.pid, started, boot, namespace)
    if recovery is None and not (gone and status in (RunStatus.RUNNING, RunStatus.ABORTED)):
        return False
    final, why, ended = run.status, run.error, run.ended_at
    if final is RunStatus.RUNNING:  # written before its process was killed
        if not gone:
            return False
        final = RunStatus.ABORTED
        why = ended_without_finishing(run.pid) + "; its last results came from its recovery file"
        ended = max((p.ended_at for p in stored.phases), default=run.started_at)
    have = set(c.execute("SELECT seq, repeat FROM phases WHERE run_id = ?", (run.id,)))
    if not have <= {(p.seq, p.repeat) for p in stored.phases}:
        return False
    missing = [p for p in stored.phases if (p.seq, p.repeat) not in have]
    findings = codecs.WARNINGS.encode(run.warnings)
    if not missing and recovery is None and (status, error, warnings) == (final, why, findings):
        return False  # imported before
    for phase in missing:
        insert_phase(c, run.id, phase)
    c.execute(
        "UPDATE runs SET status = ?, error = ?, ended_at = ?, warnings_json = ?, "
        "recovery_file = NULL WHERE id = ?",
        (str(final), why, ended, findings, run.id),
    )
    return True
