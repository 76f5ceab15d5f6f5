"""No space for fio's results: TMPDIR (where iorig keeps fio's JSON and logs
while a phase runs) too small at the start, or filled up during a phase.
With a full TMPDIR the phase used to be stored ``ok`` with its logs cut short
(fewer seconds than it ran) or fail as "fio wrote no JSON result (fio
printed no error message)"; the cause is named instead."""

from __future__ import annotations

import contextlib
import os
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.conftest import REPO
from tests.faults.watch import stored, wait_stored

pytestmark = pytest.mark.fio


@contextlib.contextmanager
def _tmpfs(where: Path, size: str) -> Iterator[Path]:
    where.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)],
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs: {done.stderr.strip()}")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


def _iorig(db: Path, tmpdir: Path, target: Path, duration: str) -> subprocess.Popen:
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "iorig",
            "run",
            "--rw",
            "randread",
            "--size",
            "16MiB",
            "--duration",
            duration,
            "--target",
            f"{target}/",
        ],
        cwd=REPO,
        env=dict(os.environ, IORIG_DB=str(db), TMPDIR=str(tmpdir), COLUMNS="200"),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_a_tmpdir_without_room_is_refused_before_anything_is_written(scratch, tmp_path):
    target = scratch / "target"
    target.mkdir()
    db = tmp_path / "results.sqlite"
    with _tmpfs(tmp_path / "tiny", "96k") as tiny:
        proc = _iorig(db, tiny, target, "2s")
        out, err = proc.communicate(timeout=60)
    assert proc.returncode == 2, out + err
    assert "TMPDIR" in err and "free" in err, out + err
    assert "Traceback" not in err
    assert list(target.iterdir()) == []
    assert stored(db, "runs") == 0


def test_a_tmpdir_filled_during_a_phase_fails_it_naming_tmpdir(scratch, tmp_path):
    target = scratch / "target"
    target.mkdir()
    db = tmp_path / "results.sqlite"
    with _tmpfs(tmp_path / "small", "24m") as small:
        proc = _iorig(db, small, target, "4s")
        try:
            wait_stored(proc, db, "runs")  # the run has started: fill its TMPDIR
            with open(small / "filler", "wb", buffering=0) as f, contextlib.suppress(OSError):
                while True:
                    f.write(bytes(1 << 16))
            out, err = proc.communicate(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
    assert proc.returncode == 1, out + err
    with sqlite3.connect(db) as conn:
        status, error = conn.execute("SELECT status, error FROM runs").fetchone()
    assert status == "failed" and "no space left" in error and "TMPDIR" in error, error


def _limited(size_bytes: int):
    """What a shell's ``ulimit -f`` does, for the child only."""
    import resource

    return lambda: resource.setrlimit(resource.RLIMIT_FSIZE, (size_bytes, size_bytes))


def test_a_target_past_the_file_size_limit_is_refused_before_anything_is_written(scratch, tmp_path):
    # under ulimit -f, fio's layout used to be killed by SIGXFSZ part way
    # (issue 48): refused first, naming the limit, with nothing written
    db = tmp_path / "r.sqlite"
    done = subprocess.run(
        [sys.executable, "-m", "iorig", "--db", str(db), "run", "--rw", "randread",
         "--size", "16MiB", "--duration", "1s", "--target", f"{scratch}/"],
        cwd=REPO, capture_output=True, text=True, timeout=60,
        preexec_fn=_limited(8 << 20),
    )  # fmt: skip
    assert done.returncode == 2, done.stdout + done.stderr
    said = " ".join(done.stderr.split())
    assert "past this shell's file-size limit (ulimit -f) of 8MiB" in said, said
    assert "ulimit -f unlimited" in said and "Traceback" not in said
    assert stored(db, "runs") == 0 and list(scratch.iterdir()) == []
