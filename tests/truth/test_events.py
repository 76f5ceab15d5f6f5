"""Truth: a throttle event's dip is the throttle's rate, and the series
recovers once it is lifted (issue 14).

A loop device capped at BASE_IOPS by its owner (a level it holds steadily,
where a free loop device's rate wanders with the machine's load) runs a
phase; a `throttle data to T` event caps it at T mid-phase and `unthrottle`
lifts the event's cap 4 s later: the throttled seconds read T, the impact's
dip is T, the series recovers to BASE_IOPS after the unthrottle, and the
owner's cap is still in place after the run (issue 27: nothing iorig
changes outlives it, and nothing it finds is taken away).
"""

from __future__ import annotations

import json

import pytest
from tests.truth.device import read_iops

from iorig.machine import throttle

pytestmark = [pytest.mark.fio, pytest.mark.truth]

CAP_IOPS = 2000
BASE_IOPS = 20_000
SCENARIO = f"""\
iorig: 1
name: throttled
title: a device throttled mid-phase
targets:
  data: {{size: 64MiB}}
phases:
  - name: load
    kind: measure
    duration: 14s
    workloads: [{{rw: randread, bs: 4k, iodepth: 16}}]
    events:
      - {{at: 4s, do: "throttle data to {CAP_IOPS}iops"}}
      - {{at: 8s, do: "unthrottle data"}}
impact: {{baseline: 3s, settle: 3s, tolerance: 30%}}
"""


def test_a_throttle_event_dips_to_its_rate_and_recovers_after_unthrottle(
    capped, truth_db, tmp_path
):
    if (why := throttle.problem()) is not None:
        pytest.skip(why)  # throttle events use cgroup v1 (docs/guide/availability-integrity.md)
    device = capped()  # no cap yet: first, is the device fast enough for the base cap?
    if device.how != "v1":
        pytest.skip("the owner's cap must be in the root blkio cgroup iorig's events throttle")
    free_iops = read_iops(
        device.fio("--rw=randread", "--bs=4k", "--ioengine=io_uring", "--iodepth=16", runtime_s=1)
    )
    assert free_iops > 1.5 * BASE_IOPS, f"the free device ({free_iops:.0f} IOPS) is too slow"
    device.cap(read_iops=BASE_IOPS, write_iops=BASE_IOPS)
    scenario = tmp_path / "throttled.yaml"
    scenario.write_text(SCENARIO)
    done = device.iorig(truth_db, "run", str(scenario), "--target", str(device.path))
    assert done.returncode == 0, done.stdout + done.stderr
    doc = json.loads(device.iorig(truth_db, "show", "last", "--json").stdout)
    cap, lift = doc["events"]
    assert (cap["status"], lift["status"]) == ("done", "done"), (cap, lift)
    impact = cap["impact"]
    samples = {s["t_s"]: s["iops"] for s in doc["samples"] if s["ddir"] == "all"}
    capped_at = cap["started_at"] - doc["run"]["started_at"]  # near 4 s + start-up
    inside = [v for t, v in samples.items() if capped_at + 1.5 <= t <= capped_at + 4 - 0.5]
    after = [v for t, v in samples.items() if t >= capped_at + 4 + 2]
    print(
        f"truth events: free {free_iops:.0f} IOPS, base {BASE_IOPS}, throttled seconds "
        f"{inside}, after the unthrottle {after}, impact {impact}"
    )
    assert impact["baseline"] == pytest.approx(BASE_IOPS, rel=0.1)
    assert len(inside) >= 2
    assert all(v == pytest.approx(CAP_IOPS, rel=0.1) for v in inside), inside
    dip = impact["baseline"] * impact["dip_pct"] / 100
    assert dip == pytest.approx(CAP_IOPS, rel=0.15)
    assert impact["recovered"] and 3.5 <= impact["recovery_s"] <= 6.0, impact
    assert impact["lost_ios"] > 0.5 * (impact["baseline"] - CAP_IOPS) * 3
    assert lift["impact"] is None
    assert after and all(v == pytest.approx(BASE_IOPS, rel=0.1) for v in after), after
    # the owner's cap is back, not lifted with the event's
    assert throttle.rules(device.majmin) == {
        "read_iops": BASE_IOPS,
        "write_iops": BASE_IOPS,
        "read_bps": 0,
        "write_bps": 0,
    }
    assert "its own caps back" in lift["detail"], lift
