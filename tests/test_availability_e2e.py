"""A host stopped mid-phase on loopback fio servers (issue 14): the events,
the stopped host's zeros, the other host's figures and the impact are
stored and shown; expected figures come from the workload's own rate."""

from __future__ import annotations

import json
import re

import pytest
from tests.conftest import HAS_FIO, CliResult, run_iorig
from tests.fioservers import (
    TOLERANCE_PCT,
    check_on_time,
    fio_servers,
    server_dir,
    stopped_for_s,
)

from iorig.model import ALL
from iorig.store import Store

pytestmark = [pytest.mark.fio, pytest.mark.skipif(not HAS_FIO, reason="fio is not installed")]

# the built-in scenario's quick profile (src/iorig/scenarios/availability.yaml)
QUICK_IOPS, QUICK_SIZE, QUICK_BS = 500, 32 * 2**20, 8192


def _iorig(db, *args: str) -> CliResult:
    return run_iorig(db, *args, columns=200, timeout=180)


# timing: paced hosts; the events count from the hosts' jobs' start (a fio
# server begins them a second or more after its client's launch, which left
# a busy machine too few seconds before the stop for a baseline)
@pytest.mark.timing
def test_the_availability_scenario_measures_a_host_failure_and_checks_every_hosts_data(tmp_path):
    db = tmp_path / "results.sqlite"
    with fio_servers(2, tmp_path) as hosts:
        done = _iorig(
            db,
            "run",
            "availability",
            "--quick",
            "--set",
            "fail_host=2",
            "--set",
            f"tolerance={TOLERANCE_PCT}",
            "--hosts",
            ",".join(h.label for h in hosts),
        )
        assert done.returncode == 0, done.stdout + done.stderr
        doc = json.loads(_iorig(db, "show", "last", "--json").stdout)
        text = _iorig(db, "show", "last").stdout
    stop, start = doc["events"]
    assert (stop["action"], stop["status"], start["action"], start["status"]) == (
        "stop-host",
        "done",
        "start-host",
        "done",
    )
    assert "stopped" in stop["detail"]
    # the stop's length as start-host tells it is the events' own times
    stopped_for_s(stop, start)
    steady_row = next(p for p in doc["phases"] if p["name"] == "steady")
    assert steady_row["status"] == "ok"  # a planned stop is not a stall
    impact = stop["impact"]
    print(f"availability --quick, stop-host 2 of 2: {impact}")
    # two hosts at QUICK_IOPS each; one stopped leaves half: 50 % is the expected dip
    assert impact["baseline"] == pytest.approx(2 * QUICK_IOPS, rel=0.15)
    assert 35 <= impact["dip_pct"] <= 60
    assert impact["recovery_s"] is not None and impact["recovery_s"] >= 3  # stopped for 3 s
    assert impact["lost_ios"] >= QUICK_IOPS  # about QUICK_IOPS × 3 s, less what fio caught up
    assert start["impact"] is None  # the end of a disturbance is measured in the stop's recovery
    with Store(db) as store:
        stored = store.load_run(doc["run"]["id"])
    steady = next(p for p in stored.phases if p.name == "steady")
    per_host = {sc.scope.host: sc.series[ALL] for sc in steady.host_scopes}
    assert set(per_host) == {h.label for h in hosts}
    stopped, running = per_host[hosts[1].label], per_host[hosts[0].label]
    # the host that kept running kept its rate through the other's stop
    assert min(running.iops[1:-1]) >= 0.7 * QUICK_IOPS, running.iops
    # the stopped host's seconds inside the stop are zeros, placed where the stop was
    zeros = [i for i, v in enumerate(stopped.iops) if v == 0]
    assert zeros, stopped.iops
    stop_s = stop["started_at"] - steady.origin
    # at fail_at (5 s) of the hosts' I/O, as the wall-clock logs place it, and
    # start-host 3 s later: on time, or named late
    warnings = doc["run"]["warnings"]
    assert (stop["at_s"], start["at_s"]) == (5.0, 8.0)  # fail_at, and 3 s down
    check_on_time(stop, 5.0, stop_s, warnings)
    check_on_time(start, 8.0, start["started_at"] - steady.origin, warnings)
    assert all(stop_s - 1 <= stopped.t_s[i] <= stop_s + 4 for i in zeros)
    assert len(stopped) == len(running) == len(steady.aggregate.series[ALL]) >= 12  # nothing cut
    # every block of both hosts' working sets was read back and checked
    blocks = 2 * QUICK_SIZE // QUICK_BS
    assert doc["verdict"].startswith(f"PASS: all {blocks:,} blocks"), doc["verdict"]
    assert "Events" in text and "stop-host 2" in text and "start-host 2" in text


# no measured figure: runs beside other tests
def test_a_block_damaged_on_one_host_fails_the_run_as_lost_data_naming_the_host(tmp_path):
    db = tmp_path / "results.sqlite"
    damaged = 40 * QUICK_BS  # four blocks of garbage there, after the host came back
    with fio_servers(2, tmp_path) as hosts:
        victim = server_dir(tmp_path, hosts[1]) / "iorig-data.dat"
        corrupt = (
            f"dd if=/dev/urandom of={victim} bs={QUICK_BS} seek=40 count=4 "
            "conv=notrunc,fsync status=none"
        )
        # reads only (no write may repair a damaged block before the check)
        done = _iorig(
            db,
            "run",
            "availability",
            "--quick",
            "--set",
            "read_pct=100",
            "--hosts",
            ",".join(h.label for h in hosts),
            "--event",
            "steady@10s=run corrupt",
            "--event-command",
            f"corrupt={corrupt}",
        )
        assert done.returncode == 3, done.stdout + done.stderr
        doc = json.loads(_iorig(db, "show", "last", "--json").stdout)
    assert doc["verdict"] == "FAIL: data lost: 4 blocks did not read back as last written"
    error = doc["run"]["error"]
    # each bad block named with its host, file and offset
    assert error.count(f"{hosts[1].label}: iorig-data.dat offset ") == 4, error
    assert hosts[0].label not in error, error
    offsets = [int(o) for o in re.findall(r"iorig-data\.dat offset (\d+)", error)]
    # (in the order fio's jobs reported them, which varies)
    assert sorted(offsets) == [damaged + i * QUICK_BS for i in range(4)], error
