"""Ctrl-C during the engine probe. The probe is a fio like any other: in a
process group of its own that iorig empties on the way out. Here the probe
is made to hang and to ignore SIGINT and SIGTERM (a fio wrapper that, for the
probe's job file, waits on a child that ignores them too), so only iorig
emptying the group ends it. The first attempt starts iorig with SIGINT
ignored, as a shell script's background job inherits it."""

from __future__ import annotations

import os
import shutil
import signal
import stat
import subprocess
import sys
import time

import pytest
from tests.conftest import REPO
from tests.faults.watch import processes_with

# Ctrl-C must end a run within seconds: beside the CPU-hungry tests a
# healthy shutdown took 5.4 s against the 5 s bound, so among timing tests
pytestmark = [pytest.mark.fio, pytest.mark.timing]


def _with_marker(marker: str) -> list[int]:
    return processes_with(marker.encode())


def _ignore_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def test_ctrl_c_during_a_hung_probe_leaves_no_process(tmp_path, scratch):
    fio = shutil.which("fio")
    assert fio
    marker = f"0.000{os.getpid()}"  # sleep adds it up: a unique command line
    wrapper = tmp_path / "fio"
    wrapper.write_text(
        "#!/bin/sh\n"
        'for a in "$@"; do case "$a" in *.fio) if grep -q "^\\[probe\\]" "$a"; then\n'
        f"  trap '' INT TERM; sleep 300 {marker} & wait; fi;; esac; done\n"
        f'exec {fio} "$@"\n'
    )
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IEXEC)
    target = scratch / "target"
    target.mkdir()
    for attempt in range(3):
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
                "--fio",
                str(wrapper),
                "--target",
                f"{target}/",
            ],
            # faulthandler: a hang below dumps where every thread of iorig is
            cwd=REPO,
            env=dict(os.environ, IORIG_DB=str(tmp_path / "r.sqlite"), PYTHONFAULTHANDLER="1"),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            # first as a background job of a script starts it: SIGINT ignored
            preexec_fn=_ignore_sigint if attempt == 0 else None,
        )
        try:
            deadline = time.monotonic() + 30
            while not _with_marker(marker):
                assert time.monotonic() < deadline and proc.poll() is None, proc.communicate()
                time.sleep(0.02)
            time.sleep(0.1 * attempt)
            sent = time.monotonic()
            proc.send_signal(signal.SIGINT)
            try:
                out, err = proc.communicate(timeout=30)
            except subprocess.TimeoutExpired:
                proc.send_signal(signal.SIGABRT)
                out, err = proc.communicate(timeout=10)
                raise AssertionError(f"attempt {attempt}: hung after Ctrl-C:\n{err}") from None
            took = time.monotonic() - sent
        finally:
            if proc.poll() is None:
                proc.kill()
            left = _with_marker(marker)
            for pid in left:
                os.kill(pid, signal.SIGKILL)
        assert proc.returncode != 0, out + err
        assert left == [], f"attempt {attempt}: the probe outlived iorig"
        # the probe's stop steps (SIGINT 1 s, SIGTERM 0.5 s, then SIGKILL:
        # runner._LEAVING) and iorig's exit: 1.7 s here. A stressed soak took
        # 6.2 s when the stop also waited for the killed sleep's zombie,
        # which this container's init reaps late (tests/test_process_groups.py)
        assert took < 6.0, f"attempt {attempt}: Ctrl-C took {took:.1f} s"
        assert list(target.iterdir()) == [], "an interrupted probe leaves no file behind"
