"""Truth 2: the knee of a device capped at 40,000 read IOPS.

The expected figure comes from a bare fio scan of the same device in the
same test: the lowest queue depth at which fio alone reaches 90 % of the
cap. iorig's knee must deliver at least 90 % of the cap, at a concurrency no
more than twice that, and its peak band must hold the cap.
"""

from __future__ import annotations

import json

import pytest
from tests.truth.device import read_iops

pytestmark = [pytest.mark.fio, pytest.mark.truth]

CAP = 40_000
SLACK = 0.005  # the throttle's slices: a 1 s run measures within 0.5 % of its cap


def test_knee_of_a_capped_device(capped, truth_db):
    device = capped(read_iops=CAP)
    lowest = None
    for depth in (1, 2, 4, 8, 16, 32, 64):
        doc = device.fio("--rw=randread", "--bs=4k", "--ioengine=io_uring",
                         f"--iodepth={depth}", runtime_s=1)  # fmt: skip
        if read_iops(doc) >= 0.9 * CAP:
            lowest = depth
            break
    assert lowest is not None, "bare fio never reached 90 % of the cap"
    done = device.iorig(
        truth_db, "knee", str(device.path), "--size", "64MiB", "--duration", "1s",
        "--max-concurrency", "64", "--engine", "io_uring",
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    search = json.loads(device.iorig(truth_db, "show", "last", "--json").stdout)["search"]
    knee = search["knee"]
    assert knee["throughput"] >= 0.9 * CAP, search
    assert knee["concurrency"] <= 2 * lowest, (knee, lowest)
    low, high = search["plateau"]["ci"]
    runs = {r["concurrency"]: [round(x["throughput"]) for x in r["runs"]]
            for r in search["remeasured"]}  # fmt: skip
    print(
        f"truth 2: cap {CAP}; bare fio reaches 90 % at QD {lowest}; "
        f"knee at {knee['concurrency']} with {knee['throughput']:.0f} IOPS; "
        f"peak band {low:.0f}–{high:.0f}; uncertain between {search['uncertain_between']}; "
        f"readings apart: {runs}"
    )
    assert low * (1 - SLACK) <= CAP <= high * (1 + SLACK), (low, high)
