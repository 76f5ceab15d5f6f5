"""Truth 14: AI training (MLPerf Storage-like, docs/methodology.md §11) on a
filesystem whose device reads at a known cap C.

One accelerator consumes d = batch × sample ÷ compute time bytes/s (from the
scenario's definition, the emulated sample size). Storage that delivers C
keeps n accelerators at AU = min(1, C ÷ (n·d)): below the cap they never
wait, above it they share C. The most accelerators a host keeps at or above
the floor is then ⌊C ÷ (floor × d)⌋.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from tests.conftest import run_iorig
from tests.truth.device import Unavailable, mounted

from iorig.scenario.loading import load
from iorig.scenario.training import accelerator_model
from iorig.store import Store

pytestmark = [pytest.mark.fio, pytest.mark.truth]


def _demand(sets: dict[str, str]) -> tuple[float, float]:
    """One accelerator's demand (bytes/s) and the AU floor, from the scenario."""
    model = accelerator_model(load("train", overrides=sets).scenario.training)
    return model.demand_bytes_per_s, model.au_floor


def _args(sets: dict[str, str]) -> list[str]:
    return [f"--set={k}={v}" for k, v in sets.items()]


def _expected(cap: float, demand: float, n: int) -> float:
    return min(1.0, cap / (n * demand))


def test_most_accelerators_is_what_the_cap_feeds(capped, truth_db, tmp_path):
    """resnet50 (a TensorFlow loader: samples pooled from 8 readers)."""
    sets = {
        "workload": "resnet50",
        "scale": "0.01",
        "transfer": "64KiB",
        "epochs": "1",
        "dataset_size": "1MiB",
    }
    demand, floor = _demand(sets)
    # the answer sits half way between 1 and 2: one accelerator asks 74 % of
    # what the device reads, two ask 148 % (AU 0.675)
    cap = 1.5 * floor * demand
    device = capped(size_bytes=256 << 20, read_bps=int(cap))
    try:
        with mounted(device, tmp_path / "fs") as directory:
            done = device.iorig(
                truth_db,
                "run",
                "train",
                *_args(sets),
                "--accelerators",
                "auto",
                "--target",
                f"{directory}/",
                timeout=600,
            )
    except Unavailable as exc:
        pytest.skip(str(exc))
    assert done.returncode == 0, done.stdout + done.stderr
    search = json.loads(device.iorig(truth_db, "show", "last", "--json").stdout)["search"]
    tried = {p["accelerators"]: p for p in search["points"]}
    print(
        f"truth 14: resnet50 demand {demand / 1e6:.3f} MB/s per accelerator, cap "
        f"{cap / 1e6:.3f} MB/s; AU per count "
        + ", ".join(
            f"{n}: {'/'.join(f'{a:.3f}' for a in p['au'])} (expected "
            f"{_expected(cap, demand, n):.3f})"
            for n, p in sorted(tried.items())
        )
        + f"; most {search['most']}"
    )
    assert abs(search["most"] - math.floor(cap / (floor * demand))) <= 1
    assert set(tried) == {1, 2}
    for n, point in tried.items():
        for au in point["au"]:
            assert au == pytest.approx(_expected(cap, demand, n), abs=0.05), (n, point)


def _model(sets: dict[str, str], n: int):
    """The accelerator model of the train scenario with ``sets`` on n accelerators."""
    return accelerator_model(
        load("train", overrides=sets | {"accelerators": str(n)}).scenario.training
    )


def _pytorch_au(sets: dict[str, str], cap: float, n: int) -> float:
    """AU of n accelerators whose PyTorch loaders share a device reading
    ``cap`` (docs/methodology.md §11). Each of an accelerator's W workers
    builds whole batches, so its batches arrive W at a time, every W·T
    (T = n × batch bytes ÷ cap); the first step of the epoch is left out,
    and the rest of its group is there already. With G groups an epoch:
    AU = (G·W − 1)·c ÷ ((G − 1)·W·T + (W − 1)·c); as G grows, c ÷ T."""
    model = _model(sets, n)
    c, width = model.compute_s, model.reader_threads
    per_step = n * model.batch_bytes / cap
    if per_step <= c:
        return 1.0
    groups = model.steps_per_epoch // width
    return (groups * width - 1) * c / ((groups - 1) * width * per_step + (width - 1) * c)


def _pytorch_au_most(sets: dict[str, str], rate: float, n: int) -> float:
    """The most AU n accelerators can have when their PyTorch loaders share a
    device reading ``rate``, however the batches' arrivals fall: the W
    workers of each hold at most W batches read ahead when the first step
    ends, and every later batch comes from the device at ``rate``, so the
    last step ends no sooner than (S − 1 − W)·T + c after the first
    (S steps an epoch, T = n × batch bytes ÷ rate)."""
    model = _model(sets, n)
    c, steps = model.compute_s, model.steps_per_epoch
    per_step = n * model.batch_bytes / rate
    if per_step <= c:
        return 1.0
    return min(1.0, (steps - 1) * c / ((steps - 1 - model.reader_threads) * per_step + c))


def test_accelerators_past_the_cap_share_it(capped, truth_db, tmp_path):
    """unet3d (a PyTorch loader: each batch from one of 4 workers) at twice
    what the device reads, and at half of it. 32 MiB: 20 steps an epoch,
    5 groups of the workers' batches, not 2, so that the first group (the
    model's transient, which at 8 MiB spread the AU from 0.636 to 0.69 on
    the same device) weighs less; the AU expected lies between the model's
    and the most the device allows, at the rates its counters show."""
    sets = {"workload": "unet3d", "scale": "0.001", "epochs": "1", "dataset_size": "32MiB"}
    demand, _ = _demand(sets)
    expected = _pytorch_au(sets, demand, 2)
    assert expected < 0.7  # two accelerators need twice what the device reads
    cap = demand
    device = capped(size_bytes=256 << 20, read_bps=int(cap))
    runs = {}
    try:
        with mounted(device, tmp_path / "fs") as directory:
            for n in (2,):  # at the cap
                with device.sampling() as samples:
                    done = device.iorig(
                        truth_db,
                        "run",
                        "train",
                        *_args(sets),
                        "--accelerators",
                        str(n),
                        "--target",
                        f"{directory}/",
                        timeout=600,
                    )
                # 3: the run's verdict is FAIL (the accelerators fell short)
                assert done.returncode == 3, done.stdout + done.stderr
                doc = json.loads(device.iorig(truth_db, "show", "last", "--json").stdout)
                runs[n] = doc["training"][0]
                with Store(truth_db) as store:
                    train = {p.name: p for p in store.load_run(doc["run"]["id"]).phases}["train"]
                # the device's rate over the phase, from its own counters: no
                # less than its bytes inside the phase over the whole phase, no
                # more than its bytes around it over the span it was reading,
                # less a sampling interval at each end
                least, most = samples.bounds("read", train.started_at, train.ended_at)
                first, last = samples.active("read", train.started_at, train.ended_at) or (0, 0)
                rates = (
                    least / (train.ended_at - train.started_at),
                    most / max(last - first - 2 * samples.interval_s, samples.interval_s),
                )
            device.cap(read_bps=int(4 * demand))
            done = device.iorig(
                truth_db, "run", "train", *_args(sets), "--accelerators", "2",
                "--target", f"{directory}/", timeout=600,
            )  # fmt: skip
            assert done.returncode == 0, done.stdout + done.stderr
            runs["2 under"] = json.loads(device.iorig(truth_db, "show", "last", "--json").stdout)[
                "training"
            ][0]
    except Unavailable as exc:
        pytest.skip(str(exc))
    # at the device's least rate with batches arriving W at a time (the
    # model's, the most waiting), to its most rate with only the device
    # holding the accelerators back (arrivals spread evenly by a busy CPU
    # gave 0.561 where the model at the device's most said 0.548)
    low, high = _pytorch_au(sets, rates[0], 2), _pytorch_au_most(sets, rates[1], 2)
    print(
        f"truth 14: device {rates[0] / 1e6:.3f} to {rates[1] / 1e6:.3f} MB/s: AU {low:.3f} "
        f"to {high:.3f}; unet3d demand {demand / 1e6:.3f} MB/s per accelerator, expected AU at the "
        f"cap {expected:.3f}; "
        + ", ".join(f"{k}: AU {t['au_mean']:.3f} {t['outcome']}" for k, t in runs.items())
    )
    assert low <= runs[2]["au_mean"] <= high, (low, runs[2]["au_mean"], high, rates)
    assert runs[2]["outcome"] == "FAIL"
    assert "epoch 1" in runs[2]["why"]
    assert runs["2 under"]["au_mean"] == pytest.approx(1.0, abs=0.05)
    assert runs["2 under"]["outcome"] == "PASS"


def _warnings(doc: dict, code: str) -> list[dict]:
    return [w for w in doc["run"]["warnings"] if w["code"] == code and w["phase"] == "train"]


def test_a_data_set_the_page_cache_holds_is_flagged_unless_read_direct(capped, truth_db, tmp_path):
    """MLPerf's cache rule: 2 MiB of cosmoflow read through the page cache on a
    device reading half what one accelerator needs breaks it, and the audit
    says so; read with direct I/O, nothing is flagged. Either way the
    accelerators get what the device gives: the data set was written back
    before training and fio drops each file's cached pages as it opens it,
    every epoch (docs/methodology.md §11)."""
    # cosmoflow: 3.5 ms steps, so 100 of them an epoch take under a second
    sets = {"workload": "cosmoflow", "scale": "0.01", "epochs": "2", "dataset_size": "2MiB"}
    demand, _ = _demand(sets)
    device = capped(size_bytes=256 << 20, read_bps=int(demand / 2))
    docs = {}
    try:
        with mounted(device, tmp_path / "fs") as directory:
            for direct in ("false", "true"):
                device.iorig(
                    truth_db, "run", "train", *_args(sets | {"direct": direct}),
                    "--target", f"{directory}/", timeout=600,
                )  # fmt: skip
                docs[direct] = json.loads(device.iorig(truth_db, "show", "last", "--json").stdout)
    except Unavailable as exc:
        pytest.skip(str(exc))
    cached, direct = docs["false"], docs["true"]
    au = {k: [e["au"] for e in d["training"][0]["epochs"]] for k, d in docs.items()}
    print(f"truth 14: AU per epoch, buffered {au['false']}, direct {au['true']}")
    (flag,) = _warnings(cached, "cache-fit")
    assert "5 × the RAM" in flag["message"] and "direct" in flag["advice"]
    assert _warnings(direct, "cache-fit") == []
    # the device feeds half an accelerator, whatever the page cache held
    assert all(a < 0.75 for a in au["true"] + au["false"])


@pytest.mark.serial
def test_a_load_generator_on_one_cpu_is_named_as_the_limit(truth_db, tmp_path):
    """Sixteen cosmoflow accelerators (808 MB/s each, in 64 KiB reads) read
    from memory by fio pinned to one CPU: the accelerators starve, and the
    verdict and the audit say the load generator, not the storage, was the
    limit. Ten epochs (3.4 s of I/O) so that iorig measures fio's CPU (a
    1.1 s phase had no stretch of 0.5 s with the same processes, and fio's
    per-job figures, 0.41 to 0.82 of the CPU, missed the limit once in two
    soak rounds), and what other processes took of that CPU with it."""
    if not Path("/dev/shm").is_dir() or shutil.which("taskset") is None:
        pytest.skip("needs /dev/shm and taskset")
    directory = Path(tempfile.mkdtemp(prefix="iorig-gen-", dir="/dev/shm"))
    try:
        done = subprocess.run(
            ["taskset", "-c", "0", sys.executable, "-m", "iorig", "run", "train",
             "--set=workload=cosmoflow", "--set=accelerators=16", "--set=direct=false",
             "--set=transfer=64KiB", "--set=dataset_size=1GiB", "--set=epochs=10",
             "--target", f"{directory}/"],
            capture_output=True, text=True, timeout=600,
            env=dict(os.environ, IORIG_DB=str(truth_db), COLUMNS="200"),
        )  # fmt: skip
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    assert done.returncode == 3, done.stdout + done.stderr  # FAIL
    doc = json.loads(run_iorig(truth_db, "show", "last", "--json").stdout)
    (limit,) = _warnings(doc, "generator-limit")
    print(f"truth 14: {doc['verdict']}; {limit['message']}")
    assert "not the storage" in limit["message"] and "1 CPU" in limit["message"]
    (phase,) = [p for p in doc["phases"] if p["name"] == "train"]
    gen = phase["generator_cpu"]
    assert gen is not None, phase  # measured, not fio's own figures
    # fio is all that runs on that CPU besides iorig's supervision (0.01 to
    # 0.03 of it): the CPU's own busy time (/proc/stat) says it was full, and
    # fio's measured share is nearly all of it. Its processes' stat alone,
    # lagging on kernel 6.18, read 0.53 to 0.61 with 0.4 to 0.5 "others".
    assert gen["cpus_busy"] + gen["others_cpu_s"] / gen["wall_s"] >= 0.9, gen
    assert gen["cpus_busy"] >= 0.8, gen
    assert "measured over all its processes" in limit["message"]
    t = doc["training"][0]
    assert min(e["au"] for e in t["epochs"]) < t["model"]["au_floor"]
    assert doc["verdict"].startswith("FAIL") and "load generator was the limit" in doc["verdict"]
