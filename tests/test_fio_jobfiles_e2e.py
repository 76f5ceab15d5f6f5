"""fio's own example job files run by ``iorig run`` with the real fio on a
small scratch file (fio's examples/fio-rand-read.fio, fio-seq-write.fio and
fio-rand-RW.fio, copied into tests/data/fio-examples/ with their commit),
shrunk with --size and --set duration; and trims of a file (fio's falloc
engine punching holes), a direction of their own in the figures."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tests.conftest import run_iorig

pytestmark = pytest.mark.fio

EXAMPLES = Path(__file__).resolve().parent / "data" / "fio-examples"


@pytest.mark.parametrize(
    ("name", "metric", "rendered"),
    [
        ("fio-rand-read", "iops", ("rw=randread", "bs=4096", "numjobs=1")),
        ("fio-seq-write", "bytes_per_s", ("rw=write", "bs=262144", "numjobs=1")),
        ("fio-rand-RW", "iops", ("rw=randrw", "rwmixread=60", "numjobs=4")),
    ],
)
def test_fios_examples_run_as_iorig_phases(name, metric, rendered, scratch, iorig):
    job = EXAMPLES / f"{name}.fio"
    target = scratch / f"{name}.dat"
    done = iorig(
        "run", str(job), "--target", str(target), "--size", "16MiB", "--set", "duration=2s"
    )
    assert done.returncode == 0, done.stdout + done.stderr
    doc = json.loads(iorig("show", "last", "--json", check=True).stdout)
    assert doc["run"]["origin"] == f"fio:{job}"
    assert doc["run"]["targets"][0]["path"] == str(target)
    (phase,) = doc["phases"]
    assert (phase["name"], phase["status"], phase["metric"]) == ("file1", "ok", metric)
    assert phase["ios"] > 0 and phase["per_second"]["seconds"] >= 1
    jobs = iorig("show", "last", "--jobs", check=True).stdout
    assert job.read_text() in jobs  # the file as given, stored with the run
    as_run = jobs[jobs.index("; phase file1") :].splitlines()
    for line in (
        "ioengine=libaio",
        "iodepth=16",
        "direct=0",
        "time_based=1",
        "runtime=2000ms",
        f"filename={target}",
        *rendered,
    ):
        assert line in as_run, line


def test_trims_of_a_file_punch_holes_and_are_their_own_direction(scratch, iorig):
    target = scratch / "trim.dat"
    done = iorig(
        "run",
        "--rw",
        "randtrim",
        "--bs",
        "64k",
        "--iodepth",
        "4",
        "--duration",
        "2s",
        "--size",
        "16MiB",
        "--target",
        str(target),
    )
    assert done.returncode == 0, done.stdout + done.stderr
    doc = json.loads(iorig("show", "last", "--json", check=True).stdout)
    assert [p["kind"] for p in doc["other_phases"]] == ["prefill"]  # written before trimmed
    (phase,) = doc["phases"]
    (trim,) = phase["directions"]
    assert trim["ddir"] == "trim" and trim["ios"] == phase["ios"] > 0
    assert {s["ddir"] for s in doc["samples"] if s["phase"] == "randtrim"} >= {"trim"}
    shown = iorig("show", "last", "--jobs", check=True).stdout
    assert "By direction" in shown and "ioengine=falloc" in shown.splitlines()


def test_a_job_files_own_filename_is_the_target_with_iorigs_checks(scratch, refused, db_path):
    """Without --target the file's filename= is the target, checked as any
    target is: another's data is not overwritten, /proc is no storage."""
    theirs = scratch / "theirs.dat"
    theirs.write_bytes(b"precious" * 512)
    job = scratch / "own.fio"
    timed = "rw=randwrite\nsize=8m\ntime_based\nruntime=1\n"
    for filename, fragment in (
        (theirs, "refusing to overwrite"),
        ("/proc/self/status", "kernel's proc filesystem"),
    ):
        job.write_text(f"[job]\nfilename={filename}\n{timed}")
        done = refused("run", str(job))
        assert done.returncode == 2 and fragment in done.stderr, done.stdout + done.stderr
    assert theirs.read_bytes() == b"precious" * 512 and not db_path.exists()
    mine = scratch / "new" / "mine.dat"
    job.write_text(f"[job]\nfilename={mine}\n{timed}")
    done = run_iorig(db_path, "run", str(job))
    assert done.returncode == 0, done.stdout + done.stderr
    shown = json.loads(run_iorig(db_path, "show", "last", "--json", check=True).stdout)
    assert shown["run"]["targets"][0]["path"] == str(mine) and mine.stat().st_size == 8 << 20
