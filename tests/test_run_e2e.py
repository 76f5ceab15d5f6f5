"""The real command line running real fio on scratch files: a quick peak run,
an ad-hoc run, Ctrl-C in the middle, and bad input that must change nothing."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
import zlib
from pathlib import Path

import pytest
from tests.faults.watch import processes_with
from tests.waiting import wait_for_phase

pytestmark = pytest.mark.fio
REPO = Path(__file__).resolve().parent.parent


def _show(iorig, ref: str = "last") -> dict:
    result = iorig("show", ref, "--json", check=True)
    return json.loads(result.stdout)


def test_quick_peak_run_stores_four_measured_phases(iorig, scratch):
    target = scratch / "x" / "data"  # parent does not exist yet
    result = iorig("run", "peak", "--quick", "--target", str(target), "--size", "32MiB")
    assert result.returncode == 0, result.stderr
    assert "quick: shortened for a fast look" in result.stdout
    shown = _show(iorig)
    assert shown["run"]["status"] == "ok"
    assert shown["run"]["profile"] == "quick"
    # fair as shipped: direct I/O, the target written before it is read
    assert not {"cache-fit", "no-prefill"} & {w["code"] for w in shown["run"]["warnings"]}
    names = [p["name"] for p in shown["phases"]]
    assert names == ["random-read", "sequential-read", "random-write", "sequential-write"]
    for phase in shown["phases"]:
        per_second = phase["per_second"]
        assert per_second["seconds"] >= 3
        assert per_second["min"] <= per_second["median"] <= per_second["max"]
        lat = phase["latency_ns"]
        assert 0 < lat["p50"] <= lat["p99"] <= lat["p99.9"] <= lat["max"] * 1.01
        assert phase["status"] == "ok"
    metrics = {p["name"]: p["metric"] for p in shown["phases"]}
    assert metrics["random-read"] == "iops" and metrics["sequential-write"] == "bytes_per_s"
    assert [p["kind"] for p in shown["other_phases"]] == ["prefill", "warmup"]
    # the user named a file: it stays, sized to the working set
    assert target.stat().st_size == 32 * 1024 * 1024
    runs = iorig("runs", "--json", check=True)
    listing = json.loads(runs.stdout)
    assert listing["format_version"] == 1
    (listed,) = listing["runs"]
    assert listed["status"] == "ok" and listed["id"] == shown["run"]["id"]
    text = iorig("show", "last", check=True).stdout
    for heading in ("median", "maximum", "minimum", "p99.9", "random-read"):
        assert heading in text


def test_adhoc_run_prefills_reads_and_cleans_its_directory_file(iorig, scratch, db_path):
    result = iorig(
        "run",
        "--rw",
        "randread",
        "--bs",
        "4k",
        "--iodepth",
        "8",
        "--jobs",
        "2",
        "--duration",
        "2s",
        "--size",
        "16MiB",
        "--target",
        f"{scratch}/",
    )
    assert result.returncode == 0, result.stdout + result.stderr
    shown = _show(iorig)
    assert [p["kind"] for p in shown["other_phases"]] == ["prefill"]
    (measured,) = shown["phases"]
    assert measured["name"] == "randread" and measured["jobs"] == 2
    assert shown["run"]["parameters"]["iodepth"] == "8"
    assert not (scratch / "iorig-data.dat").exists()  # created in a directory: removed
    with sqlite3.connect(db_path) as conn:
        job = conn.execute(
            "SELECT a.data FROM artifacts a JOIN phases p ON p.id = a.phase_id "
            "WHERE p.kind = 'measure' AND a.name = 'job.fio'"
        ).fetchone()[0]
    text = zlib.decompress(job).decode()
    assert "rw=randread" in text and "iodepth=8" in text and "numjobs=2" in text


def _fio_processes(token: str) -> list[int]:
    return processes_with(b"fio", token.encode())


def test_sigint_in_second_measured_phase_aborts_cleanly(scratch, db_path, tmp_path):
    tmpdir = tmp_path / "iorig-tmp"  # fio's job files live here: lets us find strays
    tmpdir.mkdir()
    env = dict(os.environ, IORIG_DB=str(db_path), TMPDIR=str(tmpdir), COLUMNS="160")
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "iorig",
            "run",
            "peak",
            "--quick",
            "--set",
            "duration=8s",
            "--target",
            str(scratch / "data"),
            "--size",
            "32MiB",
        ],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        # the second measured phase running, and fio has measured some of it
        # (what it measured before the interrupt must be kept), well inside its 8 s
        wait_for_phase(db_path, "sequential-read", io_seconds=1, timeout_s=120, proc=proc)
        assert _fio_processes(str(tmpdir)), "fio should be running the second measured phase"
        interrupted_at = time.monotonic()
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
        took = time.monotonic() - interrupted_at
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, out + err
    assert took < 10, f"exit took {took:.1f} s after SIGINT"
    assert _fio_processes(str(tmpdir)) == []
    shown = json.loads(
        subprocess.run(
            [sys.executable, "-m", "iorig", "show", "last", "--json"],
            cwd=REPO,
            env=env,
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    )
    assert shown["run"]["status"] == "aborted"
    statuses = {p["name"]: p["status"] for p in shown["phases"]}
    assert statuses == {"random-read": "ok", "sequential-read": "aborted"}
    partial = shown["phases"][1]
    assert partial["ios"] > 0  # what fio measured before the interrupt is kept


def test_scenario_with_unknown_field_names_file_line_and_field(iorig, scratch, db_path):
    bad = scratch / "bad.yaml"
    bad.write_text(
        "name: mine\ntitle: Mine\ntargets:\n  data: {size: 16MiB}\nphases:\n"
        "  - name: m\n    kind: measure\n    duration: 2s\n    workloads:\n"
        "      - rw: randread\n        bs: 4k\n        queue_depth: 8\n"
    )
    result = iorig("run", str(bad), "--target", f"{scratch}/")
    assert result.returncode == 2
    assert f"{bad}:12" in result.stderr
    assert "phases[0].workloads[0].queue_depth" in result.stderr
    assert "unknown field" in result.stderr
    assert not db_path.exists()  # nothing written, not even an empty database
    assert list(scratch.iterdir()) == [bad]  # and no data file


def test_scenario_with_bad_unit_names_file_line_and_field(iorig, scratch, db_path):
    bad = scratch / "unit.yaml"
    bad.write_text(
        "name: mine\ntitle: Mine\ntargets:\n  data: {size: 16MiB}\nphases:\n"
        "  - name: m\n    kind: measure\n    duration: 2 weeks\n    workloads:\n"
        "      - {rw: randread, bs: 4k}\n"
    )
    result = iorig("run", str(bad), "--target", f"{scratch}/")
    assert result.returncode == 2
    assert f"{bad}:8" in result.stderr and "phases[0].duration" in result.stderr
    assert "not a duration" in result.stderr
    assert not db_path.exists()


def test_user_scenario_file_runs(iorig, scratch):
    mine = scratch / "mine.yaml"
    mine.write_text(
        "name: mine\ntitle: Two workloads at once\n"
        "parameters:\n  size: {type: size, default: 16MiB}\n"
        "targets:\n  data: {size: '${size}'}\nphases:\n"
        "  - name: fill\n    kind: prefill\n    workloads: [{rw: write, bs: 1MiB, iodepth: 4}]\n"
        "  - name: mixed\n    kind: measure\n    duration: 2s\n    workloads:\n"
        "      - {name: db, rw: randrw, read_pct: 60, bs: 32KiB, iodepth: 4}\n"
        "      - {name: log, rw: write, bs: 8KiB, iodepth: 1, size: 4MiB}\n"
    )
    result = iorig("run", str(mine), "--target", str(scratch / "data"))
    assert result.returncode == 0, result.stdout + result.stderr
    shown = _show(iorig)
    (mixed,) = shown["phases"]
    assert mixed["metric"] == "iops" and mixed["ios"] > 0


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--size", "100TiB"], "not enough free space"),
        (["--set", "random_bs=4KB"], "not a multiple of 512"),
        (["--set", "nosuch=1"], "has no parameter 'nosuch'"),
        (["--bs", "4k"], "has no parameter 'bs'"),
    ],
)
def test_bad_input_is_refused_before_anything_runs(iorig, scratch, db_path, args, message):
    result = iorig("run", "peak", "--quick", "--target", f"{scratch}/", *args)
    assert result.returncode == 2
    assert message in result.stderr
    assert "Traceback" not in result.stderr
    assert not db_path.exists()
    assert list(scratch.iterdir()) == []


def test_existing_foreign_file_is_not_overwritten(iorig, scratch, db_path):
    precious = scratch / "precious.db"
    precious.write_bytes(b"customer data" * 1000)
    result = iorig("run", "peak", "--quick", "--target", str(precious))
    assert result.returncode == 2
    assert "refusing to overwrite" in result.stderr and "--allow-destroy" in result.stderr
    assert precious.read_bytes() == b"customer data" * 1000


def test_missing_fio_is_reported_with_the_fix(scratch, db_path):
    env = dict(os.environ, IORIG_DB=str(db_path), IORIG_FIO=str(scratch / "no-fio-here"))
    done = subprocess.run(
        [sys.executable, "-m", "iorig", "run", "peak", "--quick", "--target", f"{scratch}/"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 2
    assert "fio is not installed" in done.stderr and "apt-get install fio" in done.stderr
    assert not db_path.exists()
