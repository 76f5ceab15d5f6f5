"""The queue depth fio really keeps (``iorig.model.depth``): the rule, and
real fio's own json+ depth distribution and Little's law against it."""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest

from iorig.analyze.knee import MAX_RATIO
from iorig.model.depth import honoured, kept_iodepth, rounds_iodepth


@pytest.mark.parametrize(
    ("engine", "version", "asked", "kept"),
    [
        ("io_uring", "fio-3.33", 1, 1),
        ("io_uring", "fio-3.33", 2, 2),
        ("io_uring", "fio-3.33", 3, 4),
        ("io_uring", "fio-3.33", 5, 8),
        ("io_uring", "fio-3.38", 11, 16),
        ("io_uring", "fio-3.33", 16, 16),
        ("io_uring", "fio-3.39", 3, 3),  # the ring alone is rounded since 3.39
        ("io_uring", "fio-3.41-12-g0123abc", 11, 11),
        ("libaio", "fio-3.33", 3, 3),
        ("psync", "fio-3.33", 3, 3),
        ("io_uring", "unknown", 3, 3),  # not assumed
    ],
)
def test_the_depth_fio_keeps(engine, version, asked, kept):
    assert kept_iodepth(engine, version, asked) == kept
    assert honoured(engine, version, asked) is (asked == kept)


def test_only_io_uring_before_3_39_rounds():
    assert rounds_iodepth("io_uring", "fio-3.33")
    assert not rounds_iodepth("io_uring", "fio-3.39")
    assert not rounds_iodepth("libaio", "fio-3.33")


def _bucket(depth: int) -> str:
    """json+'s iodepth_level key counting submissions at this depth."""
    if depth >= 64:
        return ">=64"
    return str(1 << (depth.bit_length() - 1))


@pytest.mark.fio
@pytest.mark.parametrize(
    ("engine", "asked"), [("io_uring", 3), ("io_uring", 4), ("io_uring", 5), ("libaio", 3)]
)
def test_real_fio_keeps_the_depth_the_rule_says(scratch, engine, asked):
    fio = shutil.which("fio") or "fio"
    version = subprocess.run([fio, "--version"], capture_output=True, text=True).stdout.strip()
    done = subprocess.run(
        [
            fio,
            "--name=depth",
            f"--filename={scratch / 'depth.dat'}",
            "--size=16M",
            "--rw=randread",
            "--bs=4k",
            f"--ioengine={engine}",
            f"--iodepth={asked}",
            "--direct=1",
            "--runtime=1",
            "--time_based",
            "--output-format=json+",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    if done.returncode != 0 and "not loadable" in done.stdout + done.stderr:
        pytest.skip(f"{engine} is not available here: {done.stderr.strip()}")
    assert done.returncode == 0, done.stderr
    (job,) = json.loads(done.stdout[done.stdout.index("{") :])["jobs"]
    kept = kept_iodepth(engine, version, asked)
    # submissions: some at the kept depth's bucket, none above it
    levels = job["iodepth_level"]
    assert levels[_bucket(kept)] > 1.0, levels
    buckets = ["1", "2", "4", "8", "16", "32", ">=64"]
    above = buckets[buckets.index(_bucket(kept)) + 1 :]
    assert all(levels[b] == 0 for b in above), levels
    # Little's law: never more than kept in flight; more than asked (beyond
    # the knee analysis' margin) exactly when the engine rounds
    read = job["read"]
    in_flight = read["iops"] * read["lat_ns"]["mean"] / 1e9
    print(f"{engine} iodepth={asked} ({version}): kept {kept}, {in_flight:.2f} in flight, {levels}")
    assert in_flight <= kept * 1.01
    assert (in_flight > asked * MAX_RATIO) is (kept > asked)
