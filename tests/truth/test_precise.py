"""Truth 9: a measurement that stops once its median is known.

A device capped at C answers C every second, so ``until: precise`` must
stop soon after its minimum, far before its maximum, with an interval that
contains C (the cap is the known answer).
"""

from __future__ import annotations

import json

import pytest

pytestmark = [pytest.mark.fio, pytest.mark.truth]

CAP = 2_000
MAX_S = 60


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
    precision = phase["precision"]
    print(
        f"truth 9: cap {CAP} IOPS: median {precision['median']:.0f}, 95 % interval "
        f"{precision['low']:.1f}…{precision['high']:.1f} (±{precision['achieved_pct']:.2f} %), "
        f"stopped after {precision['seconds']} s of at most {MAX_S}"
    )
    assert precision["precise"] and precision["achieved_pct"] <= 2
    assert precision["seconds"] <= MAX_S / 3  # well before the maximum
    assert precision["low"] <= CAP <= precision["high"]
    assert phase["per_second"]["seconds"] == precision["seconds"]
    # the seconds the stop distorts are not kept: every one left is the cap's
    assert phase["per_second"]["min"] >= 0.97 * CAP
    text = device.iorig(truth_db, "show", "last").stdout
    assert "±95%" in text and f"±{precision['achieved_pct']:.1f}%" in text
    assert "without the precision asked" not in text
    # the HTML report draws the interval as a band around the median
    report = tmp_path / "r.html"
    assert device.iorig(truth_db, "report", "last", "-o", str(report)).returncode == 0
    assert f"median's 95 % interval (\\u00b1{precision['achieved_pct']:.1f} %" in report.read_text()
