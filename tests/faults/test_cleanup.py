"""Cleanup that cannot be done: the target directory turned unwritable
mid-run (here immutable, ``chattr +i``, which stops even root; a filesystem
remounted read-only behaves the same for unlink). Removing the data file
used to end the run with a traceback; now it is a warning and the run's
status and figures stay."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest
from tests.conftest import REPO
from tests.faults.watch import wait_stored

pytestmark = pytest.mark.fio


def test_a_target_that_cannot_be_cleaned_up_is_a_warning_not_a_failure(scratch, tmp_path):
    if shutil.which("chattr") is None or os.geteuid() != 0:
        pytest.skip("needs root and chattr")
    db = tmp_path / "results.sqlite"
    target = scratch / "target"
    target.mkdir()
    env = dict(os.environ, IORIG_DB=str(db), COLUMNS="200")
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
            "2s",
            "--target",
            f"{target}/",
        ],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        wait_stored(proc, db, "phases")  # the data file exists and the measured phase runs
        made = subprocess.run(["chattr", "+i", str(target)], capture_output=True, text=True)
        if made.returncode != 0:
            pytest.skip(f"chattr +i is not supported here: {made.stderr.strip()}")
        out, err = proc.communicate(timeout=60)
    finally:
        subprocess.run(["chattr", "-i", str(target)], check=False)
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, out + err
    assert "Traceback" not in err
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
    assert shown["run"]["status"] == "ok"
    warnings = [w for w in shown["run"]["warnings"] if w["code"] == "cleanup"]
    assert warnings and "could not remove" in warnings[0]["message"], shown["run"]["warnings"]
    assert [p["status"] for p in shown["phases"]] == ["ok"]
    assert (target / "iorig-data.dat").exists()  # left for the user, who is told
