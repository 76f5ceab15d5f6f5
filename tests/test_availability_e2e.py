"""A host stopped mid-phase on loopback fio servers (issue 14): the events,
the stopped host's zeros, the other host's figures and the impact are
stored and shown; expected figures come from the workload's own rate."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from tests.conftest import HAS_FIO, REPO
from tests.fioservers import fio_servers

from iorig.model import ALL
from iorig.store import Store

pytestmark = [pytest.mark.fio, pytest.mark.skipif(not HAS_FIO, reason="fio is not installed")]

RATE = 1000  # IOPS per host: the baseline is known before the run
SCENARIO = f"""\
iorig: 1
name: node-failure
title: one host stopped and resumed
targets:
  data: {{size: 16MiB}}
phases:
  - name: fill
    kind: prefill
    workloads: [{{rw: write, bs: 1m}}]
  - name: steady
    kind: measure
    duration: 13s
    workloads: [{{rw: randread, bs: 4k, rate_iops: {RATE}}}]
    events:
      - {{at: 5s, do: "stop-host 2"}}
      - {{at: 8s, do: "start-host 2"}}
impact: {{baseline: 3s, settle: 2s, tolerance: 25%}}
"""


def _iorig(db, *args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, IORIG_DB=str(db), COLUMNS="200", NO_COLOR="1")
    return subprocess.run([sys.executable, "-m", "iorig", *args], capture_output=True,
                          text=True, timeout=180, env=env, cwd=REPO)  # fmt: skip


def test_a_stopped_host_is_an_event_with_its_impact_and_the_other_host_is_kept(tmp_path):
    scenario = tmp_path / "node-failure.yaml"
    scenario.write_text(SCENARIO)
    db = tmp_path / "results.sqlite"
    with fio_servers(2, tmp_path) as hosts:
        done = _iorig(db, "run", str(scenario), "--hosts", ",".join(h.label for h in hosts),
                      "--label", "stopped")  # fmt: skip
        assert done.returncode == 0, done.stdout + done.stderr
        shown = _iorig(db, "show", "last", "--json")
    doc = json.loads(shown.stdout)
    stop, start = doc["events"]
    assert (stop["action"], stop["status"], start["action"], start["status"]) == (
        "stop-host", "done", "start-host", "done")  # fmt: skip
    assert "stopped" in stop["detail"] and "resumed after 3" in start["detail"]
    assert 2.7 <= start["started_at"] - stop["started_at"] <= 3.5
    (phase,) = doc["phases"]
    assert phase["status"] == "ok"  # a planned stop is not a stall

    impact = stop["impact"]
    print(f"stop-host impact: {impact}")
    assert impact["baseline"] == pytest.approx(2 * RATE, rel=0.2)  # both hosts' rates
    assert impact["dip_pct"] <= 60  # one of two hosts stopped: half (or less) is left
    assert impact["lost_ios"] >= RATE  # about RATE × 3 s, less what fio caught up
    assert start["impact"] is None  # the end of a disturbance is measured in the stop's recovery

    # the stopped host's seconds inside the stop are zeros; the other host's are its rate
    with Store(db) as store:
        stored = store.load_run(doc["run"]["id"])
    steady = next(p for p in stored.phases if p.name == "steady")
    series = {sc.scope.host: sc.series[ALL] for sc in steady.host_scopes}
    stopped, running = series[hosts[1].label], series[hosts[0].label]
    zeros = [i for i, v in enumerate(stopped.iops) if v == 0]
    assert zeros, stopped.iops
    assert all(running.iops[i] > 0 for i in zeros)
    assert len(stopped) == len(running) == len(steady.aggregate.series[ALL]) >= 11  # nothing cut
    # the stop is placed on the series where the zeros are
    stop_s = stop["started_at"] - steady.origin
    assert all(stop_s - 1 <= stopped.t_s[i] <= stop_s + 4 for i in zeros)

    text = _iorig(db, "show", "last").stdout
    assert "Events" in text and "stop-host 2" in text and "start-host 2" in text
