"""A throttle event's cap outlives a killed run (issue 27): after ``kill -9``
during a ``throttle`` event the device stayed capped at 500 IOPS and the
next run stored ``ok: 502 IOPS`` with no warning. iorig writes what the
device had before into a record that survives the process (before the cap
is applied), and the next ``iorig doctor`` or ``iorig run`` puts exactly
that back, saying so; the audit names any block-throttle limit on a
target's device during a run.

The device is a loop device in the root blkio cgroup (cgroup v1's block
throttle, which throttle events use); its owner's cap (OWNER_IOPS) is set
first, so "restored" means the owner's setting is back, not just no cap."""

from __future__ import annotations

import contextlib
import json
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.faults.killed import kill9, loop_device, run, start

from iorig.machine import throttle

pytestmark = [pytest.mark.fio, pytest.mark.blockdev, pytest.mark.system]

EVENT_IOPS = 500
OWNER_IOPS = 20_000
SCENARIO = f"""\
iorig: 1
name: throttled
title: a device throttled, and the run killed
targets:
  data: {{size: 16MiB}}
phases:
  - name: load
    kind: measure
    duration: 60s
    workloads: [{{rw: randread, bs: 4k, iodepth: 4}}]
    events:
      - {{at: 1s, do: "throttle data to {EVENT_IOPS}iops"}}
      - {{at: 50s, do: "unthrottle data"}}
"""
OWNER = {"read_iops": OWNER_IOPS, "write_iops": 0, "read_bps": 0, "write_bps": 0}


@pytest.fixture
def device(scratch: Path) -> Iterator[tuple[Path, str]]:
    """A loop device with its owner's cap (read IOPS), removed at the end."""
    if (why := throttle.problem()) is not None:
        pytest.skip(why)
    with loop_device(scratch) as dev:
        majmin = throttle.whole_disk(Path(f"/sys/block/{dev.name}/dev").read_text().strip())
        try:
            throttle.restore(majmin, OWNER)
            yield dev, majmin
        finally:
            with contextlib.suppress(OSError):
                throttle.remove(majmin)


def _killed_while_throttled(dev: Path, majmin: str, tmp_path: Path) -> None:
    scenario = tmp_path / "throttled.yaml"
    scenario.write_text(SCENARIO)
    proc = start(tmp_path / "killed.sqlite", "run", str(scenario), "--target", str(dev))
    try:
        deadline = time.monotonic() + 60
        while throttle.rules(majmin)["read_iops"] != EVENT_IOPS:
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "the throttle event never capped the device"
            time.sleep(0.05)
        kill9(proc)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    # what the dead run left: the event's cap in place of the owner's
    assert throttle.rules(majmin)["read_iops"] == EVENT_IOPS


def test_doctor_restores_the_caps_a_killed_run_left(device, tmp_path):
    dev, majmin = device
    _killed_while_throttled(dev, majmin, tmp_path)
    done = run(tmp_path / "doctor.sqlite", "doctor")
    assert done.returncode == 0, done.stdout + done.stderr
    assert throttle.rules(majmin) == OWNER  # exactly the owner's, not 0 and not the event's
    said = " ".join((done.stdout + done.stderr).split())
    assert f"restored the block throttle of device {majmin}" in said, said
    again = run(tmp_path / "doctor.sqlite", "doctor")  # done once: nothing left to say
    assert "restored" not in again.stdout + again.stderr


def test_the_next_run_restores_them_and_the_audit_names_the_owners_cap(device, tmp_path):
    dev, majmin = device
    _killed_while_throttled(dev, majmin, tmp_path)
    db = tmp_path / "next.sqlite"
    done = run(
        db,
        "run",
        "--rw",
        "randread",
        "--bs",
        "4k",
        "--size",
        "16MiB",
        "--duration",
        "2s",
        "--target",
        str(dev),
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"restored the block throttle of device {majmin}" in " ".join(done.stderr.split())
    assert throttle.rules(majmin) == OWNER
    shown = json.loads(run(db, "show", "last", "--json").stdout)
    iops = [p["iops"] for p in shown["phases"] if p["kind"] == "measure"]
    assert iops and iops[0] > 4 * EVENT_IOPS, iops  # not the dead run's cap
    capped = [w for w in shown["run"]["warnings"] if w["code"] == "device-throttled"]
    assert capped, shown["run"]["warnings"]
    assert majmin in capped[0]["message"] and f"read_iops {OWNER_IOPS}" in capped[0]["message"]


def test_a_throttle_record_of_a_live_run_is_left_alone(device, tmp_path):
    dev, majmin = device
    scenario = tmp_path / "throttled.yaml"
    scenario.write_text(SCENARIO)
    proc = start(tmp_path / "live.sqlite", "run", str(scenario), "--target", str(dev))
    try:
        deadline = time.monotonic() + 60
        while throttle.rules(majmin)["read_iops"] != EVENT_IOPS:
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "the throttle event never capped the device"
            time.sleep(0.05)
        done = run(tmp_path / "doctor.sqlite", "doctor")
        assert done.returncode == 0, done.stdout + done.stderr
        assert throttle.rules(majmin)["read_iops"] == EVENT_IOPS  # the live run's cap stays
        assert "restored" not in done.stdout + done.stderr
    finally:
        proc.send_signal(signal.SIGINT)  # the run ends as runs do: its caps put back
        proc.communicate(timeout=60)
    assert proc.returncode == 130
    assert throttle.rules(majmin) == OWNER
