"""The results database: round trip of every figure, atomic phase writes,
forward migrations, refusal of newer schemas, run addressing, stale runs."""

from __future__ import annotations

import socket
import sqlite3
import subprocess
from dataclasses import replace

import numpy as np
import pytest
from tests import builders

from iorig.cli.refs import resolve_run_id
from iorig.errors import UserError
from iorig.model import (
    AGGREGATE,
    ALL,
    Metric,
    PhaseKind,
    PhaseResult,
    PhaseStatus,
    RunStatus,
    Scope,
    ScopeResult,
    Series,
    Totals,
    histogram,
)
from iorig.model.secondhists import SecondHists
from iorig.store import Store, rows
from iorig.store.schema import MIGRATIONS
from iorig.store.series import LazySeries


def _totals(ddir: str, seed: int) -> Totals:
    rng = np.random.default_rng(seed)
    hist = histogram.empty()
    idx = rng.integers(200, 900, size=5000)
    np.add.at(hist, idx, 1)
    return Totals(
        ddir=ddir,
        ios=5000,
        io_bytes=5000 * 4096,
        iops=1000.0 + seed,
        bytes_per_s=(1000.0 + seed) * 4096,
        lat_mean_ns=histogram.mean(hist),
        lat_min_ns=100.0,
        lat_max_ns=9e6,
        lat_stddev_ns=1234.5,
        slat_mean_ns=2000.0,
        total_lat_mean_ns=histogram.mean(hist) + 2000.0,
        hist=hist,
    )


def _series(ddir: str, n: int) -> Series:
    hist = np.zeros((n, histogram.NR_BINS), dtype=np.uint64)
    hist[:, 500] = np.arange(1, n + 1)
    lat = np.linspace(1e5, 2e5, n)
    lat[1] = np.nan  # a second without completions survives the round trip
    return Series(
        ddir,
        np.arange(1, n + 1),
        np.linspace(900, 1100, n),
        np.linspace(900, 1100, n) * 4096,
        lat,
        SecondHists.from_dense(hist),
    )


def _phase(seq: int = 2, status: PhaseStatus = PhaseStatus.OK) -> PhaseResult:
    scope = ScopeResult(
        scope=AGGREGATE,
        jobs=2,
        totals={"read": _totals("read", 1), ALL: _totals(ALL, 2)},
        series={"read": _series("read", 6), ALL: _series(ALL, 6)},
        usr_cpu_pct=3.5,
        sys_cpu_pct=20.25,
        busiest_job_cpu_pct=25.0,
        errors=0,
    )
    return PhaseResult(
        seq=seq,
        name="random-read",
        kind=PhaseKind.MEASURE,
        status=status,
        started_at=1000.0,
        ended_at=1006.5,
        planned_s=6.0,
        headline=Metric.IOPS,
        scopes=(scope, replace(scope, scope=Scope("randread", "local"))),
        job_text="[global]\n[randread]\nrw=randread\n",
        command=("fio", "--output-format=json+"),
        fio_version="fio-3.33",
        engine="io_uring",
        fio_output='{"fio version": "fio-3.33"}',
        fio_stderr="",
    )


def _run(store: Store, run_id: str = "0123456789ab", **over: object) -> str:
    args = dict(
        scenario_text="name: peak\n",
        resolved={"name": "peak"},
        params={"size": {"value": 1, "text": "1B", "origin": "default"}},
        profile="quick",
        targets=[{"role": "data", "given": "/x", "path": "/x", "kind": "file", "size_bytes": 1}],
        command="iorig run peak",
        status=RunStatus.RUNNING,
        ended_at=None,
        hostname=socket.gethostname(),
    )
    args.update(over)
    return store.create_run(builders.record(run_id, **args))


def test_phase_round_trip_keeps_every_figure(db_path):
    with Store(db_path) as store:
        run_id = _run(store)
        phase = _phase()
        phase_id = store.save_phase(run_id, phase)
        store.finish_run(run_id, RunStatus.OK)
    with Store(db_path) as store:
        loaded = store.load_run(run_id)
        assert loaded.run.status == "ok" and loaded.run.profile == "quick"
        assert loaded.phase_ids == (phase_id,)
        got = loaded.phases[0]
        assert (got.name, got.kind, got.status, got.engine) == (
            "random-read",
            "measure",
            "ok",
            "io_uring",
        )
        assert [s.scope for s in got.scopes] == [AGGREGATE, Scope("randread", "local")]
        for ddir in ("read", ALL):
            want, have = phase.scopes[0].totals[ddir], got.scopes[0].totals[ddir]
            assert have.ios == want.ios and have.iops == want.iops
            assert np.array_equal(have.hist, want.hist)
            assert have.percentiles_ns() == want.percentiles_ns()
            ws, hs = phase.scopes[0].series[ddir], got.scopes[0].series[ddir]
            assert np.array_equal(hs.t_s, ws.t_s)
            assert np.allclose(hs.iops, ws.iops)
            assert np.allclose(hs.lat_mean_ns, ws.lat_mean_ns, equal_nan=True)
            assert np.isnan(hs.lat_mean_ns[1])
            assert np.array_equal(hs.hist.dense(), ws.hist.dense())
        assert store.artifact(phase_id, "job.fio") == phase.job_text
        assert store.artifact(phase_id, "fio-output.json") == phase.fio_output
        # stored percentile columns come from the histogram
        p99 = store.conn.execute("SELECT lat_p99_ns FROM totals WHERE ddir = 'all' LIMIT 1")
        assert p99.fetchone()[0] == phase.scopes[0].totals[ALL].percentiles_ns((99.0,))[99.0]


def test_a_scope_other_than_the_aggregate_reads_its_series_when_used(db_path):
    with Store(db_path) as store:
        run_id = _run(store)
        phase = _phase()
        store.save_phase(run_id, phase)
        store.finish_run(run_id, RunStatus.OK)
    with Store(db_path) as store:
        loaded = store.load_run(run_id).phases[0]
    aggregate, workload = loaded.scopes
    assert isinstance(aggregate.series, dict)  # read with the phase
    assert isinstance(workload.series, LazySeries) and list(workload.series) == [ALL, "read"]
    # read after the store was closed, from the file, as stored
    for ddir in ("read", ALL):
        want, have = phase.scopes[1].series[ddir], workload.series[ddir]
        assert np.array_equal(have.t_s, want.t_s) and np.allclose(have.iops, want.iops)
        assert np.array_equal(have.hist.dense(), want.hist.dense())
    assert "write" not in workload.series
    with pytest.raises(KeyError):
        workload.series["write"]
    conn = sqlite3.connect(db_path)
    conn.execute("UPDATE samples SET iops = 'many' WHERE result_id = 2 AND t_s = 3")
    conn.commit()
    conn.close()
    with pytest.raises(UserError, match=f"run {run_id} .* damaged.*not a number"):
        workload.series[ALL]


def test_runs_are_found_by_their_targets_paths_not_the_records_keys(db_path):
    def target(given: str) -> list[dict]:
        return [
            {
                "role": "data",
                "given": given,
                "path": f"{given}iorig-data.dat",
                "kind": "directory",
                "size_bytes": 1,
            }
        ]

    with Store(db_path) as store:
        ssd = _run(store, "0123456789ab", targets=target("/mnt/ssd_1/"))
        hdd = _run(store, "0123456789ac", targets=target("/mnt/hdd/"))
        found = {
            text: [r.id for r in store.find_runs(target=text)]
            for text in ("ssd", "SSD", "iorig-data", "directory", "role", "ssd_", "d%1", "/mnt/")
        }
        both = [r.id for r in store.find_runs(target="/mnt/", label="nothing")]
    assert found["ssd"] == found["SSD"] == found["ssd_"] == [ssd]
    assert sorted(found["iorig-data"]) == sorted(found["/mnt/"]) == sorted([ssd, hdd])
    # the record's keys and other fields are not searched: every run has them
    assert found["directory"] == found["role"] == []
    assert found["d%1"] == []  # a LIKE wildcard is itself
    assert both == []  # with the other filters, not instead of them


def test_phase_write_is_atomic(db_path, monkeypatch):
    with Store(db_path) as store:
        run_id = _run(store)

        def explode(*args: object) -> None:
            raise RuntimeError("disk full")

        monkeypatch.setattr(rows, "_save_scope", explode)  # after the phase row
        with pytest.raises(RuntimeError):
            store.save_phase(run_id, _phase())
        counts = [
            store.conn.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0]
            for t in ("phases", "phase_results", "totals", "samples", "artifacts")
        ]
        assert counts == [0, 0, 0, 0, 0]
        assert store.conn.in_transaction is False


def test_new_database_is_wal_at_latest_schema(db_path):
    with Store(db_path) as store:
        assert store.schema_version == len(MIGRATIONS)
        mode = store.conn.execute("PRAGMA journal_mode").fetchone()[0]
        assert mode == "wal"


def test_forward_migration_upgrades_and_keeps_data(db_path):
    with Store(db_path) as store:
        run_id = _run(store)
        store.save_phase(run_id, _phase())

    def add_note_column(conn: sqlite3.Connection) -> None:
        conn.execute("ALTER TABLE runs ADD COLUMN note TEXT NOT NULL DEFAULT 'migrated'")

    with Store(db_path, migrations=[*MIGRATIONS, add_note_column]) as store:
        assert store.schema_version == len(MIGRATIONS) + 1
        note = store.conn.execute("SELECT note FROM runs WHERE id = ?", (run_id,)).fetchone()[0]
        assert note == "migrated"
        assert store.load_run(run_id).phases[0].scopes[0].totals[ALL].ios == 5000


def test_failed_migration_leaves_the_database_unchanged(db_path):
    with Store(db_path) as store:
        _run(store)

    def broken(conn: sqlite3.Connection) -> None:
        conn.execute("ALTER TABLE runs ADD COLUMN half TEXT")
        raise sqlite3.OperationalError("simulated failure half-way")

    with pytest.raises(UserError, match=f"left unchanged at version {len(MIGRATIONS)}"):
        Store(db_path, migrations=[*MIGRATIONS, broken])
    with Store(db_path) as store:
        assert store.schema_version == len(MIGRATIONS)
        columns = [r[1] for r in store.conn.execute("PRAGMA table_info(runs)")]
        assert "half" not in columns


def test_newer_schema_is_refused(db_path):
    with Store(db_path):
        pass
    conn = sqlite3.connect(db_path)
    conn.execute(f"PRAGMA user_version = {len(MIGRATIONS) + 5}")
    conn.close()
    with pytest.raises(UserError, match="newer than this iorig understands"):
        Store(db_path)


def test_not_a_database_is_refused(tmp_path):
    bogus = tmp_path / "results.sqlite"
    bogus.write_text("this is not sqlite, it is a note\n" * 100)
    with pytest.raises(UserError, match="not an iorig results database"):
        Store(bogus)


def test_run_addressing(db_path):
    with Store(db_path) as store:
        first = _run(store, run_id="abc123000001", started_at=1.0)
        second = _run(store, run_id="abc124000002", started_at=2.0)
        assert resolve_run_id(store, "last") == second
        assert resolve_run_id(store, "last~1") == first
        assert resolve_run_id(store, "abc123") == first
        assert resolve_run_id(store, second) == second
        with pytest.raises(UserError, match="matches 2 runs"):
            resolve_run_id(store, "abc12")
        with pytest.raises(UserError, match="no run with id"):
            resolve_run_id(store, "fff")
        with pytest.raises(UserError, match="neither a run id nor a run's label"):
            resolve_run_id(store, "peak; drop table runs")
        for bad in ("last~abc", "last~-1", "lastly", "last~"):
            with pytest.raises(UserError, match="not a run reference"):
                resolve_run_id(store, bad)
        with pytest.raises(UserError, match="too few runs"):
            resolve_run_id(store, "last~2")
        _run(store, run_id="abc125000003", started_at=3.0, label="host")
        assert resolve_run_id(store, "host") == "abc125000003"
        _run(store, run_id="abc126000004", started_at=4.0, label="host")
        with pytest.raises(UserError, match="2 runs are labelled 'host'"):
            resolve_run_id(store, "host")


def test_empty_database_last_is_a_clear_error(db_path):
    with Store(db_path) as store, pytest.raises(UserError, match="has no runs"):
        resolve_run_id(store, "last")


@pytest.mark.system
def test_run_of_a_dead_process_is_marked_aborted_only_when_asked(db_path):
    dead = subprocess.Popen(["true"])
    dead.wait()
    with Store(db_path) as store:
        run_id = _run(store)
        store.conn.execute("UPDATE runs SET pid = ? WHERE id = ?", (dead.pid, run_id))
        (record,) = store.list_runs()
        assert record.status == RunStatus.RUNNING  # reading never writes
        assert store.reap_stale() == [run_id]
        (record,) = store.list_runs()
        assert record.status == RunStatus.ABORTED
        assert "ended without finishing" in (record.error or "")


def test_headline_series_reads_the_aggregate_per_second_values(db_path):
    with Store(db_path) as store:
        run_id = _run(store)
        phase = _phase()
        store.save_phase(run_id, phase)
        ((name, metric, values),) = store.headline_series(run_id)
        assert (name, metric) == ("random-read", "iops")
        assert np.allclose(values, phase.scopes[0].series[ALL].iops)
