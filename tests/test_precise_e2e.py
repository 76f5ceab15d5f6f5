"""until: precise and --precision with real fio: a paced workload (steady by
construction) stops once its median is known; one that cannot be known to
what was asked runs its maximum and says so."""

from __future__ import annotations

import json

import pytest
from tests.fioservers import fio_servers

pytestmark = pytest.mark.fio

PACED = """iorig: 1
name: paced
version: 1
title: a paced read
targets:
  data:
    size: 32MiB
phases:
  - name: fill
    kind: prefill
    workloads:
      - {rw: write, bs: 1MiB}
  - name: read
    kind: measure
    duration: 40s
    workloads:
      - {rw: randread, bs: 4KiB, iodepth: 4, rate_iops: 2000}
"""


def test_precision_option_stops_a_steady_phase_early(iorig, scratch, tmp_path):
    path = tmp_path / "paced.yaml"
    path.write_text(PACED)
    iorig("run", str(path), "--target", str(scratch / "data"), "--precision", "5%", check=True)
    doc = json.loads(iorig("show", "last", "--json", check=True).stdout)
    (phase,) = doc["phases"]
    precision = phase["precision"]
    assert precision["precise"] and precision["achieved_pct"] <= 5
    assert (
        10 <= precision["seconds"] <= 25 and phase["per_second"]["seconds"] == precision["seconds"]
    )
    assert precision["low"] <= phase["per_second"]["median"] <= precision["high"]
    assert precision["low"] <= 2000 <= precision["high"]  # the pace is the answer
    text = iorig("show", "last", check=True).stdout
    assert "±95%" in text and f"±{precision['achieved_pct']:.1f}%" in text
    assert "without the precision asked" not in text
    # the HTML report draws the interval as a band around the median
    report = tmp_path / "r.html"
    iorig("report", "last", "-o", str(report), check=True)
    assert f"median's 95 % interval (\\u00b1{precision['achieved_pct']:.1f} %" in report.read_text()


def test_a_phase_that_cannot_be_precise_runs_its_maximum_and_says_so(iorig, scratch, tmp_path):
    # ±0.1 % of an unpaced rate in at most 12 s: out of reach on any storage
    path = tmp_path / "tight.yaml"
    path.write_text(
        PACED.replace(
            "duration: 40s", "duration: 12s\n    until: precise\n    precision: 0.1%\n    min: 8s"
        ).replace(", rate_iops: 2000", "")
    )
    iorig("run", str(path), "--target", str(scratch / "data"), check=True)
    doc = json.loads(iorig("show", "last", "--json", check=True).stdout)
    precision = doc["phases"][0]["precision"]
    assert not precision["precise"] and precision["seconds"] >= 11
    assert precision["target_pct"] == 0.1
    (finding,) = [w for w in doc["run"]["warnings"] if w["code"] == "not-precise"]
    assert "ran its maximum without the precision asked" in finding["message"]
    assert "asked ±0.1 %" in finding["message"]
    text = iorig("show", "last", check=True).stdout
    assert "(asked ±0.1%)" in text


def test_on_fio_servers_a_precise_phase_runs_its_maximum_and_is_judged_after(iorig, tmp_path):
    # fio servers stream no status: nothing can stop the phase early, and its
    # precision is judged on the stored per-second series of every host
    path = tmp_path / "paced.yaml"
    path.write_text(
        PACED.replace("duration: 40s", "duration: 12s\n    until: precise\n    precision: 10%")
    )
    with fio_servers(2, tmp_path) as hosts:
        addresses = ",".join(h.label for h in hosts)
        iorig("run", str(path), "--hosts", addresses, check=True)
    doc = json.loads(iorig("show", "last", "--json", check=True).stdout)
    (phase,) = doc["phases"]
    precision = phase["precision"]
    assert phase["per_second"]["seconds"] >= 11  # ran its maximum
    assert precision["precise"] and precision["seconds"] == phase["per_second"]["seconds"]
    assert precision["low"] <= 4000 <= precision["high"]  # two hosts paced at 2,000 each
