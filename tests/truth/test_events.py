"""Truth: a throttle event's dip is the throttle's rate, and the series
recovers once it is lifted (issue 14).

A loop device runs free (its level measured by a bare fio run in the same
test), a `throttle data to T` event caps it mid-phase and `unthrottle`
lifts it 4 s later: the throttled seconds read T, the impact's dip is T,
and the recovery follows the unthrottle.
"""

from __future__ import annotations

import json

import pytest
from tests.truth.device import read_iops

from iorig import throttle

pytestmark = [pytest.mark.fio, pytest.mark.truth]

CAP_IOPS = 2000
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
        pytest.skip(why)  # iorig's throttle events use cgroup v1 (README: limits)
    device = capped()  # no cap: the event makes one
    free_iops = read_iops(device.fio("--rw=randread", "--bs=4k", "--ioengine=io_uring",
                                     "--iodepth=16", runtime_s=1))  # fmt: skip
    assert free_iops > 3 * CAP_IOPS, f"the free device ({free_iops:.0f} IOPS) is too slow"
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
    print(f"truth events: free {free_iops:.0f} IOPS, throttled seconds {inside}, impact {impact}")
    assert len(inside) >= 2
    assert all(v == pytest.approx(CAP_IOPS, rel=0.1) for v in inside), inside
    dip = impact["baseline"] * impact["dip_pct"] / 100
    assert dip == pytest.approx(CAP_IOPS, rel=0.15)
    assert impact["recovered"] and 3.5 <= impact["recovery_s"] <= 6.0, impact
    assert impact["lost_ios"] > 0.5 * (impact["baseline"] - CAP_IOPS) * 3
    assert lift["impact"] is None
