"""Helpers of the fault tests that start a real ``iorig`` and ``kill -9`` it:
what a dead run leaves, and what the next run or ``iorig doctor`` finds."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.conftest import REPO


def start(db: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.Popen:
    """``iorig ARGS`` in a process of its own against ``db``."""
    return subprocess.Popen(
        [sys.executable, "-m", "iorig", *args],
        cwd=REPO,
        env=dict(env or os.environ, IORIG_DB=str(db), COLUMNS="200", NO_COLOR="1"),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def run(
    db: Path, *args: str, env: dict[str, str] | None = None, timeout: float = 120
) -> subprocess.CompletedProcess:
    """``iorig ARGS`` to its end."""
    proc = start(db, *args, env=env)
    try:
        out, err = proc.communicate(timeout=timeout)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def kill9(proc: subprocess.Popen) -> None:
    """``kill -9`` of the iorig process (nothing of it runs its cleanup)."""
    with contextlib.suppress(ProcessLookupError):
        os.kill(proc.pid, signal.SIGKILL)
    proc.communicate(timeout=30)


def run_ids(db: Path) -> list[str]:
    with contextlib.suppress(sqlite3.Error):
        if db.exists():
            with sqlite3.connect(db) as conn:
                return [r[0] for r in conn.execute("SELECT id FROM runs ORDER BY started_at")]
    return []


@contextlib.contextmanager
def loop_device(directory: Path, size_bytes: int = 64 << 20) -> Iterator[Path]:
    """A blank loop device over a file in ``directory``; detached whatever happens."""
    if os.geteuid() != 0 or shutil.which("losetup") is None:
        pytest.skip("loop devices need root and losetup")
    image = directory / "disk.img"
    with open(image, "wb") as f:
        f.truncate(size_bytes)
    done = subprocess.run(
        ["losetup", "--find", "--show", str(image)], capture_output=True, text=True, timeout=30
    )
    if done.returncode != 0:
        pytest.skip(f"this machine does not allow loop devices: {done.stderr.strip()}")
    device = Path(done.stdout.strip())
    try:
        yield device
    finally:
        for _ in range(50):  # a process still closing the device keeps it busy a moment
            if subprocess.run(["losetup", "-d", str(device)], capture_output=True).returncode == 0:
                break
            time.sleep(0.1)
        image.unlink(missing_ok=True)
