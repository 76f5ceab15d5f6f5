"""Truth: a paced workload the storage cannot keep up with is named
(`missed-pace`); one it can keep up with is not (issue 46).

A loop device capped at CAP_IOPS reads runs two paced phases: one asks
1.5 × the cap, which the device cannot deliver (fio gets the cap, a third
short of the pace), one asks half the cap, which it delivers. The audit
must name the first, with the figure fio got, and not the second; each
phase's rate is what the cap and the pace allow, the device's own count
of reads says the same, and the false-alarm side (a kept pace never
named) is the statistic tests/test_audit.py measures.
"""

from __future__ import annotations

import json

import pytest

from iorig.model import PhaseKind
from iorig.store import Store

pytestmark = [pytest.mark.fio, pytest.mark.truth]

CAP_IOPS = 2000
OVER_IOPS = 3000  # a third more than the device gives
UNDER_IOPS = 1000
DURATION_S = 4
SCENARIO = f"""\
iorig: 1
name: paces
title: a pace over the device's cap and one under it
targets:
  data: {{size: 16MiB}}
phases:
  - {{name: fill, kind: prefill, workloads: [{{rw: write, bs: 1MiB}}]}}
  - name: over
    kind: measure
    duration: {DURATION_S}s
    workloads: [{{rw: randread, bs: 4k, iodepth: 8, rate_iops: {OVER_IOPS}}}]
  - name: under
    kind: measure
    duration: {DURATION_S}s
    workloads: [{{rw: randread, bs: 4k, iodepth: 8, rate_iops: {UNDER_IOPS}}}]
"""


def test_a_pace_the_device_cannot_keep_is_named_and_one_it_keeps_is_not(capped, truth_db, tmp_path):
    device = capped(read_iops=CAP_IOPS)
    scenario = tmp_path / "paces.yaml"
    scenario.write_text(SCENARIO)
    with device.sampling(0.1) as samples:
        done = device.iorig(truth_db, "run", str(scenario), "--target", str(device.path))
    assert done.returncode == 0, done.stdout + done.stderr
    doc = json.loads(device.iorig(truth_db, "show", "last", "--json").stdout)
    with Store(truth_db) as store:
        (run_id,) = store.run_ids(limit=1)
        phases = {p.name: p for p in store.load_run(run_id).phases if p.kind is PhaseKind.MEASURE}
    iops = {name: p.aggregate.totals["all"].iops for name, p in phases.items()}
    # the device's own reads over each phase's I/O: what the cap let through
    device_iops = {}
    for name, p in phases.items():
        span = samples.active("read", p.started_at, p.ended_at)
        assert span is not None, name
        first, last = span
        device_iops[name] = samples.total("read", first, last, "ios") / (last - first)
    missed = [w for w in doc["run"]["warnings"] if w["code"] == "missed-pace"]
    print(f"truth pace: fio {iops}, device {device_iops}, findings {missed}")
    # over: the device gave its cap, far below the pace, and the audit says so
    assert device_iops["over"] < 0.9 * OVER_IOPS
    assert iops["over"] < 0.9 * OVER_IOPS
    (finding,) = missed
    assert finding["phase"] == "over" and "also in" not in finding["message"]
    assert "of the 3.00K asked" in finding["message"], finding
    # under: the device kept the pace (a Poisson count's 3σ over 4 s is 4.7 %)
    assert iops["under"] == pytest.approx(UNDER_IOPS, rel=0.05)
