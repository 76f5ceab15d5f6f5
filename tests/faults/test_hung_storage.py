"""Hung storage: a filesystem frozen (``fsfreeze``) under a size-based phase.

A prefill has no runtime, so nothing used to bound it: a frozen filesystem
kept a run ``running`` with no end. It now has a deadline from its bytes at
a floor rate (``--min-rate``); past it the phase fails, the run ends
``failed`` with the reason, and removing the data file from the frozen
filesystem is a warning, not a hang.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from tests.conftest import REPO
from tests.truth.device import Unavailable, capped_device, mechanism, mounted
from tests.waiting import wait_for_phase, wait_until

pytestmark = pytest.mark.fio


def _status(db: Path) -> tuple[str, str | None] | None:
    with contextlib.suppress(sqlite3.Error):
        if db.exists():
            with sqlite3.connect(db) as conn:
                return conn.execute("SELECT status, error FROM runs").fetchone()
    return None


def _written_sectors(device) -> int:
    """Sectors of 512 bytes the device has written (Documentation/block/stat.rst)."""
    return int(Path(f"/sys/block/{device.path.name}/stat").read_text().split()[6])


def test_a_frozen_filesystem_under_a_prefill_fails_the_run_in_bounded_time(scratch, tmp_path):
    try:
        mechanism()
    except Unavailable as exc:
        if os.environ.get("IORIG_REQUIRE_TRUTH"):
            pytest.fail(str(exc))
        pytest.skip(str(exc))
    db = tmp_path / "results.sqlite"
    with contextlib.ExitStack() as stack:
        device = stack.enter_context(capped_device(scratch, 96 << 20))
        mnt = stack.enter_context(mounted(device, tmp_path / "mnt"))
        # 16 MiB at 4 MiB/s: the prefill runs for 4 s, long enough to freeze under it
        device.cap(write_bps=4 << 20)
        env = dict(os.environ, IORIG_DB=str(db), COLUMNS="200")
        before = _written_sectors(device)
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
                "--engine",
                "psync",
                "--min-rate",
                "64MiB/s",
                "--target",
                f"{mnt}/",
            ],
            cwd=REPO,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        stack.callback(lambda: proc.poll() is None and proc.kill())
        # the prefill writing: the freeze comes under it, not before fio
        # starts. A prefill runs without fio's status, so no live second
        # tells: the device's own count of written sectors does (a MiB past
        # what it had written as the run began), within the fill phase
        wait_for_phase(db, "fill", timeout_s=60, proc=proc)
        wait_until(
            lambda: proc.poll() is None and _written_sectors(device) >= before + 2048,
            60,
            "the prefill writing a MiB to the device",
        )
        assert proc.poll() is None, proc.communicate()
        subprocess.run(["fsfreeze", "-f", str(mnt)], check=True, timeout=30)
        frozen_at = time.monotonic()
        thaw = stack.enter_context(contextlib.ExitStack())
        thaw.callback(subprocess.run, ["fsfreeze", "-u", str(mnt)], timeout=30)
        # deadline: 2 × 16 MiB at 64 MiB/s + 10 s start-up; then fio gets 4 s
        while (found := _status(db)) is not None and found[0] == "running":
            assert time.monotonic() - frozen_at < 60, "the run is still running 60 s later"
            time.sleep(0.2)
        ended_after = time.monotonic() - frozen_at
        thaw.close()
        out, err = proc.communicate(timeout=60)
    assert found is not None
    status, error = found
    assert status == "failed", (out, err)
    assert "'fill'" in (error or "") and "did not finish in time" in (error or ""), error
    assert ended_after < 30, f"the run ended {ended_after:.0f} s after the freeze"
    assert proc.returncode == 1, out + err
    assert "Traceback" not in err
