"""Truth 9: a measurement that stops once its median is known.

A device capped at C answers C every second, so ``until: precise`` must
stop soon after its minimum, far before its maximum, with an interval that
contains C (the cap is the known answer) and the median of what the device
itself did each second over the seconds kept (its own counters, sampled
during the run). The live rule reads the seconds fio logs (the status
reveals each as it ends), so a stop it makes is precise on the stored
seconds too: no "stopped early without the precision asked".
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from iorig.store import Store

# serial: the live stop reads fio's status each second, which a busy CPU delays
pytestmark = [pytest.mark.fio, pytest.mark.truth, pytest.mark.serial]

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
    with device.sampling() as samples:
        done = device.iorig(
            truth_db, "run", _scenario(tmp_path), "--target", str(device.path), "--precision", "2%"
        )
    assert done.returncode == 0, done.stdout + done.stderr
    doc = json.loads(device.iorig(truth_db, "show", "last", "--json").stdout)
    (phase,) = doc["phases"]
    precision, seconds = phase["precision"], phase["per_second"]
    with Store(truth_db) as store:
        stored = store.load_run(doc["run"]["id"]).phases[-1]
    origin = stored.series_origin or stored.started_at
    t_s = stored.aggregate.series["read"].t_s
    kept = (origin + float(t_s[0]) - 1.0, origin + float(t_s[-1]))
    device_seconds = samples.windows("read", *kept, what="ios")
    truth = float(np.median(device_seconds))
    print(
        f"truth 9: cap {CAP} IOPS: median {precision['median']:.0f}, kept seconds "
        f"{seconds['min']:.0f}…{seconds['max']:.0f}, {precision['seconds']} s of at most "
        f"{MAX_S}: ±{precision['achieved_pct']} % ({precision['why'] or 'interval'}); the "
        f"device's own seconds {device_seconds.min():.0f}…{device_seconds.max():.0f}, "
        f"median {truth:.0f}"
    )
    # well before the maximum, and not before the minimum (10 s) in the seconds kept
    assert 10 <= precision["seconds"] <= MAX_S / 3
    assert seconds["seconds"] == precision["seconds"]
    # the seconds the stop distorts are not kept (a stop cuts a second by 9 %):
    # none is slower than the device's slowest second over them, less one
    # sample of its counters (fio's windows and the samples' do not line up)
    assert seconds["min"] >= device_seconds.min() - CAP * samples.interval_s
    # stopped early on the stored seconds' own verdict, which is precise
    findings = [w["message"] for w in doc["run"]["warnings"] if w["code"] == "not-precise"]
    assert precision["precise"] and not findings, (precision, findings)
    # the interval holds the cap and the device's own median, and never
    # claims more than one logged second's resolution
    assert precision["low"] <= CAP <= precision["high"]
    assert precision["low"] <= truth <= precision["high"]
    assert 0.1 <= precision["achieved_pct"] <= 2.0
    text = device.iorig(truth_db, "show", "last").stdout
    assert "±95%" in text and f"±{precision['achieved_pct']:.1f}%" in text
    # the HTML report draws the interval as a band around the median
    report = tmp_path / "r.html"
    assert device.iorig(truth_db, "report", "last", "-o", str(report)).returncode == 0
    assert f"median's 95 % interval (\\u00b1{precision['achieved_pct']:.1f} %" in report.read_text()
