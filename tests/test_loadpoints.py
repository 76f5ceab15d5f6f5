"""Load points: SPEC's overall response time on seed 004's published table,
SPEC's load-point rules, achieved-versus-requested validity and the table CSV."""

from __future__ import annotations

import numpy as np
import pytest
from tests import builders

from iorig.analyze.analysis import analyse
from iorig.analyze.loadpoints import (
    LoadPoint,
    default_fractions,
    ort_of,
    overall_response_time_ms,
    parse_table_csv,
    point_validity,
    spec_rules,
)
from iorig.errors import UserError
from iorig.model import AGGREGATE, Disclosure, GeneratorCpu, Scope
from iorig.report.tables.searches import loadpoint_tables

# Seed 004: AI_IMAGE on Nutanix Files (AI_Jobs, latency ms, ops/s, MB/s); published ORT 1.94 ms
SEED = [
    (30, 0.7, 13051, 2935),
    (60, 0.7, 26103, 5869),
    (90, 0.7, 39155, 8801),
    (120, 0.7, 52206, 11737),
    (150, 0.8, 65258, 14669),
    (180, 0.8, 78310, 17600),
    (210, 1.2, 91345, 20537),
    (240, 2.1, 104413, 23470),
    (270, 4.7, 117453, 26406),
    (300, 10.6, 130495, 29339),
]
SEED_PAIRS = [(ops, lat) for _, lat, ops, _ in SEED]

# By hand: trapezoids |Δops| × mean latency
#   13052×0.7 + 13052×0.7 + 13051×0.7 + 13052×0.75 + 13052×0.8
#   + 13035×1.0 + 13068×1.65 + 13040×3.4 + 13042×7.65 = 226 343.6 ms·ops/s
# over the span 130 495 − 13 051 = 117 444 ops/s
SEED_AREA = 226_343.6
SEED_SPAN = 117_444
SEED_ORT = SEED_AREA / SEED_SPAN  # 1.92725…


# --- ORT ----------------------------------------------------------------------


def test_ort_of_the_seed_table():
    ort = overall_response_time_ms(SEED_PAIRS)
    assert ort == pytest.approx(SEED_ORT, rel=1e-12)
    assert ort == pytest.approx(1.92725, abs=1e-5)
    # the published table is rounded to 0.1 ms: 1.93 against the published 1.94
    assert round(ort, 2) == 1.93
    assert abs(round(ort, 2) - 1.94) <= 0.01 + 1e-9


def test_ort_has_no_origin_point():
    # an assumed origin (0 ops/s, 0 ms) would add 13 051 × 0.35 and widen the span
    with_origin = overall_response_time_ms([(0.0, 0.0), *SEED_PAIRS])
    assert with_origin == pytest.approx((SEED_AREA + 13051 * 0.35) / 130495)  # 1.7695
    assert overall_response_time_ms(SEED_PAIRS) == pytest.approx(SEED_ORT)
    # a flat curve's ORT is its latency wherever on the throughput axis it sits
    assert overall_response_time_ms([(1000, 2.0), (5000, 2.0)]) == pytest.approx(2.0)
    assert overall_response_time_ms([(100_000, 2.0), (104_000, 2.0)]) == pytest.approx(2.0)


def test_ort_small_cases_by_hand():
    # 100 × (1 + 3)/2 / 100
    assert overall_response_time_ms([(100, 1.0), (200, 3.0)]) == pytest.approx(2.0)
    # a last point that fell back still adds |Δx|: (100×1 + 50×3) / (200 − 100)
    assert overall_response_time_ms([(100, 1.0), (200, 1.0), (150, 5.0)]) == pytest.approx(2.5)
    # unequal widths weight the trapezoids: (100×1 + 300×2) / 400
    assert overall_response_time_ms([(100, 1.0), (200, 1.0), (500, 3.0)]) == pytest.approx(1.75)


def test_ort_needs_two_points_and_a_span():
    with pytest.raises(UserError, match="at least 2"):
        overall_response_time_ms([(100.0, 1.0)])
    with pytest.raises(UserError, match="same ops/s"):
        overall_response_time_ms([(100.0, 1.0), (100.0, 2.0)])
    with pytest.raises(UserError, match="load point 2"):
        overall_response_time_ms([(100.0, 1.0), (200.0, float("nan"))])


def test_ort_of_measured_points_converts_ns_to_ms():
    points = [
        LoadPoint(
            job, requested_ops_per_s=job * 435.0, achieved_ops_per_s=ops, lat_mean_ns=lat * 1e6
        )
        for job, lat, ops, _ in SEED
    ]
    assert points[0].lat_mean_ms == pytest.approx(0.7)
    assert ort_of(points) == pytest.approx(SEED_ORT)


# --- validity -----------------------------------------------------------------


def test_point_that_fell_behind_is_invalid():
    v = point_validity(12_000, 10_944)
    assert not v.valid
    assert v.achieved_fraction == pytest.approx(0.912)
    assert v.message == (
        "achieved 91.2 % of the requested 12 000 IOPS: the storage fell behind; fio's latency "
        "hides the queueing (coordinated omission)"
    )


def test_point_validity_threshold():
    assert point_validity(12_000, 11_400).valid  # exactly 95 %
    short = point_validity(12_000, 11_399)  # 94.99 %: shown truncated, never as 95.0
    assert not short.valid
    assert "94.9 %" in short.message
    assert point_validity(12_000, 11_399, tolerance=0.10).valid
    ok = point_validity(500, 498, unit="ops/s")
    assert ok.message == "achieved 99.6 % of the requested 500 ops/s"
    with pytest.raises(ValueError):
        point_validity(0, 10)


# --- SPEC load-point rules ----------------------------------------------------


def test_seed_loads_follow_the_spec_rules():
    assert spec_rules([job for job, *_ in SEED]) == []


def test_too_few_points():
    problems = spec_rules([30, 60, 90, 120, 150, 180, 210, 240, 270])
    assert problems == ["only 9 load points: SPEC requires at least 10"]


def test_points_out_of_order():
    loads = [30, 60, 100, 95, 150, 180, 210, 240, 270, 300]  # each within 30 % of nominal
    problems = spec_rules(loads)
    assert len(problems) == 1
    assert "point 4 (load 95) does not follow point 3 (load 100)" in problems[0]
    assert "lowest to highest" in problems[0]


def test_first_point_must_sit_one_spacing_from_zero():
    problems = spec_rules([10, 60, 90, 120, 150, 180, 210, 240, 270, 300])
    assert problems == [
        "point 1 (load 10) is 67 % off its nominal 30 (spacing 30 = max load 300 / 10 points); "
        "each must be within 30 %"
    ]
    zero = spec_rules([0, 30, 60, 90, 120, 150, 180, 210, 240, 270])
    assert "loads must be positive" in zero


def test_spacing_tolerance_is_thirty_percent_of_the_nominal():
    base = [30, 60, 90, 120, 150, 210, 220, 240, 270, 300]
    # nominal of point 5 is 150: 195 is exactly 30 % off, 196 is 30.7 %
    assert spec_rules([*base[:4], 195, *base[5:]]) == []
    problems = spec_rules([*base[:4], 196, *base[5:]])
    assert len(problems) == 1 and problems[0].startswith("point 5 (load 196) is 31 % off")


def test_fractions():
    assert default_fractions() == (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0)


# --- the table CSV ------------------------------------------------------------

SEED_CSV = "\n".join(
    [
        "# seed 004: AI_IMAGE, Nutanix Files; published ORT 1.94 ms",
        "AI_Jobs,latency ms,ops/s,MB/s",
        "",
        *(f"{job},{lat},{ops},{mb}" for job, lat, ops, mb in SEED),
        "",
    ]
)


def test_parse_the_seed_table():
    rows = parse_table_csv(SEED_CSV, "seed004.csv")
    assert len(rows) == 10
    first = rows[0]
    assert (first.line, first.load, first.lat_mean_ms, first.ops_per_s) == (4, 30, 0.7, 13051)
    assert [r.load for r in rows] == [job for job, *_ in SEED]
    assert ort_of(rows) == pytest.approx(SEED_ORT)


@pytest.mark.parametrize(
    "header",
    [
        "load,latency_ms,ops_per_s",
        "Load, Latency (ms), Ops per s",
        "LOAD,Latency MS,OPS/S",
        "load,latency (ms),ops/sec",
    ],
)
def test_header_spellings(header):
    rows = parse_table_csv(f"{header}\n10,1.5,100\n20,2.5,200\n", "t.csv")
    assert [(r.load, r.lat_mean_ms, r.ops_per_s) for r in rows] == [
        (10, 1.5, 100),
        (20, 2.5, 200),
    ]


def test_tab_separated_and_without_load():
    rows = parse_table_csv("ops/s\tlatency ms\n100\t1.0\n200\t3.0\n", "t.tsv")
    assert rows[1].load is None
    assert ort_of(rows) == pytest.approx(2.0)


def test_bad_number_names_file_line_and_column():
    text = "load,latency_ms,ops_per_s\n10,1.0,100\n# note\n20,abc,200\n"
    with pytest.raises(UserError) as err:
        parse_table_csv(text, "table.csv")
    assert err.value.message == "table.csv line 4: latency_ms 'abc' is not a number"
    assert err.value.hint is not None and "plain number" in err.value.hint


def test_negative_value_is_rejected():
    with pytest.raises(UserError, match=r"t\.csv line 3: ops_per_s '-5'"):
        parse_table_csv("load,latency_ms,ops_per_s\n10,1,100\n20,2,-5\n", "t.csv")


def test_missing_column_lists_found_and_expected():
    with pytest.raises(UserError) as err:
        parse_table_csv("AI_Jobs,lat,ops/s\n30,0.7,13051\n", "table.csv")
    message = err.value.message
    assert message.startswith("table.csv line 1: no latency_ms column")
    assert "'AI_Jobs', 'lat', 'ops/s'" in message
    assert "expected load, latency_ms, ops_per_s" in message
    assert "latency (ms)" in (err.value.hint or "")


def test_short_row_and_empty_tables():
    with pytest.raises(UserError, match="line 3: 2 fields where the header has 3"):
        parse_table_csv("load,latency_ms,ops_per_s\n10,1,100\n20,2\n", "t.csv")
    with pytest.raises(UserError, match="no data rows"):
        parse_table_csv("# only a header\nload,latency_ms,ops_per_s\n\n", "t.csv")
    with pytest.raises(UserError, match="no header"):
        parse_table_csv("\n# nothing\n", "t.csv")


def test_two_columns_for_one_field():
    with pytest.raises(UserError, match="'latency ms' and 'lat_ms' both give latency_ms"):
        parse_table_csv("ops/s,latency ms,lat_ms\n1,2,3\n", "t.csv")


# --- who fell behind: the storage or the load generator -----------------------


def _ai_run(cpu_pct_per_job: float, usable_cpus: float, measured: GeneratorCpu | None = None):
    """Two AI_Jobs load points of a stored run: 1 keeps its 100 ops/s, 2 gets
    150 of its 200; each phase ran 4 fio jobs at ``cpu_pct_per_job``, and
    iorig measured fio's CPU as ``measured``."""
    resolved = {
        "phases": [
            {"name": f"load-{n}", "workloads": [{"name": "read", "jobs": n, "rate_iops": 100}]}
            for n in (1, 2)
        ]
    }
    phases = []
    for n, achieved in ((1, 100.0), (2, 150.0)):
        per_second = np.full(10, achieved)
        agg = builders.scope(per_second, cpu=cpu_pct_per_job)
        agg = type(agg)(**{**agg.__dict__, "jobs": 4})
        work = builders.scope(per_second, where=Scope("read", "local"), cpu=cpu_pct_per_job)
        assert agg.scope == AGGREGATE
        phases.append(
            builders.phase(
                f"load-{n}",
                per_second,
                scopes=(agg, work),
                point={"ai_jobs": n},
                generator_cpu=measured,
            )
        )
    return builders.stored(
        "r1",
        None,
        phases,
        resolved=resolved,
        search={"kind": "loadpoints", "parameter": "ai_jobs", "name": "AI_Jobs"},
        disclosure=Disclosure({"cpu": {"usable_cpus": usable_cpus}}),
    )


def test_a_point_behind_with_fio_out_of_cpu_blames_the_generator():
    result = analyse(_ai_run(cpu_pct_per_job=24.0, usable_cpus=1.0)).search
    one, two = result.points
    assert one.valid and not one.generator_bound  # kept pace: nothing to blame
    assert not two.valid and two.generator_bound
    assert "the load generator was the limit" in "; ".join(two.problems)
    notes = " ".join(loadpoint_tables(result)[0].notes)
    assert "at 2 AI_Jobs the load generator fell behind" in notes
    assert "a load the storage cannot carry" not in notes


def test_a_point_behind_with_fio_out_of_measured_cpu_blames_the_generator():
    # io_uring pinned to one CPU: fio's per-job figures say 4 × 10 % (its
    # workers left out), iorig measured the CPU full: the generator, not the storage
    run = _ai_run(cpu_pct_per_job=10.0, usable_cpus=1.0, measured=GeneratorCpu(2.97, 3.0))
    result = analyse(run).search
    two = result.points[1]
    assert not two.valid and two.generator_bound
    notes = " ".join(loadpoint_tables(result)[0].notes)
    assert "at 2 AI_Jobs the load generator fell behind (fio kept 0.99 of the 1 CPU" in notes
    assert "a load the storage cannot carry" not in notes
    # the same figures unmeasured blamed the storage
    notes = " ".join(loadpoint_tables(analyse(_ai_run(10.0, 1.0)).search)[0].notes)
    assert "a load the storage cannot carry" in notes


def test_a_point_behind_while_other_processes_took_fios_cpus_blames_neither():
    # fio kept 0.3 of the 2 CPUs busy, other processes 1.2: saturated, fio
    # not at its own limit, its I/Os waiting for a CPU
    run = _ai_run(cpu_pct_per_job=5.0, usable_cpus=2.0, measured=GeneratorCpu(0.6, 1.0, 1.2))
    result = analyse(run).search
    one, two = result.points
    assert one.valid and not one.contended  # kept pace: nothing to explain
    assert not two.valid and two.contended and not two.generator_bound
    assert "fio's I/Os waited for a CPU as well as for the storage" in "; ".join(two.problems)
    assert "other processes 1.20" in "; ".join(two.problems)
    notes = " ".join(loadpoint_tables(result)[0].notes)
    assert "at 2 AI_Jobs other processes kept the CPUs fio may use busy" in notes
    assert "a load the storage cannot carry" not in notes
    # the same point with the CPUs to spare is the storage's
    spare = _ai_run(cpu_pct_per_job=5.0, usable_cpus=2.0, measured=GeneratorCpu(0.6, 1.0, 0.1))
    two = analyse(spare).search.points[1]
    assert not two.valid and not two.contended
    assert "a load the storage cannot carry" in " ".join(
        loadpoint_tables(analyse(spare).search)[0].notes
    )


def test_a_point_behind_with_cpu_to_spare_blames_the_storage():
    result = analyse(_ai_run(cpu_pct_per_job=5.0, usable_cpus=2.0)).search
    two = result.points[1]
    assert not two.valid and not two.generator_bound
    notes = " ".join(loadpoint_tables(result)[0].notes)
    assert "2 AI_Jobs fell behind (a load the storage cannot carry" in notes
    assert "generator" not in notes
