"""What a phase's headline counts: every workload, or those its scenario
names (Exchange's transactional I/O is its database threads, not the log,
probe and maintenance streams beside them, issue 49). The summary, the run
list, comparisons and per-host figures count the same workloads; several
hosts' shares meet on the aggregate's axis."""

from __future__ import annotations

import socket
from dataclasses import replace

import numpy as np
import pytest
from tests import builders

from iorig.analyze.ab import round_level
from iorig.analyze.compare import pool_phases
from iorig.analyze.summary import summarize_phase
from iorig.model import ALL, HeadlineOf, RunStatus, Scope, ScopeResult
from iorig.model.combine import headline_scope, merge_hosts
from iorig.report.tables.run import phase_label
from iorig.scenario.schema import Phase
from iorig.store import Store
from iorig.store.codecs import HEADLINE_OF, PayloadError

DB = np.array([400.0, 420.0, 380.0, 400.0])
LOG = np.array([40.0, 42.0, 38.0, 40.0])
MAINTENANCE = np.array([4.0, 4.0, 4.0, 4.0])


def _reads(per_second: np.ndarray, where: Scope, lat_ns: float = 1e6) -> ScopeResult:
    """A scope of reads: its read direction and "all", as fio's are stored."""
    built = builders.scope(per_second, where=where, lat_ns=lat_ns)
    t, s = built.totals[ALL], built.series[ALL]
    return replace(
        built,
        totals={"read": replace(t, ddir="read"), ALL: t},
        series={"read": replace(s, ddir="read"), ALL: s},
    )


def _exchange_like(host: str | None = None) -> tuple:
    """A host's three workloads and its aggregate (db + log + maintenance)."""
    parts = (
        _reads(DB, Scope("db", host), lat_ns=15e6),
        _reads(LOG, Scope("log", host)),
        _reads(MAINTENANCE, Scope("maintenance", host), lat_ns=2e6),
    )
    whole = _reads(DB + LOG + MAINTENANCE, Scope(host=host))
    return whole, parts


def _one_host(named: tuple[str, ...] | None = ("db",)):
    whole, parts = _exchange_like()
    return builders.phase(
        "performance",
        DB + LOG + MAINTENANCE,
        scopes=(whole, *parts),
        headline_of=HeadlineOf(named) if named else None,
    )


def test_the_headline_counts_the_named_workloads_and_every_one_without_a_name():
    named, everything = _one_host(), _one_host(None)
    s = summarize_phase(named)
    assert s.iops == pytest.approx(DB.mean()) and s.per_second.median == pytest.approx(400.0)
    assert s.lat_mean_ns == pytest.approx(15e6)  # the database's own latency
    assert s.headline_workloads == ("db",)
    assert phase_label(s) == "performance (IOPS of db)"
    whole = summarize_phase(everything)
    assert whole.iops == pytest.approx((DB + LOG + MAINTENANCE).mean())
    assert phase_label(whole) == "performance (IOPS)"
    # comparisons and A/B rounds read the same figure as the summary
    assert pool_phases([named])["performance"].iops == pytest.approx(DB.mean())
    assert round_level(named) == pytest.approx(400.0)
    assert round_level(everything) == pytest.approx(444.0)


def test_several_hosts_meet_on_the_aggregates_axis():
    # host b began one second after host a: its second k is a's k + 1
    a_whole, a_parts = _exchange_like("a")
    b_whole, b_parts = _exchange_like("b")
    shifts = {"a": 0, "b": 1}
    aggregate = merge_hosts([a_whole, b_whole], shifts)
    phase = builders.phase(
        "performance",
        DB,
        scopes=(aggregate, a_whole, b_whole, *a_parts, *b_parts),
        headline_of=HeadlineOf(("db", "log"), shifts),
    )
    counted = headline_scope(phase)
    assert counted is not None and counted.scope == aggregate.scope
    # a's seconds 2-4 beside b's 1-3: the seconds both ran, as the aggregate
    series = counted.series[ALL]
    assert series.t_s.tolist() == aggregate.series[ALL].t_s.tolist() == [2, 3, 4]
    db_log = DB + LOG
    assert series.iops.tolist() == pytest.approx((db_log[1:] + db_log[:-1]).tolist())
    assert counted.totals[ALL].iops == pytest.approx(2 * db_log.mean())
    # one host's share counts its own named workloads, on its own axis
    b = headline_scope(phase, "b")
    assert b is not None and b.scope == Scope(host="b")
    assert b.series[ALL].iops.tolist() == pytest.approx(db_log.tolist())
    assert headline_scope(phase, "c") is None


def test_a_phase_whose_named_workloads_left_nothing_has_no_headline():
    whole, parts = _exchange_like()
    phase = builders.phase(
        "performance", DB, scopes=(whole, parts[1]), headline_of=HeadlineOf(("db",))
    )
    assert headline_scope(phase) is None
    assert np.isnan(summarize_phase(phase).iops)


def test_the_named_workloads_are_stored_and_the_run_list_reads_theirs(db_path):
    whole, parts = _exchange_like()
    phase = builders.phase(
        "performance", DB, scopes=(whole, *parts), headline_of=HeadlineOf(("db",))
    )
    plain = builders.phase("all", DB + LOG, seq=2)
    with Store(db_path) as store:
        run_id = store.create_run(
            builders.record(
                "0123456789ab",
                status=RunStatus.RUNNING,
                ended_at=None,
                hostname=socket.gethostname(),
            )
        )
        store.save_phase(run_id, phase)
        store.save_phase(run_id, plain)
        store.finish_run(run_id, RunStatus.OK)
    with Store(db_path) as store:
        loaded = store.load_run(run_id).phases[0]
        listed = store.headline_series(run_id)
    assert loaded.headline_of == HeadlineOf(("db",), {})
    assert [(name, values) for name, _m, values in listed] == [
        ("performance", pytest.approx(DB.tolist())),
        ("all", pytest.approx((DB + LOG).tolist())),
    ]


@pytest.mark.parametrize(
    "text",
    [
        '{"workloads": []}',
        '{"workloads": [], "host_shifts_s": {}}',
        '{"workloads": [7], "host_shifts_s": {}}',
        '{"workloads": ["db"], "host_shifts_s": {"a": -1}}',
        '{"workloads": ["db"], "host_shifts_s": {"a": 1.5}}',
        '{"workloads": ["db"], "host_shifts_s": {"a": true}}',
        '{"workloads": ["db"], "host_shifts_s": [], "x": 1}',
        '"db"',
    ],
)
def test_a_bundles_headline_workloads_are_checked(text):
    with pytest.raises(PayloadError, match="headline workloads"):
        HEADLINE_OF.decode(text)


def test_a_scenario_names_only_workloads_of_the_phase():
    base = {
        "name": "p",
        "kind": "measure",
        "duration": "5s",
        "workloads": [{"name": "db", "rw": "randread", "bs": "4k"}],
    }
    assert Phase.model_validate(base | {"headline_workloads": ["db"]}).headline_of[0].label == "db"
    with pytest.raises(ValueError, match="headline_workloads names log, not a workload"):
        Phase.model_validate(base | {"headline_workloads": ["log"]})
