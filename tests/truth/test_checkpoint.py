"""Truth 15: MLPerf Storage-like checkpointing (docs/methodology.md §11) on a
filesystem whose device writes at most W and reads at most R bytes/s.

Eight processes write their shards and fsync them within their time, then
read them back: the checkpoint over the slowest process's time is then the
device's write cap, and its read cap. With direct I/O: through the page
cache (MLPerf's way) a process first fills the cache, then waits for its
fsync to write it, and this machine's 2 cores fill 235 MB in 0.3 s, about
5 % of the time the cap takes (bare fio: 37.0-39.8 MB/s at a 40 MB/s cap,
docs/methodology.md §11).
"""

from __future__ import annotations

import json

import pytest
from tests.truth.device import Unavailable, mounted

pytestmark = [pytest.mark.fio, pytest.mark.truth]

WRITE_CAP = 40_000_000
READ_CAP = 60_000_000


def test_checkpoint_write_and_read_run_at_the_caps(capped, truth_db, tmp_path):
    device = capped(size_bytes=512 << 20, write_bps=WRITE_CAP, read_bps=READ_CAP)
    try:
        with mounted(device, tmp_path / "fs") as directory:
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
    for c in write["checkpoints"]:
        assert c["bytes_per_s"] == pytest.approx(WRITE_CAP, rel=0.05), c
    for c in read["checkpoints"]:
        assert c["bytes_per_s"] == pytest.approx(READ_CAP, rel=0.05), c
