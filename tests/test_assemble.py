"""Merging fio jobs into workload and aggregate results: exact sums, merged
histograms, per-second alignment, weighted means, pooled deviations."""

from __future__ import annotations

import numpy as np
import pytest
from tests.fixtures import section

from iorig.fio.assemble import JobLogs, build_scopes, merge_series
from iorig.fio.parse import LogSample
from iorig.model import AGGREGATE, ALL, Scope, Totals, histogram
from iorig.model.combine import combine_series, combine_totals


def test_two_jobs_merge_exactly():
    data = section("randread-2jobs", "rr")
    aggregate, workload = build_scopes([data])
    assert (aggregate.scope, workload.scope) == (AGGREGATE, Scope("rr", "local"))
    total = aggregate.totals["read"]
    assert total.ios == sum(j.dirs["read"].ios for j in data.jobs)
    assert total.iops == pytest.approx(sum(j.dirs["read"].iops for j in data.jobs))
    assert np.array_equal(total.hist, histogram.merge(j.dirs["read"].hist for j in data.jobs))
    weighted = sum(j.dirs["read"].clat_mean_ns * j.dirs["read"].ios for j in data.jobs) / total.ios
    assert total.lat_mean_ns == pytest.approx(weighted)
    assert aggregate.totals[ALL].ios == total.ios
    assert aggregate.jobs == 2


def test_per_second_series_sum_the_jobs_over_their_common_seconds():
    data = section("randread-2jobs", "rr")
    series = build_scopes([data])[0].series["read"]
    # job 1 logged seconds 1-2, job 2 seconds 1-3: only whole seconds common to both
    assert list(series.t_s) == [1, 2]
    by_job = [{round(s.t_ms / 1000): s.value for s in log.iops} for log in data.logs]
    assert list(series.iops) == [by_job[0][t] + by_job[1][t] for t in (1, 2)]
    bw = [{round(s.t_ms / 1000): s.value for s in log.bw} for log in data.logs]
    assert list(series.bytes_per_s) == [(bw[0][t] + bw[1][t]) * 1024 for t in (1, 2)]
    assert len(series.hist) == 2
    assert int(series.hist.row(0).sum()) > 0


def test_mixed_workload_has_read_write_and_all():
    scope = build_scopes([section("randrw-mixed", "mix")])[0]
    assert set(scope.totals) == {"read", "write", ALL}
    assert scope.totals[ALL].ios == scope.totals["read"].ios + scope.totals["write"].ios
    assert set(scope.series) == {"read", "write", ALL}
    all_series = scope.series[ALL]
    assert np.allclose(all_series.iops, scope.series["read"].iops + scope.series["write"].iops)


def _sample(t_ms: int, value: float) -> LogSample:
    return LogSample(t_ms, value, "read", 4096)


def test_duplicate_final_flush_keeps_the_first_sample_and_latency_is_iops_weighted():
    fast = JobLogs(
        iops=(_sample(1000, 100), _sample(2000, 100), _sample(2001, 5)),
        bw=(_sample(1000, 400), _sample(2000, 400)),
        clat=(_sample(1000, 1000), _sample(2000, 1000)),
    )
    slow = JobLogs(
        iops=(_sample(999, 300), _sample(2002, 300)),
        bw=(_sample(999, 1200), _sample(2002, 1200)),
        clat=(_sample(999, 3000), _sample(2002, 3000)),
    )
    series = merge_series([fast, slow])["read"]
    assert list(series.iops) == [400, 400]  # not 405: the flush of a partial window is dropped
    assert list(series.lat_mean_ns) == [2500, 2500]  # (100*1000 + 300*3000) / 400


def test_seconds_without_completions_have_no_latency():
    log = JobLogs(iops=(_sample(1000, 0), _sample(2000, 50)), clat=(_sample(2000, 800),))
    series = merge_series([log])["read"]
    assert np.isnan(series.lat_mean_ns[0]) and series.lat_mean_ns[1] == 800


def test_pooled_standard_deviation_matches_numpy():
    rng = np.random.default_rng(1)
    parts = [rng.normal(1000, 50, 400), rng.normal(1500, 80, 100)]
    totals = [
        Totals(
            "read",
            p.size,
            p.size * 4096,
            1.0,
            4096.0,
            p.mean(),
            p.min(),
            p.max(),
            p.std(),
            0.0,
            p.mean(),
            histogram.empty(),
        )
        for p in parts
    ]
    merged = combine_totals("read", totals)
    both = np.concatenate(parts)
    assert merged is not None
    assert merged.lat_mean_ns == pytest.approx(both.mean())
    assert merged.lat_stddev_ns == pytest.approx(both.std())
    assert (merged.lat_min_ns, merged.lat_max_ns) == (both.min(), both.max())


def test_combine_series_uses_the_shortest():
    a = merge_series([JobLogs(iops=(_sample(1000, 1), _sample(2000, 2), _sample(3000, 3)))])["read"]
    b = merge_series([JobLogs(iops=(_sample(1000, 10), _sample(2000, 20)))])["read"]
    both = combine_series("read", [a, b])
    assert list(both.t_s) == [1, 2] and list(both.iops) == [11, 22]
