"""``--format seconds``: every second of every scope, exactly, where the
charts draw long series reduced (issue 29). Checked on a run built through
the model (three hours on four hosts, one slow second on one host), on
recorded databases (a 3-host run: hosts add up to the aggregate, the
aggregate's p99 is that of the hosts' merged rows) and through the
command line."""

from __future__ import annotations

import csv
import io
import shutil
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from tests import builders

from iorig.analyze.analysis import analyse
from iorig.model import AGGREGATE, ALL, Scope, SecondHists, Series, StoredRun, histogram
from iorig.report.exporters import render
from iorig.report.tables.downsample import MAX_POINTS
from iorig.store import Store

DATA = Path(__file__).resolve().parent / "data"
SECONDS = 3 * 3600
HOSTS = 4
SLOW_AT_S = 7_777  # host h02's slow second
FAST_BIN, SLOW_BIN = 600, 1_000


def _series(iops: np.ndarray, slow_at: int | None = None) -> Series:
    """``iops`` a second, all in one bin (one second in a far slower one)."""
    bins = np.full(iops.size, FAST_BIN, np.uint16)
    if slow_at is not None:
        bins[slow_at - 1] = SLOW_BIN
    hist = SecondHists(np.arange(iops.size + 1, dtype=np.int64), bins, iops.astype(np.uint64))
    lat = histogram.BIN_VALUES_NS[bins.astype(np.int64)]
    return Series(ALL, np.arange(1, iops.size + 1), iops, iops * 4096, lat, hist)


def _hours_on_four_hosts() -> StoredRun:
    rng = np.random.default_rng(29)
    hosts, total = [], np.zeros(SECONDS)
    for i in range(HOSTS):
        iops = np.round(10_000 * (1 + 0.05 * rng.standard_normal(SECONDS)))
        slow = SLOW_AT_S if i == 2 else None
        if slow:
            iops[slow - 1] = 37
        total += iops
        base = builders.scope(iops, where=Scope(host=f"h{i:02d}"))
        hosts.append(replace(base, series={ALL: _series(iops, slow)}))
    aggregate = replace(builders.scope(total, where=AGGREGATE), series={ALL: _series(total)})
    phase = builders.phase("soak", total, scopes=(aggregate, *hosts), started_at=1e9)
    names = [h.scope.host for h in hosts]
    return builders.stored("5ec0a0d5ec0a", "hours", [phase], hosts=names)


def _rows(text: str) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(text)))


def test_every_second_of_every_host_is_exported_where_the_chart_draws_fewer():
    stored = _hours_on_four_hosts()
    rows = _rows(render("seconds", analyse(stored)))
    by_scope: dict[str, list[dict[str, str]]] = {}
    for row in rows:
        by_scope.setdefault(row["host"] or row["scope"], []).append(row)
    assert sorted(by_scope) == ["aggregate", "h00", "h01", "h02", "h03"]
    assert all(len(r) == SECONDS > MAX_POINTS for r in by_scope.values())
    slow = by_scope["h02"][SLOW_AT_S - 1]
    assert (slow["t_s"], slow["iops"]) == (str(SLOW_AT_S), "37")
    assert float(slow["time_unix_s"]) == 1e9 + SLOW_AT_S
    # the slow second's p99 and mean are its own bin's, its neighbours' the fast bin's
    assert float(slow["lat_p99_ns"]) == histogram.BIN_VALUES_NS[SLOW_BIN]
    assert float(slow["lat_mean_ns"]) == histogram.BIN_VALUES_NS[SLOW_BIN]
    for near in (by_scope["h02"][SLOW_AT_S - 2], by_scope["h02"][SLOW_AT_S]):
        assert float(near["lat_p99_ns"]) == histogram.BIN_VALUES_NS[FAST_BIN]
    totals = [sum(int(by_scope[f"h{i:02d}"][k]["iops"]) for i in range(HOSTS)) for k in range(9)]
    assert [int(r["iops"]) for r in by_scope["aggregate"][:9]] == totals


@pytest.fixture
def recorded(tmp_path):
    """A copy of the schema-v10 database (upgraded as it is opened)."""
    copy = tmp_path / "results.sqlite"
    shutil.copy(DATA / "schema-v10" / "results.sqlite", copy)
    return copy


def test_a_multi_host_runs_hosts_add_up_to_its_aggregate_second_by_second(recorded):
    with Store(recorded) as store:
        stored = store.load_run("ce4d58eb90e8")
        rows = _rows(render("seconds", analyse(stored)))
        hosts = [s for s in stored.phases[-1].scopes if s.scope.host is not None]
        dense = {s.scope.host: (s.series[ALL].t_s, s.series[ALL].hist.dense()) for s in hosts}
    aggregate = [r for r in rows if r["scope"] == "aggregate"]
    by_host = {(r["host"], r["time_unix_s"]): r for r in rows if r["scope"] == "host"}
    assert len(aggregate) == 20 and len(by_host) == 3 * 20
    for row in aggregate:
        parts = [by_host[(h, row["time_unix_s"])] for h in dense]
        assert int(row["iops"]) == sum(int(p["iops"]) for p in parts)
        # the aggregate's p99: that of the hosts' rows of that second, merged here
        merged = histogram.empty()
        for part in parts:
            t_s, rows_of = dense[part["host"]]
            merged += rows_of[int(np.flatnonzero(t_s == int(part["t_s"]))[0])]
        assert float(row["lat_p99_ns"]) == histogram.percentiles(merged, [99.0])[99.0]


def test_a_one_workload_run_on_one_host_is_its_aggregate_and_one_direction(recorded):
    with Store(recorded) as store:
        rows = _rows(render("seconds", analyse(store.load_run("abf4bb5246a0"))))
    assert {(r["scope"], r["ddir"]) for r in rows} == {("aggregate", "read")}


def test_a_mixed_run_has_each_direction_and_both(tmp_path):
    copy = tmp_path / "results.sqlite"
    shutil.copy(DATA / "schema-v9" / "results.sqlite", copy)
    with Store(copy) as store:
        (mixed,) = [
            store.load_run(r)
            for r in store.run_ids()
            if {"write", "read"} <= set(store.load_run(r).phases[-1].aggregate.series)
        ]
        rows = _rows(render("seconds", analyse(mixed)))
    assert {(r["phase"], r["ddir"]) for r in rows} == {
        (mixed.phases[-1].name, d) for d in ("read", "write", "all")
    }
    for second in {r["t_s"] for r in rows}:
        at = {r["ddir"]: float(r["iops"]) for r in rows if r["t_s"] == second}
        assert at["all"] == pytest.approx(at["read"] + at["write"])


def test_report_writes_the_seconds_to_a_file(cli, recorded, tmp_path):
    out = tmp_path / "seconds.csv"
    result = cli(recorded, "report", "ce4d58eb90e8", "--format", "seconds", "-o", str(out))
    assert result.returncode == 0, result.stderr
    rows = _rows(out.read_text())
    assert len(rows) == 4 * 20 and {r["run_id"] for r in rows} == {"ce4d58eb90e8"}


def test_compare_writes_each_runs_seconds_one_after_the_other(cli, recorded):
    result = cli(recorded, "compare", "ce4d58eb90e8", "abf4bb5246a0", "--format", "seconds")
    assert result.returncode == 0, result.stderr
    runs = [r["run_id"] for r in _rows(result.stdout)]
    assert runs == ["ce4d58eb90e8"] * (4 * 20) + ["abf4bb5246a0"] * 5
