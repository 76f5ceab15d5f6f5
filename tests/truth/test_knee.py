"""Truth 2: the knee of a device capped at 40,000 read IOPS.

The expected figure comes from a bare fio scan of the same device in the
same test: the lowest queue depth at which fio alone reaches 90 % of the
cap, by the median of three 1 s runs (at QD 1 and 2 this device in memory
gives 14 K in one run and 36 K in the next, faster the busier the machine:
its latency is near the cap's 25 µs an I/O). iorig's knee must deliver at
least 90 % of the cap (or, where iorig reports the knee uncertain between
two concurrencies, the higher one must), at a concurrency no more than twice
that (or 4, the device being erratic below) or with an uncertain span
reaching down to it and not beyond four times it, and its peak band must
hold the cap.
"""

from __future__ import annotations

import json
import statistics

import pytest
from tests.truth.device import read_iops

pytestmark = [pytest.mark.fio, pytest.mark.truth]

CAP = 40_000
SLACK = 0.005  # the throttle's slices: a 1 s run measures within 0.5 % of its cap


# Alone: its 40,000 IOPS need the CPUs. Beside two other truth tests bare fio
# read 8.9-32 K at QD 1 and iorig's readings at QD 8 29.9 K (the code of
# d38c65c too, on a noisy afternoon), which failed it; alone it passed.
@pytest.mark.serial
def test_knee_of_a_capped_device(capped, truth_db):
    device = capped(read_iops=CAP)
    lowest = None
    bare: dict[int, int] = {}
    for depth in (1, 2, 4, 8, 16, 32, 64):
        runs = [
            read_iops(
                device.fio(
                    "--rw=randread",
                    "--bs=4k",
                    "--ioengine=io_uring",
                    f"--iodepth={depth}",
                    runtime_s=1,
                )
            )
            for _ in range(3)
        ]
        bare[depth] = round(statistics.median(runs))
        if bare[depth] >= 0.9 * CAP:
            lowest = depth
            break
    assert lowest is not None, "bare fio never reached 90 % of the cap"
    done = device.iorig(
        truth_db,
        "knee",
        "--target",
        str(device.path),
        "--size",
        "64MiB",
        "--duration",
        "1s",
        "--max-concurrency",
        "64",
        "--engine",
        "io_uring",
    )
    assert done.returncode == 0, done.stdout + done.stderr
    search = json.loads(device.iorig(truth_db, "show", "last", "--json").stdout)["search"]
    knee = search["knee"]
    low, high = search["plateau"]["ci"]
    runs = {
        r["concurrency"]: [round(x["throughput"]) for x in r["runs"]] for r in search["remeasured"]
    }
    span = search["uncertain_between"] or [knee["concurrency"]] * 2
    print(
        f"truth 2: cap {CAP}; bare fio (medians {bare}) reaches 90 % at QD {lowest}; "
        f"knee at {knee['concurrency']} with {knee['throughput']:.0f} IOPS; "
        f"peak band {low:.0f}–{high:.0f}; uncertain between {search['uncertain_between']}; "
        f"readings apart: {runs}"
    )
    # where the readings leave the knee uncertain, iorig names the span and
    # its top end is the concurrency that must reach the cap (at QD 1–2 this
    # device gave 27 K and 40 K a second apart; iorig then reports "between
    # 1 and 4", and the knee point itself is the span's low end)
    at = {p["concurrency"]: p["throughput"] for p in search["points"]}
    assert at[span[1]] >= 0.9 * CAP, json.dumps(search, indent=1)[:8000]
    assert span[1] <= max(4 * lowest, 8), (knee, span, lowest, bare)
    # the knee, or the span iorig reports it uncertain in, reaches down to
    # twice the depth bare fio needed, or, where bare fio needed only QD 1 or
    # 2, to 4: below 4 this device is erratic (bare medians of 35 K at QD 1
    # and 22 K at QD 2 in one scan), and iorig's fio, with its four logs, is
    # 15 % slower an I/O at QD 1 (issue 29's overhead)
    assert span[0] <= max(2 * lowest, 4), (knee, span, lowest, bare)
    assert low * (1 - SLACK) <= CAP <= high * (1 + SLACK), (low, high)
