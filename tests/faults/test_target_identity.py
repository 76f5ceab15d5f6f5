"""A target replaced under a run: someone removes and recreates the directory
target between or during phases. fio would lay the file out again and the
later read phases would measure a file never prefilled; the run must fail
naming the target instead."""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import sys

import pytest
from tests.conftest import REPO
from tests.waiting import wait_for_phase

pytestmark = pytest.mark.fio


def test_a_directory_target_recreated_mid_run_fails_the_run(scratch, tmp_path):
    db = tmp_path / "results.sqlite"
    target = scratch / "target"
    target.mkdir()
    proc = subprocess.Popen(
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
            "4s",
            "--target",
            f"{target}/",
        ],
        cwd=REPO,
        env=dict(os.environ, IORIG_DB=str(db), COLUMNS="200"),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        # the measured phase reads the prefilled file
        wait_for_phase(db, "randread", io_seconds=1, timeout_s=60, proc=proc)
        shutil.rmtree(target)
        target.mkdir()
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 1, out + err
    with sqlite3.connect(db) as conn:
        status, error = conn.execute("SELECT status, error FROM runs").fetchone()
    assert status == "failed"
    assert "randread" in error and "was removed during the run" in error, error
    assert str(target) in error
