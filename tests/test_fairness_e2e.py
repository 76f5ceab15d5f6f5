"""Real runs for the numbers-you-can-defend features: disclosure, the audit's
cache-fit and no-prefill warnings, steady state, preconditioning, data
patterns and access skew."""

from __future__ import annotations

import json
import os
import platform
import sqlite3
import zlib
from pathlib import Path

import pytest

from iorig.run.doctor import SAMPLE_BYTES, measure_data_pattern

pytestmark = pytest.mark.fio


def _show(iorig, *extra: str) -> dict:
    return json.loads(iorig("show", "last", "--json", *extra, check=True).stdout)


def _codes(shown: dict) -> set[str]:
    return {w["code"] for w in shown["run"]["warnings"]}


def test_disclosure_of_a_real_run(iorig, scratch):
    iorig(
        "run",
        "--rw",
        "randread",
        "--duration",
        "1s",
        "--size",
        "8MiB",
        "--target",
        f"{scratch}/",
        check=True,
    )
    text = iorig("show", "last", "--disclosure", check=True).stdout
    disclosure = _show(iorig, "--disclosure")
    assert disclosure["os"]["kernel"] == platform.release() and platform.release() in text
    assert disclosure["cpu"]["logical_cpus"] == os.cpu_count()
    assert disclosure["memory"]["total_bytes"] > 0
    assert disclosure["fio"]["version"].startswith("fio-")
    (target,) = disclosure["targets"]
    fs = target["filesystem"]
    assert fs["type"] and fs["options"] and fs["mountpoint"]
    assert fs["type"] in text and fs["options"] in text
    for dev in target["backing_devices"]:
        for key in (
            "rotational",
            "scheduler",
            "nr_requests",
            "logical_block_size",
            "physical_block_size",
            "write_cache",
            "size_bytes",
        ):
            assert key in dev
    limit = disclosure["interface_limit"]
    if all(not (d.get("link") or {}).get("usable_bytes_per_s") for d in target["backing_devices"]):
        assert limit is None  # a virtual disk has no link: unknown, not invented
        assert "unknown" in iorig("show", "last", check=True).stdout


def test_an_unfair_run_is_flagged_with_advice(iorig, scratch):
    # the findings hang on how the run is set up, not on how long it measures
    # (the fair side: test_audit's before-run test and the quick peak run)
    short = ("--set", "duration=1s", "--set", "warmup=1s", "--set", "size=16MiB")
    unfair = iorig(
        "run",
        "peak",
        "--quick",
        "--set",
        "direct=false",
        "--set",
        "prefill=false",
        *short,
        "--target",
        f"{scratch}/unfair/",
    )
    assert unfair.returncode == 0, unfair.stderr
    codes = _codes(_show(iorig))
    assert {"cache-fit", "no-prefill"} <= codes
    warnings = {w["code"]: w for w in _show(iorig)["run"]["warnings"]}
    assert "direct I/O" in warnings["cache-fit"]["advice"]
    assert "prefill" in warnings["no-prefill"]["advice"]
    assert "page cache" in unfair.stdout and "advice:" in unfair.stdout


STEADY = """\
name: steady-test
title: steady warm-up
parameters:
  warmup: {{type: duration, default: 30s}}
targets:
  data: {{size: 16MiB}}
phases:
  - name: fill
    kind: prefill
    workloads: [{{rw: write, bs: 1MiB, iodepth: 4}}]
  - name: warmup
    kind: warmup
    duration: ${{warmup}}
    until: steady
    steady: {{metric: iops, round: 2s, max_range: {range}%}}
    workloads: [{{rw: randread, bs: 4k, iodepth: 8{pace}}}]
  - name: measure
    kind: measure
    duration: 2s
    workloads: [{{rw: randread, bs: 4k, iodepth: 8}}]
"""


# timing: a paced rate's steadiness (beside the first stage's busiest minute
# it did not converge in 60 s)
@pytest.mark.timing
def test_warmup_until_steady_converges_and_stops_early(iorig, scratch):
    path = scratch / "steady.yaml"
    # paced: steady by construction, however busy the machine (its answer is
    # known: 3,000 IOPS per 2 s round, Poisson noise about 1 %)
    path.write_text(STEADY.format(range=50, pace=", rate_iops: 3000"))
    result = iorig("run", str(path), "--target", str(scratch / "data"))
    assert result.returncode == 0, result.stderr
    (state,) = _show(iorig)["steady_state"]
    assert state["converged"] is True
    assert len(state["rounds"]) >= 5 and state["window_start"] == len(state["rounds"]) - 5
    assert len(state["rounds"]) < 15  # stopped well before the 30 s maximum
    assert "steady after" in result.stdout
    warmup = next(p for p in _show(iorig)["other_phases"] if p["name"] == "warmup")
    assert warmup["status"] == "ok" and warmup["elapsed_s"] < 28


def test_impossible_steady_rule_records_non_convergence(iorig, scratch):
    path = scratch / "steady.yaml"
    path.write_text(STEADY.format(range=20, pace=""))
    result = iorig("run", str(path), "--target", str(scratch / "data"), "--set", "warmup=4s")
    assert result.returncode == 0, result.stderr
    (state,) = _show(iorig)["steady_state"]
    assert state["converged"] is False and len(state["rounds"]) <= 2
    assert "did NOT reach steady state" in result.stdout
    assert "not-steady" in _codes(_show(iorig))


def test_precondition_writes_the_target_twice(iorig, scratch, db_path):
    path = scratch / "pre.yaml"
    path.write_text(
        "name: pre\ntitle: precondition\ntargets:\n  data: {size: 16MiB}\nphases:\n"
        "  - {name: pre, kind: precondition}\n"
        "  - name: m\n    kind: measure\n    duration: 1s\n"
        "    workloads: [{rw: randread, bs: 4k}]\n"
    )
    assert iorig("run", str(path), "--target", str(scratch / "data")).returncode == 0
    pre = next(p for p in _show(iorig)["other_phases"] if p["name"] == "pre")
    assert pre["ios"] * 128 * 1024 == 2 * 16 * 1024 * 1024
    assert "no-prefill" not in _codes(_show(iorig))
    with sqlite3.connect(db_path) as conn:
        blob = conn.execute(
            "SELECT a.data FROM artifacts a JOIN phases p ON p.id = a.phase_id "
            "WHERE p.name = 'pre' AND a.name = 'job.fio'"
        ).fetchone()[0]
    job = zlib.decompress(blob).decode()
    assert "loops=2" in job and "bs=131072" in job and "rw=write" in job


def test_data_pattern_and_skew_reach_fio_and_are_disclosed(iorig, scratch, db_path):
    path = scratch / "skew.yaml"
    path.write_text(
        "name: skew\ntitle: skewed, reducible\ntargets:\n  data: {size: 16MiB}\nphases:\n"
        "  - name: fill\n    kind: prefill\n"
        "    workloads: [{rw: write, bs: 1MiB, compress: 50%, dedupe: 30%}]\n"
        "  - name: m\n    kind: measure\n    duration: 1s\n"
        "    workloads: [{rw: randread, bs: 4k, distribution: 'zipf:1.2'}]\n"
    )
    assert iorig("run", str(path), "--target", str(scratch / "data")).returncode == 0
    with sqlite3.connect(db_path) as conn:
        jobs = {
            name: zlib.decompress(data).decode()
            for name, data in conn.execute(
                "SELECT p.name, a.data FROM artifacts a JOIN phases p ON p.id = a.phase_id "
                "WHERE a.name = 'job.fio'"
            )
        }
    assert "buffer_compress_percentage=50" in jobs["fill"]
    assert "dedupe_percentage=30" in jobs["fill"]
    assert "random_distribution=zipf:1.2" in jobs["m"]
    assert {"reducible-data", "access-skew"} <= _codes(_show(iorig))


def test_doctor_data_measures_real_compressibility(iorig):
    half = iorig("doctor", "--data", "--compress", "50", check=True).stdout
    ratio = float(half.split("compresses it to ")[1].split("%")[0])
    assert 45 <= ratio <= 56
    # the other patterns in this process, on a quarter of the sample (4,096
    # blocks of 4 KiB): fio writes them the same way
    default = measure_data_pattern(0, 0, sample_bytes=SAMPLE_BYTES // 4)
    assert default.sample_bytes == SAMPLE_BYTES // 4 and default.zlib_ratio > 0.98
    assert default.duplicate_fraction < 0.01
    dedupe = measure_data_pattern(0, 30, sample_bytes=SAMPLE_BYTES // 4)
    assert 0.25 <= dedupe.duplicate_fraction <= 0.40


def test_doctor_target_checks_without_writing(iorig, scratch):
    before = sorted(p.name for p in scratch.iterdir())
    out = iorig("doctor", str(scratch), check=True).stdout
    assert "direct I/O engine" in out and "interface limit" in out
    assert sorted(p.name for p in scratch.iterdir()) == before
    shm = Path("/dev/shm")
    if shm.is_dir() and os.access(shm, os.W_OK):
        mem = iorig("doctor", str(shm), check=True).stdout
        if "tmpfs" in mem:
            assert "that is RAM, not storage" in mem
