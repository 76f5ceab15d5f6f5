"""Sweeps, knees and load-point curves without fio: grid expansion of a
scenario, and the analyses of constructed runs (knee, curve, sweep A/B)."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import numpy as np
import pytest
from tests import builders

from iorig.analyze.analysis import analyse, compare
from iorig.analyze.search import CurveResult, KneeResult, SweepResult
from iorig.cli.refs import resolve_run_id
from iorig.errors import UserError
from iorig.model import Metric, PhaseResult, StoredRun, histogram
from iorig.report.tables.searches import comparison_search_tables, search_tables
from iorig.scenario.loading import source_from_text
from iorig.scenario.sweep import parse_grid, resolve_with_sweep
from iorig.store import Store
from iorig.units import parse_latency_limit

DATA = Path(__file__).resolve().parent / "data"

SCENARIO = """
name: grid
title: Grid
parameters:
  size: {type: size, default: 16MiB}
  bs: {type: size, default: 4k}
  rw: {type: choice, choices: [read, write, randread], default: read}
  gap: {type: duration, default: 1s}
targets:
  data: {size: "${size}"}
sweep:
  bs: [4k, 64k]
phases:
  - name: fill
    kind: prefill
    workloads: [{rw: write, bs: 1MiB}]
  - name: go
    kind: measure
    duration: 2s
    workloads: [{rw: "${rw}", bs: "${bs}"}]
  - name: rest
    kind: idle
    duration: ${gap}
"""


def test_scenario_sweep_expands_the_measured_stretch_per_point():
    resolved = resolve_with_sweep(source_from_text(SCENARIO, "grid.yaml"))
    names = [p.name for p in resolved.scenario.phases]
    # the pause after the last measured phase runs once, at the end
    assert names == ["fill", "go:bs=4KiB", "go:bs=64KiB", "rest"]
    bs = [w.bs for p in resolved.scenario.phases if p.kind == "measure" for w in p.workloads]
    assert bs == [4096, 65536]
    assert resolved.phase_points["go:bs=64KiB"] == {"bs": "64KiB"}
    assert resolved.param_text("bs") == "4KiB, 64KiB"
    assert resolved.param_origins["bs"] == "sweep"


def test_command_line_grid_replaces_the_scenarios_and_varies_first_slowest():
    grid = parse_grid(["rw=read,write", "bs=4k,8k"])
    resolved = resolve_with_sweep(source_from_text(SCENARIO, "grid.yaml"), grid=grid)
    measured = [p.name for p in resolved.scenario.phases if p.kind == "measure"]
    assert measured == [
        "go:rw=read,bs=4KiB",
        "go:rw=read,bs=8KiB",
        "go:rw=write,bs=4KiB",
        "go:rw=write,bs=8KiB",
    ]


@pytest.mark.parametrize(
    ("items", "overrides", "message"),
    [
        (["bs"], {}, "expected name=value1,value2"),
        (["bs=4k,"], {}, "expected name=value1,value2"),
        (["nosuch=1,2"], {}, "has no such parameter"),
        (["bs=4k,4KiB"], {}, "listed twice"),
        (["bs=4k"], {"bs": "8k"}, "both swept and set"),
        (["rw=read,trim"], {}, "sweep rw=trim"),
        (["size=16MiB,32MiB"], {}, "changes the size of a target"),
    ],
)
def test_bad_grids_are_refused_with_the_fix(items, overrides, message):
    with pytest.raises(UserError, match=message):
        resolve_with_sweep(
            source_from_text(SCENARIO, "grid.yaml"), None, overrides, parse_grid(items)
        )


def test_sweep_over_an_unknown_parameter_in_yaml_names_the_line():
    bad = SCENARIO.replace("  bs: [4k, 64k]", "  qd: [1, 2]")
    with pytest.raises(UserError, match=r"grid.yaml:\d+: sweep: sweep over 'qd'"):
        resolve_with_sweep(source_from_text(bad, "grid.yaml"))


def test_latency_limits_parse_and_reject_nonsense():
    assert parse_latency_limit("p99<=1ms") == ("p99", 1e6)
    assert parse_latency_limit("mean <= 250us") == ("mean", 250e3)
    for bad in ("p99<=1", "p100<=1ms", "max<=1ms", "p99>=1ms"):
        with pytest.raises(ValueError):
            parse_latency_limit(bad)


# ------------------------------------------------------- constructed runs


def _phase(
    name: str,
    iops: float,
    lat_ns: float,
    point: dict,
    seq: int,
    repeat: int = 0,
    headline: Metric = Metric.IOPS,
) -> PhaseResult:
    hist = histogram.empty()
    hist[int(np.searchsorted(histogram.BIN_VALUES_NS, lat_ns))] = 10_000
    scope = builders.scope(np.full(10, iops), lat_ns=lat_ns, hist=hist)
    return builders.phase(
        name, np.full(10, iops), headline, scopes=(scope,), seq=seq, repeat=repeat, point=point
    )


def _run(run_id: str, phases: list[PhaseResult], search: dict, label: str | None = None):
    return builders.stored(run_id, label, phases, search=search, scenario="adhoc")


def knee_of(run: StoredRun) -> KneeResult:
    result = analyse(run).search
    assert isinstance(result, KneeResult)
    return result


def curve_of(run: StoredRun) -> CurveResult:
    result = analyse(run).search
    assert isinstance(result, CurveResult)
    return result


def sweep_of(run: StoredRun) -> SweepResult:
    result = analyse(run).search
    assert isinstance(result, SweepResult)
    return result


def _knee_run(curve: dict[int, list[float]], slo_ns: float | None = None) -> StoredRun:
    phases = []
    for seq, (c, levels) in enumerate(curve.items()):
        for repeat, iops in enumerate(levels):
            lat = c / iops * 1e9  # Little's law holds exactly
            phases.append(
                _phase(
                    f"iodepth={c}",
                    iops,
                    lat,
                    {"concurrency": c, "iodepth": c, "jobs": 1},
                    seq,
                    repeat,
                )
            )
    search = {
        "kind": "knee",
        "scale": "iodepth",
        "min_gain": 0.10,
        "slo_p99_ns": slo_ns,
        "max_concurrency": 64,
    }
    return _run("aa01", phases, search)


def test_knee_of_a_stored_run_finds_the_knee_the_band_and_little():
    # +90 %, +60 %, +30 %, +5 %, then a fall: the knee is 16.
    run = _knee_run(
        {
            1: [10e3],
            2: [19e3],
            4: [30.4e3],
            8: [39.5e3],
            16: [41.5e3, 40e3, 42e3],
            32: [41e3, 41.5e3, 40.5e3],
            64: [36e3],
        }
    )
    k = knee_of(run)
    assert k is not None and k.knee.point is not None
    assert k.knee.point.concurrency == 8  # 8 -> 16 gains +5 %: doubling past 8 does not pay
    assert [p.concurrency for p in k.points] == [1, 2, 4, 8, 16, 32, 64]
    assert k.plateau is not None and set(k.plateau.members) == {16, 32}
    assert all(not c.short for c in k.little)
    tables = search_tables(k)
    assert [t.title for t in tables][1] == "Knee"
    assert any("knee" in row[-1] for row in tables[0].rows)


def test_a_knee_beyond_the_last_point_is_said_so_in_every_place():
    """Issue 50: a curve still climbing at its maximum printed "knee:
    concurrency 16" and starred 16 on its chart while its explanation said
    the knee lies beyond 16. One decision (Knee.beyond) now words the
    table's mark, the verdict's row, the chart's marker, compare's cell and
    the JSON; and the peak plateau of two readings never goes below zero."""
    run = _knee_run({1: [10e3], 2: [19e3], 4: [34e3], 8: [60e3], 16: [90e3, 150e3]})
    k = knee_of(run)
    assert k.knee.point is not None and k.knee.point.concurrency == 16
    assert k.knee.beyond and k.knee.where == "beyond 16" and "lies beyond" in k.knee.reason
    curve, verdict = search_tables(k)[:2]
    marks = {row[0]: row[-1] for row in curve.rows}
    assert "highest measured: the knee lies beyond" in marks["16"] and "knee" not in marks["8"]
    rows = dict(verdict.rows)
    assert rows["knee"].startswith("beyond concurrency 16 (at 16:"), rows["knee"]
    from iorig.report.writers.html import ReportRun, search_charts
    from iorig.report.writers.jsoncsv import search_dict

    traces = [t for c in search_charts([ReportRun(analyse(run), "a")]) for t in c["data"]]
    marked = [t for t in traces if str(t.get("name", "")).endswith("knee beyond 16")]
    assert len(marked) == 1 and marked[0]["marker"]["symbol"] != "star"
    assert not any(t.get("marker", {}).get("symbol") == "star" for t in traces)
    doc = search_dict(k)
    assert doc["knee_beyond"] is True and doc["knee"]["concurrency"] == 16
    cmp = comparison_search_tables(compare([analyse(run), analyse(run)]))
    cells = [row for t in cmp for row in t.rows if row[0] == "knee concurrency"]
    assert cells == [("knee concurrency", "beyond 16", "beyond 16")]
    # 16's two readings, 90 K and 150 K: their 95 % interval, 120 K ± 381 K,
    # read "-261K IOPS" before; a throughput is at least 0, and the sentence
    # says the interval is too wide to place the peak
    assert k.plateau is not None and k.plateau.best.concurrency == 16
    assert k.plateau.best.ci_low == 0.0
    said = k.plateau.describe()
    assert not re.search(r"(^|\s)-\d", said) and "too wide to place the peak" in said, said


def test_knee_with_an_slo_reports_the_best_point_within_it():
    run = _knee_run({1: [10e3], 2: [19e3], 4: [30e3], 8: [50e3]}, slo_ns=200e3)
    k = knee_of(run)
    # latency = c / iops: 100 µs, 105 µs, 133 µs, 160 µs; all within 200 µs
    assert k.knee.slo_best is not None and k.knee.slo_best.concurrency == 8
    strict = knee_of(_knee_run({1: [10e3], 2: [19e3], 4: [30e3], 8: [50e3]}, slo_ns=120e3))
    assert strict.knee.slo_best.concurrency == 2


def _curve_run(points: list[tuple[float, float, float]], run_id: str = "cc01") -> StoredRun:
    """points: (fraction, achieved iops, mean latency ns); the maximum is 10k IOPS."""
    phases = [_phase("max", 10e3, 800e3, {"max": True}, 1)]
    for seq, (fraction, achieved, lat) in enumerate(points, start=2):
        phases.append(
            _phase(
                f"load={fraction * 100:g}%",
                achieved,
                lat,
                {"fraction": fraction, "requested_iops": fraction * 10e3, "max_iops": 10e3},
                seq,
            )
        )
    return _run(run_id, phases, {"kind": "curve", "tolerance": 0.05, "cap": None})


def test_curve_of_a_stored_run_computes_ort_and_validity():
    run = _curve_run([(0.5, 5e3, 200e3), (0.8, 7.9e3, 400e3), (1.0, 9.0e3, 2e6)])
    c = curve_of(run)
    assert c is not None and c.max_iops == 10e3
    assert [p.validity.valid for p in c.points] == [True, True, False]  # 90 % < 95 %
    assert not c.valid
    # ORT by hand: (2900 * 0.3 + 1100 * 1.2) / 4000 ms
    assert c.ort_ms == pytest.approx((2900 * 0.3 + 1100 * 1.2) / 4000)
    (table,) = search_tables(c)
    assert "INVALID: fell behind" in table.rows[-1][-1]
    assert any("coordinated omission" in n for n in table.notes)


def _sweep_run(
    run_id: str,
    label: str,
    scale: float,
    other: tuple[str, tuple[str, str]] = ("rw", ("read", "write")),
) -> StoredRun:
    phases = []
    seq = 0
    axis, values = other
    for rw in values:
        for bs, base in (("4KiB", 20e3), ("64KiB", 5e3), ("1MiB", 700.0)):
            for repeat in range(3):
                iops = base * scale * (1 + 0.002 * repeat) * (1.0 if rw == "read" else 0.8)
                phases.append(
                    _phase(
                        f"measure:bs={bs},{axis}={rw}",
                        iops,
                        1e9 / iops,
                        {"bs": bs, axis: rw},
                        seq,
                        repeat,
                    )
                )
            seq += 1
    return _run(
        run_id,
        phases,
        {"kind": "sweep", "grid": {"bs": ["4KiB", "64KiB", "1MiB"], axis: list(values)}},
        label,
    )


def test_sweep_comparison_summarises_ratio_ranges_per_group():
    a, b = _sweep_run("ab01", "iSCSI", 1.0), _sweep_run("ab02", "NVMe/RoCE", 1.3)
    sweep = sweep_of(a)
    assert sweep is not None and sweep.x_axis == "bs"
    assert list(sweep.groups()) == ["rw=read", "rw=write"]
    cmp = compare([analyse(a), analyse(b)])
    (sc,) = cmp.sweeps
    sentences = sc.sentences()
    assert sentences[0].startswith("NVMe/RoCE delivered 30 % more read throughput, at 77 % of")
    assert "significant at all 3 points" in sentences[0]
    assert "write throughput" in sentences[1]
    tables = comparison_search_tables(cmp)
    assert tables[0].title == "NVMe/RoCE against iSCSI across the sweep"
    assert len(tables[0].rows) == 6 and tables[0].rows[0][4] == "130%"
    assert tables[0].headers[:2] == ("rw", "bs") and tables[0].rows[0][0] == "read"
    # issue 49: each point's figures say what they are, whatever the block size
    by_bs = {row[1]: row for row in tables[0].rows if row[0] == "read"}
    for row in by_bs.values():
        assert all(cell.endswith(("IOPS", "MB/s")) for cell in row[2:4]), row


def test_a_sweep_comparison_grouped_by_a_number_names_the_parameter():
    # issue 26 item 10: "46 % more 1 throughput", under a column headed "group"
    depth = ("iodepth", ("1", "8"))
    a, b = _sweep_run("ab01", "A", 1.0, depth), _sweep_run("ab02", "B", 1.46, depth)
    cmp = compare([analyse(a), analyse(b)])
    (sc,) = cmp.sweeps
    first, second = sc.sentences()
    assert first.startswith("With iodepth=1, B delivered 46 % more throughput, at 68 % of")
    assert second.startswith("With iodepth=8, B delivered 46 % more throughput")
    (table,) = comparison_search_tables(cmp)
    assert table.headers[:2] == ("iodepth", "bs") and table.rows[0][0] == "1"


def test_a_recorded_io_uring_knee_says_what_fio_kept_in_flight(tmp_path):
    # issue 26 item 6: a real knee search (schema-v2 fixture: io_uring, fio
    # 3.33) refined 2 -> 4 at iodepth=3, which fio ran with 4 in flight
    # (3.96 by Little's law); the table showed it without a word
    shutil.copy(DATA / "schema-v2" / "results.sqlite", tmp_path / "v2.sqlite")
    with Store(tmp_path / "v2.sqlite") as store:
        run = store.load_run(resolve_run_id(store, "d6327933792d"))
    k = knee_of(run)
    curve, verdict = search_tables(k)
    row = next(r for r in curve.rows if r[0] == "3")
    assert row[6] == "4.0"  # in flight
    assert "fio kept 4 in flight" in row[-1]
    rows = dict(verdict.rows)
    assert "3 kept 4" in rows["depths"] and "power of two" in rows["depths"]
    assert "3: 4.0 I/Os in flight on average of 3 requested" in rows["Little's law"]
    assert [c.deeper for c in k.little] == [False, False, True, False]


def test_two_readings_apart_beyond_their_noise_leave_the_knee_uncertain():
    # 30 s runs with 1 % noise per second: 20 K and 30 K at 4 are far apart,
    # and with two readings which one is off cannot be told
    rng = np.random.default_rng(4)
    levels = {1: [10e3], 2: [20e3], 4: [20e3, 30e3], 8: [30.2e3]}
    phases = []
    for seq, (c, runs) in enumerate(levels.items()):
        for repeat, level in enumerate(runs):
            seconds = level * (1 + 0.01 * rng.standard_normal(30))
            point = {"concurrency": c, "iodepth": c, "jobs": 1}
            phases.append(
                builders.phase(f"iodepth={c}", seconds, seq=seq, repeat=repeat, point=point)
            )
    k = knee_of(_run("ee01", phases, {"kind": "knee", "scale": "iodepth", "min_gain": 0.10}))
    (four,) = k.remeasured
    assert four.concurrency == 4 and four.settled.state == "disagree"
    assert k.uncertain == (4, 8)  # 4 if 30 K holds, 8 if 20 K does
    rows = dict(search_tables(k)[1].rows)
    assert rows["knee"].startswith("uncertain between concurrency 4 and 8")
    assert rows["re-measured"].startswith("at 4: its 2 runs (19.99K IOPS, 30.03K IOPS) disagree")
    search = {"kind": "knee", "scale": "iodepth"}
    runs = [analyse(_run(run_id, phases, search)) for run_id in ("ee01", "ee02")]
    (knees,) = comparison_search_tables(compare(runs))
    assert knees.rows[0][1:] == ("uncertain: 4–8", "uncertain: 4–8")
