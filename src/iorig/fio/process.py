"""The one way iorig starts fio: in a process group of its own, which iorig
empties on every exit path.

Every fio process (a phase, an engine probe, a client driving servers, a
server) starts in a new session: a terminal's Ctrl-C reaches iorig only, and
iorig decides how fio stops. fio also gets SIGTERM if the thread that
started it dies (``PR_SET_PDEATHSIG``). Stopping signals the whole group,
not only fio's parent, until no process of the group is left: fio's job
workers are children in the same group and keep doing I/O if only the
parent is gone.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path
from typing import IO

_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:  # runs in the child between fork and exec
    with contextlib.suppress(Exception):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


def spawn(
    command: Sequence[str],
    cwd: Path | str,
    *,
    stdout: IO[bytes] | int | None = subprocess.DEVNULL,
    stderr: IO[bytes] | int | None = subprocess.DEVNULL,
) -> subprocess.Popen:
    """Start ``command`` as the leader of a new session and process group."""
    return subprocess.Popen(
        list(command),
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        stdout=stdout,
        stderr=stderr,
        start_new_session=True,
        preexec_fn=_die_with_parent,
    )


def group_alive(pgid: int) -> bool:
    """Whether any process of the group is left (zombies of ours aside)."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def signal_group(pgid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def stop_group(
    proc: subprocess.Popen,
    steps: Sequence[tuple[int, float]] = (
        (signal.SIGINT, 10.0),
        (signal.SIGTERM, 5.0),
        (signal.SIGKILL, 5.0),
    ),
) -> None:
    """Signal ``proc``'s whole group, escalating step by step, until the group
    is empty (each step waits up to its seconds). SIGINT lets fio finish its
    I/Os and write what it measured; SIGKILL is the last word."""
    pgid = proc.pid  # the session leader's pid is the group's id
    for sig, wait_s in steps:
        _reap(proc)
        if not group_alive(pgid):
            return
        signal_group(pgid, sig)
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline:
            _reap(proc)
            if not group_alive(pgid):
                return
            time.sleep(0.02)
    _reap(proc)


def _reap(proc: subprocess.Popen) -> None:
    """Collect the leader's exit status (a zombie leader keeps the group alive)."""
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=0)
