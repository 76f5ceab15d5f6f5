"""Truth 15: MLPerf Storage-like checkpointing (docs/methodology.md §11) on a
filesystem whose device writes at most W and reads at most R bytes/s.

Eight processes write their shards and fsync them within their time, then
read them back: the checkpoint over the slowest process's time is then the
device's write cap, and its read cap. With direct I/O: through the page
cache (MLPerf's way) a process first fills the cache, then waits for its
fsync to write it, and this machine's 2 cores fill 235 MB in 0.3 s, about
5 % of the time the cap takes (bare fio: 37.0-39.8 MB/s at a 40 MB/s cap,
docs/methodology.md §11).

The expected figure is the device's own: its counters, read every 100 ms
while the run goes on (``Capped.sampling``), give what it wrote (read)
within each checkpoint's phase. iorig's figure (the bytes over the slowest
process's time) is at least those bytes over the phase's whole time and at
most the cap's band; the bytes are iorig's, between the device's counts over the samples just
inside and just outside the phase; and the device is
the limit: its rate over its I/O's span is the cap, within truth 1's band
above and ``THROTTLE_BAND`` below.
"""

from __future__ import annotations

import json

import pytest
from tests.truth.device import THROTTLE_BAND, Samples, Unavailable, mounted

from iorig.model import PhaseResult
from iorig.store import Store

pytestmark = [pytest.mark.fio, pytest.mark.truth]

WRITE_CAP = 40_000_000
READ_CAP = 60_000_000
CAP_BAND = 0.03  # truth 1's band for a rate at the cap
METADATA_BYTES = 1 << 20


def _the_devices_rate(
    checkpoint: dict, phase: PhaseResult, samples: Samples, ddir: str, cap: float
) -> str:
    """Check ``checkpoint``'s figure against what the device did in ``phase``;
    says what it compared."""
    # the device's counts between the samples inside the phase (none of the
    # phase before's, whose last writes can land in the interval that
    # straddles the two) and its one-second windows between them
    least_bytes, most_bytes = samples.bounds(ddir, phase.started_at, phase.ended_at)
    figure = checkpoint["bytes_per_s"]
    # no less than those bytes over the phase's whole time (fio's start
    # included: the slowest process ran within it); no more than the cap's
    # band (the throttle's slices let a window pass a little over its cap)
    lowest = least_bytes / (phase.ended_at - phase.started_at)
    assert lowest <= figure <= cap * (1 + CAP_BAND), (phase.name, figure, lowest)
    # the device read (wrote) what iorig says the processes did, give or
    # take its filesystem's metadata for eight files (a few 4 KiB blocks each)
    bounds = (least_bytes - METADATA_BYTES, most_bytes)
    assert bounds[0] <= checkpoint["io_bytes"] <= bounds[1], (phase.name, checkpoint, bounds)
    # the device is the limit: its rate from its first to its last sample
    # that moved (the phase's processes starting and syncing left out), to
    # the samples' resolution (its bytes moved after the first and before
    # the last, each a sampling interval from the next);
    # the median of its one-second windows read 38.7 MB/s beside a soak
    # where iorig's 40.3 was the device's: a short phase's few windows
    # include its partial first and last
    # (from the first sample after the phase began: the interval that
    # straddles its start can hold the phase before's last writes, and a
    # span begun there holds the idle time between the two — a soak's
    # write-2 began 0.08 s early and read 37.4-38.8 MB/s)
    first, last = samples.active(ddir, phase.started_at + samples.interval_s, phase.ended_at) or (
        0.0,
        0.0,
    )
    least_moved, most_moved = samples.bounds(ddir, first, last)
    edge = 2 * samples.interval_s
    slowest, fastest = least_moved / (last - first), most_moved / (last - first - edge)
    # (beside a soak's load the device wrote 38.75 MB/s at most under its
    # 40: the throttle's pace, not iorig's figure, which the bounds above hold)
    assert slowest <= cap * (1 + CAP_BAND) and fastest >= cap * (1 - THROTTLE_BAND), (
        phase.name,
        slowest,
        fastest,
    )
    device_rate = least_moved / (last - first)
    return (
        f"{phase.name}: {figure / 1e6:.2f} MB/s, at least {lowest / 1e6:.2f}, "
        f"device {device_rate / 1e6:.2f}, its bytes {least_bytes - checkpoint['io_bytes']:+.0f}"
        f" to {most_bytes - checkpoint['io_bytes']:+.0f} of iorig's"
    )


def test_checkpoint_write_and_read_run_at_the_caps(capped, truth_db, tmp_path):
    device = capped(size_bytes=512 << 20, write_bps=WRITE_CAP, read_bps=READ_CAP)
    try:
        with mounted(device, tmp_path / "fs") as directory, device.sampling() as samples:
            done = device.iorig(
                truth_db, "run", "checkpoint", "--set=scale=0.0015", "--set=repetitions=2",
                "--set=direct=true",
                "--target", f"{directory}/", timeout=600,
            )  # fmt: skip
    except Unavailable as exc:
        pytest.skip(str(exc))
    assert done.returncode == 0, done.stdout + done.stderr
    doc = json.loads(device.iorig(truth_db, "show", "last", "--json").stdout)["checkpoint"]
    write, read = doc["write"], doc["read"]
    print(
        f"truth 15: {doc['model']['checkpoint_bytes'] / 1e6:.0f} MB checkpoints, write "
        + ", ".join(f"{c['bytes_per_s'] / 1e6:.2f}" for c in write["checkpoints"])
        + f" MB/s (cap {WRITE_CAP / 1e6:g}), read "
        + ", ".join(f"{c['bytes_per_s'] / 1e6:.2f}" for c in read["checkpoints"])
        + f" MB/s (cap {READ_CAP / 1e6:g})"
    )
    assert doc["model"]["processes"] == 8 and doc["model"]["fsync"] is True
    assert doc["model"]["direct"] is True
    assert len(write["checkpoints"]) == len(read["checkpoints"]) == 2
    with Store(truth_db) as store:
        (run_id,) = store.run_ids(limit=1)
        phases = {p.name: p for p in store.load_run(run_id).phases}
    seen = [
        _the_devices_rate(c, phases[c["phase"]], samples, ddir, cap)
        for ddir, cap, done_ in (("write", WRITE_CAP, write), ("read", READ_CAP, read))
        for c in done_["checkpoints"]
    ]
    print("truth 15: " + "; ".join(seen))
