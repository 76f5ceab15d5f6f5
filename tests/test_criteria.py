"""Scenario arithmetic, derived parameters and Jetstress-style verdicts on
constructed phases."""

from __future__ import annotations

import math

import numpy as np
import pytest

from iorig.analyze.criteria import evaluate, figure, overall
from iorig.errors import UserError
from iorig.model import (
    AGGREGATE,
    ALL,
    Metric,
    PhaseKind,
    PhaseResult,
    PhaseStatus,
    Scope,
    ScopeResult,
    Series,
    Totals,
    histogram,
)
from iorig.model.secondhists import SecondHists
from iorig.scenario.expr import evaluate as expr
from iorig.scenario.loading import load, resolve, source_from_text
from iorig.scenario.schema import Criterion


def test_expressions_do_arithmetic_over_parameters_and_nothing_else():
    names = {"mailboxes": 3000, "iops": 0.067, "create": True, "dbs": 4}
    assert expr("mailboxes * iops", names) == pytest.approx(201.0)
    assert expr("create * min(1, dbs - 1)", names) == 1
    assert expr("round(1000 * dbs / 3)", names) == 1333
    assert expr("ceil(7 / 2) + floor(2.5) - 10 // 3 + 7 % 4", names) == 4 + 2 - 3 + 3
    for bad, message in (
        ("__import__('os')", "not allowed"),
        ("mailboxes ** 2", "not allowed"),
        ("[1, 2]", "not allowed"),
        ("nosuch + 1", "unknown parameter 'nosuch'"),
        ("mailboxes / (dbs - 4)", "divides by zero"),
        ("mailboxes +", "not an arithmetic expression"),
        ("x" * 300, "longer than"),
    ):
        with pytest.raises(ValueError, match=message):
            expr(bad, names)


def test_exchange_derives_its_target_from_mailboxes_and_profile():
    resolved = load("exchange")
    assert resolved.params["iops_per_mailbox"] == pytest.approx(0.067)
    assert resolved.params["target_iops"] == pytest.approx(3000 * 0.067)
    heavier = load("exchange", overrides={"messages_per_day": "200", "mailboxes": "1000"})
    assert heavier.params["target_iops"] == pytest.approx(1000 * 0.134)
    given = load("exchange", overrides={"iops_per_mailbox": "0.5", "mailboxes": "432"})
    assert given.params["target_iops"] == pytest.approx(216.0)  # seed 001's 216 IOPS
    (criterion,) = [c for c in given.scenario.criteria if c.metric == "iops"]
    assert criterion.min == pytest.approx(216.0) and criterion.workloads == ["db"]
    # one database: no duplication phase
    single = load("exchange", overrides={"databases": "1"})
    assert [p.enabled for p in single.scenario.phases if p.name == "duplicate"] == [False]


SCENARIO = """
name: c
title: C
parameters:
  limit: {type: str, default: 20ms}
targets:
  data: {size: 16MiB}
phases:
  - name: go
    kind: measure
    duration: 1s
    workloads: [{name: db, rw: randread, bs: 4k}]
criteria:
  - {name: fast, metric: lat_mean, max: "${limit}"}
"""


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        ('max: "${limit}"', "max: 20", "a latency limit needs a unit"),
        ('max: "${limit}"', "max: 20ms, min: 1ms", "give one of"),
        ("metric: lat_mean", "metric: lat_mean, workloads: [log]", "names workloads log"),
        ("metric: lat_mean", "metric: lat_mean, phase: nope", "names phase 'nope'"),
        ("metric: lat_mean", "metric: speed", r"criteria\[0\]\.metric: Input should be 'iops'"),
    ],
)
def test_bad_criteria_are_refused_with_file_and_line(old, new, message):
    with pytest.raises(UserError, match=message) as err:
        resolve(source_from_text(SCENARIO.replace(old, new), "c.yaml"))
    assert "c.yaml:" in str(err.value)


def test_a_derived_default_that_cannot_be_computed_names_its_line():
    text = SCENARIO.replace(
        "  limit: {type: str, default: 20ms}",
        "  limit: {type: str, default: 20ms}\n  n: {type: int, default: '${later * 2}'}",
    )
    with pytest.raises(UserError, match=r"c.yaml:6: n: unknown parameter 'later'"):
        resolve(source_from_text(text, "c.yaml"))


# ------------------------------------------------------------ verdicts


def _totals(ddir: str, iops: float, lat_ns: float, lat_max_ns: float) -> Totals:
    hist = histogram.empty()
    hist[int(np.searchsorted(histogram.BIN_VALUES_NS, lat_ns))] = 1000
    return Totals(
        ddir,
        int(iops * 10),
        int(iops * 10 * 32768),
        iops,
        iops * 32768,
        lat_ns,
        lat_ns / 2,
        lat_max_ns,
        0.0,
        0.0,
        lat_ns,
        hist,
    )


def _scope(
    workload: str,
    read: tuple[float, float],
    write: tuple[float, float],
    per_second_read_ns: list[float],
) -> ScopeResult:
    r = _totals("read", read[0], read[1], read[1] * 10)
    w = _totals("write", write[0], write[1], write[1] * 10)
    both = _totals(ALL, read[0] + write[0], (read[1] + write[1]) / 2, max(read[1], write[1]) * 10)
    n = len(per_second_read_ns)
    series = Series(
        "read",
        np.arange(1, n + 1),
        np.full(n, read[0]),
        np.full(n, read[0] * 32768),
        np.array(per_second_read_ns),
        SecondHists.empty(n),
    )
    return ScopeResult(
        Scope(workload, "local"),
        4,
        {"read": r, "write": w, ALL: both},
        {"read": series},
        1.0,
        1.0,
        2.0,
        0,
    )


def _phase(name: str, db_read: tuple[float, float]) -> PhaseResult:
    db = _scope("db", db_read, (400.0, 3e6), [1e6, 5e6, 2e6])
    log = _scope("log", (0.0, 0.0), (300.0, 2e6), [])
    log = ScopeResult(
        Scope("log", "local"), 1, {"write": log.totals["write"]}, {}, 1.0, 1.0, 2.0, 0
    )
    aggregate = ScopeResult(AGGREGATE, 5, db.totals, db.series, 1.0, 1.0, 2.0, 0)
    return PhaseResult(
        1,
        name,
        PhaseKind.MEASURE,
        PhaseStatus.OK,
        0.0,
        10.0,
        10.0,
        Metric.IOPS,
        (aggregate, db, log),
    )


def _criteria(target: float) -> list[Criterion]:
    return [
        Criterion(name="transactional IOPS", metric="iops", workloads=["db"], min=target),
        Criterion(name="db read avg", metric="lat_mean", workloads=["db"], ddir="read", max="20ms"),
        Criterion(
            name="db read max", metric="lat_mean_max", workloads=["db"], ddir="read", max="4ms"
        ),
        Criterion(
            name="log write avg", metric="lat_mean", workloads=["log"], ddir="write", max="10ms"
        ),
        Criterion(name="db p99", metric="p99", workloads=["db"], max="50ms"),
    ]


def test_verdicts_follow_jetstress_with_headroom():
    phase = _phase("performance", db_read=(600.0, 1e6))
    verdicts = evaluate(_criteria(216.0), [phase])
    by_name = {v.name: v for v in verdicts}
    iops = by_name["transactional IOPS"]
    assert iops.value == pytest.approx(1000.0)  # db reads + writes, not the log
    assert iops.passed and iops.margin == pytest.approx(1000 / 216 - 1)  # exceeded by 363 %
    assert by_name["db read avg"].value == pytest.approx(1e6) and by_name["db read avg"].passed
    # the worst one-second mean (5 ms) is over the 4 ms limit though the mean is 1 ms
    assert by_name["db read max"].value == pytest.approx(5e6)
    assert not by_name["db read max"].passed
    assert by_name["log write avg"].value == pytest.approx(2e6)
    assert by_name["db p99"].value == pytest.approx(
        histogram.percentiles(histogram.merge([phase.scopes[1].totals[ALL].hist]), (99.0,))[99.0]
    )
    assert overall(verdicts).text == "FAIL"


def test_a_series_passes_where_every_criterion_holds():
    low = _phase("performance:threads=1", db_read=(100.0, 1e6))  # 500 IOPS < 900
    high = _phase("performance:threads=2", db_read=(600.0, 1e6))
    criteria = [c for c in _criteria(900.0) if c.name != "db read max"]
    verdicts = evaluate(criteria, [low, high])
    assert overall(verdicts).text == "PASS at performance:threads=2 (1 of 2)"
    short = next(v for v in verdicts if v.phase == "performance:threads=1" and v.metric == "iops")
    assert short.margin == pytest.approx(500 / 900 - 1)


def test_a_missing_figure_fails_rather_than_passes():
    phase = _phase("performance", db_read=(600.0, 1e6))
    criterion = Criterion(name="trim", metric="lat_mean", ddir="read", workloads=["log"], max="1ms")
    assert math.isnan(figure(criterion, [phase]))
    (verdict,) = evaluate([criterion], [phase])
    assert not verdict.passed


def _two_hosts(*per_host_db: tuple[float, float]) -> PhaseResult:
    """A phase on two hosts running db (reads, writes) IOPS each."""
    scopes = []
    for host, (reads, writes) in zip(("h1:8765", "h2:8765"), per_host_db, strict=True):
        db = _scope("db", (reads, 1e6), (writes, 3e6), [1e6, 2e6])
        scopes += [
            ScopeResult(Scope("db", host), 4, db.totals, db.series, 1.0, 1.0, 2.0, 0),
            ScopeResult(Scope(host=host), 4, db.totals, db.series, 1.0, 1.0, 2.0, 0),
        ]
    aggregate = ScopeResult(AGGREGATE, 8, scopes[0].totals, scopes[0].series, 1.0, 1.0, 2.0, 0)
    return PhaseResult(
        1,
        "performance",
        PhaseKind.MEASURE,
        PhaseStatus.OK,
        0.0,
        10.0,
        10.0,
        Metric.IOPS,
        (aggregate, *scopes),
    )


def test_a_per_host_requirement_is_met_by_each_host_not_by_their_sum():
    # issue 26: two hosts of ~500 IOPS each against a 670 IOPS target per host
    # passed as 1,000 ≥ 670; Jetstress judges each server
    phase = _two_hosts((300.0, 200.0), (300.0, 200.0))
    per_host = Criterion(
        name="transactional IOPS", metric="iops", workloads=["db"], min=670, per="host"
    )
    verdicts = evaluate([per_host], [phase])
    assert [(v.host, v.value, v.passed) for v in verdicts] == [
        ("h1:8765", pytest.approx(500.0), False),
        ("h2:8765", pytest.approx(500.0), False),
    ]
    assert overall(verdicts).text == "FAIL on h1:8765, h2:8765"
    # the same requirement over the run is the sum, and says so by having no host
    (whole,) = evaluate([per_host.model_copy(update={"per": "run"})], [phase])
    assert (whole.host, whole.value, whole.passed) == (None, pytest.approx(1000.0), True)
    # one host short fails the run naming it, however far the other exceeds
    uneven = _two_hosts((300.0, 200.0), (3000.0, 2000.0))
    assert overall(evaluate([per_host], [uneven])).text == "FAIL on h1:8765"
    assert overall(evaluate([per_host.model_copy(update={"min": 450.0})], [uneven])).text == "PASS"


def test_a_per_host_requirement_on_one_host_is_the_run_s():
    (verdict,) = evaluate(
        [Criterion(name="iops", metric="iops", workloads=["db"], min=100, per="host")],
        [_phase("performance", db_read=(600.0, 1e6))],
    )
    assert verdict.host is None and verdict.value == pytest.approx(1000.0)


def test_exchange_judges_every_requirement_per_host():
    resolved = load("exchange")
    assert {c.per for c in resolved.scenario.criteria} == {"host"}
