"""Truth 9: a measurement that stops once its median is known.

A device capped at C answers C every second, so ``until: precise`` must
stop soon after its minimum, far before its maximum, with an interval that
contains C (the cap is the known answer).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

# serial: the live stop reads fio's status each second, which a busy CPU delays
pytestmark = [pytest.mark.fio, pytest.mark.truth, pytest.mark.serial]

CAP = 2_000
MAX_S = 60


@pytest.fixture
def backing(scratch: Path) -> Path:
    """The device's file on disk, not in memory: over memory the live view's
    seconds (from fio's status) scattered too much to stop before 60 s,
    though the logged seconds were constant, likely because the throttle's
    bursts complete at once there; on disk they complete spread out."""
    return scratch


def _scenario(tmp_path) -> str:
    path = tmp_path / "precise.yaml"
    path.write_text(
        f"""iorig: 1
name: precise-truth
version: 1
title: until precise on a capped device
targets:
  data:
    size: 64MiB
phases:
  - name: read
    kind: measure
    duration: {MAX_S}s
    workloads:
      - {{rw: randread, bs: 4KiB, iodepth: 16, direct: true}}
"""
    )
    return str(path)


def test_until_precise_stops_early_with_an_interval_that_holds_the_cap(capped, truth_db, tmp_path):
    # --precision turns the 60 s measure phase into "until: precise, at most 60 s"
    device = capped(read_iops=CAP)
    done = device.iorig(
        truth_db, "run", _scenario(tmp_path), "--target", str(device.path), "--precision", "2%"
    )
    assert done.returncode == 0, done.stdout + done.stderr
    doc = json.loads(device.iorig(truth_db, "show", "last", "--json").stdout)
    (phase,) = doc["phases"]
    precision, seconds = phase["precision"], phase["per_second"]
    print(
        f"truth 9: cap {CAP} IOPS: median {precision['median']:.0f}, kept seconds "
        f"{seconds['min']:.0f}…{seconds['max']:.0f}, {precision['seconds']} s of at most "
        f"{MAX_S}: ±{precision['achieved_pct']} % ({precision['why'] or 'interval'})"
    )
    # well before the maximum, and not before the minimum (10 s) in the seconds kept
    assert 10 <= precision["seconds"] <= MAX_S / 3
    assert seconds["seconds"] == precision["seconds"]
    # the seconds the stop distorts are not kept: every one left is about the
    # cap's. A stop cuts a second by 9 % (73 MiB/s on an 80 MiB/s cap); the
    # throttle's bursts move one by 5 % at most, balanced by the next (1908
    # and 2125 IOPS seen in a fresh-clone run, 1950 and 2186 before)
    assert seconds["min"] >= 0.93 * CAP
    # the interval holds the cap, and never claims more than one logged second's resolution
    assert precision["achieved_pct"] is not None, precision
    assert precision["low"] <= CAP <= precision["high"]
    assert precision["achieved_pct"] >= 0.1
    findings = [w["message"] for w in doc["run"]["warnings"] if w["code"] == "not-precise"]
    if seconds["max"] <= 1.01 * CAP and seconds["min"] >= 0.99 * CAP:
        # every kept second within 1 % of the cap (29 runs in 30 here): the
        # interval lies between them, so the verdict must be precise
        assert precision["precise"] and precision["achieved_pct"] <= 1 and not findings
    else:
        # the throttle let a burst through (once in 30 runs: 1950, 2048, 2186
        # IOPS seconds); the logged seconds are judged as they are, and a stop
        # that falls short on them says so
        assert precision["precise"] or findings == [
            f"phase 'read' stopped early without the precision asked: ±"
            f"{precision['achieved_pct']:.1f} % after {precision['seconds']} s, asked ±2 %"
        ]
    text = device.iorig(truth_db, "show", "last").stdout
    assert "±95%" in text and f"±{precision['achieved_pct']:.1f}%" in text
    # the HTML report draws the interval as a band around the median
    report = tmp_path / "r.html"
    assert device.iorig(truth_db, "report", "last", "-o", str(report)).returncode == 0
    assert f"median's 95 % interval (\\u00b1{precision['achieved_pct']:.1f} %" in report.read_text()
