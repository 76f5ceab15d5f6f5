"""Truth 8: the SPEC-like AI image load points on a filesystem whose device
reads at most 2.15 times what one quick AI_Job asks to read.

One AI_Job's reads (from the scenario: processes × ops/s × mean read size of
each reading component, about 100 MB/s) fit twice under the cap: loads 1
and 2 are valid; from load 3 on the reads need 40 % more than the device
gives, far past SPEC's 5 % tolerance: invalid. Every point's per-second
series holds what its jobs did in each second: the seconds add up to no
more than the jobs' totals and no less than those totals spread evenly over
each job's runtime (which a slow Poisson stream overruns by its last wait,
so the even spread undercounts it), and no
second is a fragment (each within 25 % of the point's rate; they read 29,
1268 and 27 at a steady 1,243 ops/s before). Past the cap, where jobs fall
behind their pace unevenly, every second reads what the cap allows.
"""

from __future__ import annotations

import json

import pytest
from tests.truth.device import Unavailable, mounted

from iorig.fio import parse
from iorig.model import ALL
from iorig.scenario.loading import load
from iorig.store import Store

pytestmark = [pytest.mark.fio, pytest.mark.truth]


def _reads_per_job() -> float:
    """Bytes/s one quick AI_Job asks to read, from the scenario's definition."""
    resolved = load("ai-image", profile="quick", overrides={"ai_jobs": "1"})
    total = 0.0
    for phase in resolved.scenario.measured:
        for w in phase.workloads:
            if w.enabled and w.op == "io" and w.rw in ("read", "randread") and w.rate_iops:
                sizes = (
                    [
                        (int(b), float(p))
                        for b, p in (item.split("/") for item in w.bssplit.split(":"))
                    ]
                    if w.bssplit
                    else [(w.bs, 100.0)]
                )
                mean = sum(b * p for b, p in sizes) / sum(p for _, p in sizes)
                total += w.jobs * w.rate_iops * mean
    return total


def test_load_points_past_the_bandwidth_cap_are_invalid(capped, truth_db, tmp_path):
    per_job = _reads_per_job()
    assert 80e6 < per_job < 120e6  # the scenario's AI_Job (about SPEC's 98 MB/s)
    device = capped(size_bytes=1 << 30, read_bps=int(2.15 * per_job))
    try:
        with mounted(device, tmp_path / "fs") as directory:
            done = device.iorig(truth_db, "run", "ai-image", "--quick", "--target", f"{directory}/")
    except Unavailable as exc:
        pytest.skip(str(exc))
    assert done.returncode == 0, done.stdout + done.stderr
    search = json.loads(device.iorig(truth_db, "show", "last", "--json").stdout)["search"]
    validity = {p["load"]: p["valid"] for p in search["points"]}
    print(
        f"truth 8: reads per job {per_job / 1e6:.0f} MB/s, cap {2.15 * per_job / 1e6:.0f} "
        f"MB/s, validity {validity}"
    )
    assert validity == {1: True, 2: True, 3: False, 4: False, 5: False}, search["points"]
    assert search["max_valid_load"] == 2
    cap = 2.15 * per_job
    with Store(truth_db) as store:
        (run_id,) = store.run_ids(limit=1)
        stored = store.load_run(run_id, artifacts=True)
    for phase in stored.phases:
        if not phase.point:
            continue
        series = phase.aggregate.series[ALL]
        seconds = len(series)
        assert seconds >= 2, phase.name
        if int(phase.point["ai_jobs"]) > 2:
            # past the cap the device sets the figure: every second reads the cap
            reads = phase.aggregate.series["read"].bytes_per_s
            print(f"truth 8: {phase.name}: read MB/s per second {(reads / 1e6).round()}")
            # (the throttle lets the first second overshoot, up to 12 % here; after
            # it the seconds read the cap within 5 %)
            assert all(0.85 * cap <= v <= 1.15 * cap for v in reads), (phase.name, reads, cap)
            assert float(reads[1:].mean()) == pytest.approx(cap, rel=0.05), (phase.name, reads)
            continue
        jobs = parse.parse_final(phase.fio_output).jobs
        # below the cap every job keeps its pace. The series' whole seconds hold
        # at most what the jobs completed in all, and at least their completions
        # spread evenly over each job's runtime: a slow Poisson job's runtime
        # overruns the phase by its last wait, with no I/O in it, so the even
        # spread undercounts it (by 3.1 % over a load-2 point once in CI)
        total_ios = sum(sum(d.ios for d in j.dirs.values()) for j in jobs)
        spread_ios = sum(
            sum(d.ios for d in j.dirs.values()) * min(1.0, seconds * 1000 / j.job_runtime_ms)
            for j in jobs
        )
        counted = float(series.iops.sum())
        assert 0.99 * spread_ios <= counted <= 1.01 * total_ios, (phase.name, counted)
        expected_ios = (spread_ios + total_ios) / 2
        rate = expected_ios / seconds
        print(
            f"truth 8: {phase.name}: series sum {counted:.0f}, jobs' completions "
            f"{spread_ios:.0f} spread over its {seconds} s, {total_ios} in all; "
            f"seconds {series.iops.round()}"
        )
        assert all(abs(v - rate) <= 0.25 * rate for v in series.iops), (phase.name, series.iops)
