"""MLPerf Storage-like training and checkpointing end to end with real fio:
both quick scenarios on a scratch directory (issue 30's "done when"), and
both on two fio servers, with per-host figures and nothing left behind."""

from __future__ import annotations

import json

import pytest
from tests.fioservers import fio_servers, server_dir

pytestmark = pytest.mark.fio


def test_quick_training_and_checkpoint_on_a_scratch_directory(iorig, scratch):
    trained = iorig("run", "train", "--quick", "--target", f"{scratch}/train/")
    assert trained.returncode == 0, trained.stdout + trained.stderr
    assert "Training result" in trained.stdout and "MiB/s" in trained.stdout
    doc = json.loads(iorig("show", "last", "--json", check=True).stdout)
    (t,) = doc["training"]
    assert t["outcome"] == "PASS" and t["au_mean"] > 0.9  # a scratch disk feeds one H100
    assert [e["epoch"] for e in t["epochs"]] == [1, 2]
    assert t["bytes_per_s"] == pytest.approx(t["demand_bytes_per_s"], rel=0.1)
    assert doc["verdicts"] == [] and doc["verdict"].startswith("PASS")
    checkpointed = iorig("run", "checkpoint", "--quick", "--target", f"{scratch}/ckpt/")
    assert checkpointed.returncode == 0, checkpointed.stdout + checkpointed.stderr
    c = json.loads(iorig("show", "last", "--json", check=True).stdout)["checkpoint"]
    assert [x["phase"] for x in c["write"]["checkpoints"]] == ["write-1", "write-2"]
    assert all(x["complete"] and x["bytes_per_s"] > 0 for x in c["read"]["checkpoints"])
    report = iorig("report", "last", "--format", "md", check=True).stdout
    assert "Checkpoint result" in report
    for made in ("train", "ckpt"):  # the data set and the checkpoints were removed
        assert [p for p in (scratch / made).rglob("*") if p.is_file()] == []


def test_training_and_checkpoint_on_two_fio_servers(iorig, tmp_path):
    with fio_servers(2, tmp_path) as hosts:
        labels = ",".join(h.label for h in hosts)
        trained = iorig(
            "run", "train", "--quick", "--set", "accelerators=2", "--set", "epochs=1",
            "--hosts", labels,
        )  # fmt: skip
        # exit 3 is a failed verdict: AU is a timing, and beside a load one
        # read of 0.43 s put an accelerator at 89.2 % against the 90 % floor.
        # Whether AU is right is the truth tests' (tests/truth/test_training.py);
        # here the run, its per-host figures and its cleanup on two servers
        assert trained.returncode in (0, 3), trained.stdout + trained.stderr
        (t,) = json.loads(iorig("show", "last", "--json", check=True).stdout)["training"]
        checkpointed = iorig("run", "checkpoint", "--quick", "--hosts", labels)
        assert checkpointed.returncode == 0, checkpointed.stdout + checkpointed.stderr
        c = json.loads(iorig("show", "last", "--json", check=True).stdout)["checkpoint"]
        leftovers = [p.name for h in hosts for p in server_dir(tmp_path, h).iterdir()]
    assert leftovers == []  # every host's data set and checkpoints were removed
    assert t["hosts"] == 2 and t["accelerators_total"] == 4
    assert [h["host"] for h in t["per_host"]] == [h.label for h in hosts]
    assert {(a["host"], a["index"]) for a in t["per_accelerator"]} == {
        (h.label, i) for h in hosts for i in (0, 1)
    }
    assert (t["outcome"] == "PASS") == (trained.returncode == 0), (t["outcome"], trained)
    # the checkpoint is every host's shards: 8 processes on each
    assert c["hosts"] == 2 and c["model"]["processes"] == 8
    (first,) = [x for x in c["write"]["checkpoints"] if x["repetition"] == 1]
    assert first["io_bytes"] == c["model"]["checkpoint_bytes"]
    assert {x["slowest"].rsplit("/", 1)[0] for x in c["write"]["checkpoints"]} <= {
        h.label for h in hosts
    }
