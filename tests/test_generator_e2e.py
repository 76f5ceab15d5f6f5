"""The load generator's own ceiling on real fio: `iorig doctor --generator`
against bare fio's null engine, and a run on the null engine marked in every
report as touching no storage."""

from __future__ import annotations

import json
import re
import subprocess

import pytest

pytestmark = pytest.mark.fio


def _si(text: str) -> float:
    number, suffix = re.fullmatch(r"([\d.]+)([KMG]?)", text).groups()
    return float(number) * {"": 1, "K": 1e3, "M": 1e6, "G": 1e9}[suffix]


# the generator's ceiling is CPU: beside other tests it read 1.18 M IOPS
# against bare fio's 3.26 M measured a moment later
@pytest.mark.serial
def test_doctor_generator_reports_what_fios_null_engine_generates(iorig):
    out = iorig("doctor", "--generator", "--jobs", "2", "--iodepth", "4", check=True).stdout
    flat = " ".join(out.split())
    assert "2 jobs × QD 4, randread 4KiB, on its null engine" in flat
    shown = _si(re.search(r"generates ([\d.]+[KMG]?) IOPS", flat).group(1))
    # the truth: bare fio's null engine with the same jobs and depth, here and now
    bare = subprocess.run(
        [
            "fio",
            "--name=n",
            "--ioengine=null",
            "--size=1g",
            "--rw=randread",
            "--bs=4k",
            "--numjobs=2",
            "--iodepth=4",
            "--norandommap",
            "--time_based",
            "--runtime=2",
            "--output-format=json",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    expected = sum(j["read"]["iops"] for j in json.loads(bare.stdout)["jobs"])
    assert 0.5 * expected <= shown <= 2 * expected, (shown, expected)
    bad = iorig("doctor", "--generator", "--bs", "4x")
    assert bad.returncode == 2 and "--bs" in bad.stderr and "unknown size unit" in bad.stderr


def test_a_null_engine_run_is_marked_as_touching_no_storage_everywhere(iorig, scratch, tmp_path):
    target = scratch / "null"
    done = iorig(
        "run",
        "--rw",
        "randread",
        "--engine",
        "null",
        "--duration",
        "1s",
        "--size",
        "16MiB",
        "--target",
        f"{target}/",
        "--label",
        "null",
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "runs fio's null engine: no storage is touched" in " ".join(done.stdout.split())
    for fmt in ("md", "json", "html"):
        out = tmp_path / f"r.{fmt}"
        iorig("report", "last", "--format", fmt, "--output", str(out), check=True)
        assert "no storage is touched" in out.read_text(), fmt
    again = iorig(
        "run",
        "--rw",
        "randread",
        "--engine",
        "null",
        "--duration",
        "1s",
        "--size",
        "16MiB",
        "--target",
        f"{target}/",
    )
    assert again.returncode == 0, again.stdout + again.stderr
    compared = iorig("compare", "null", "last", check=True).stdout
    assert "null-engine" in compared  # a comparison names it in each run's audit line
