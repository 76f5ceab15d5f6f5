"""The one way iorig starts fio: in a process group of its own, which iorig
empties on every exit path.

Every fio process (a phase, an engine probe, a client driving servers, a
server) starts in a new session: a terminal's Ctrl-C reaches iorig only, and
iorig decides how fio stops. fio also gets SIGTERM if the thread that
started it dies (``PR_SET_PDEATHSIG``). Stopping signals the whole group,
not only fio's parent, until no process of the group is left.

fio's job workers are forked children that call ``setsid()``: each is in a
session and group of its own, so a group signal misses them, and when fio's
parent dies (OOM kill, a stray ``kill -9``) they keep doing I/O. iorig
therefore records the workers while fio runs (``Workers``) and SIGKILLs the
ones left once their parent has ended.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import IO

from iorig.errors import UserError

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
    """Start ``command`` as the leader of a new session and process group;
    UserError when it cannot start (a program removed or made unexecutable
    after iorig found it, a working directory gone)."""
    try:
        return subprocess.Popen(
            list(command),
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            stdout=stdout,
            stderr=stderr,
            start_new_session=True,
            preexec_fn=_die_with_parent,
        )
    except OSError as problem:
        where = f" in {cwd}" if problem.filename == str(cwd) else ""
        raise UserError(
            f"cannot start {command[0]}{where}: {problem.strerror or problem}",
            hint="was it removed, moved or made unexecutable while iorig ran? "
            "reinstall it (or point --fio or IORIG_FIO at it) and run again",
        ) from None


def group_alive(pgid: int) -> bool:
    """Whether any live process of the group is left. Zombies are not: a
    worker killed with its group is handed to init, and a container's init
    may reap it seconds later (pid 1 here took 1.2 s, longer beside a load,
    and a stop waited for it: Ctrl-C during a hung probe took 2.9 s)."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return _live_member(pgid)


def _live_member(pgid: int) -> bool:
    """Whether /proc lists a process of the group that is not a zombie (True
    where /proc cannot tell: the group answered a signal)."""
    try:
        return any(
            int(fields[2]) == pgid and fields[0] not in (b"Z", b"X")
            for _pid, fields in _proc_stats()
        )
    except OSError:
        return True


def _proc_stats() -> Iterator[tuple[int, list[bytes]]]:
    """Each process's pid and the fields of its /proc stat after its name
    (state, ppid, pgrp, session, …); those that ended meanwhile left out."""
    with os.scandir("/proc") as entries:
        for entry in entries:
            if not entry.name.isdigit():
                continue
            try:
                with open(f"/proc/{entry.name}/stat", "rb") as f:
                    stat = f.read()
            except OSError:
                continue
            yield int(entry.name), stat[stat.rindex(b")") + 2 :].split()


def signal_group(pgid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def start_time(pid: int) -> str | None:
    """The live process's start time (clock ticks since boot): with the pid,
    its identity. None when it is gone or a zombie (it does nothing more)."""
    try:
        # the name in parentheses may be any bytes: only the fields after it are read
        stat = Path(f"/proc/{pid}/stat").read_bytes().decode(errors="replace")
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[1].split()
    return None if len(fields) < 20 or fields[0] in ("Z", "X") else fields[19]


def _children(pid: int) -> list[int]:
    found = []
    with contextlib.suppress(OSError):
        for task in Path(f"/proc/{pid}/task").iterdir():
            with contextlib.suppress(OSError):
                found += [int(c) for c in (task / "children").read_text().split()]
    return found


def proc_table() -> dict[int, tuple[int, int]]:
    """pid -> (parent pid, session id) of every live process. Zombies are
    left out: they hold nothing, and one handed to an init that reaps slowly
    (a container's) would look like a job still running."""
    return {
        pid: (int(fields[1]), int(fields[3])) for pid, fields in _proc_stats() if fields[0] != b"Z"
    }


def children_map(table: dict[int, tuple[int, int]]) -> dict[int, list[int]]:
    """pid -> its children, from ``proc_table``'s parents (a kernel without
    CONFIG_PROC_CHILDREN, as this CI's, has no children files to read)."""
    children: dict[int, list[int]] = {}
    for child, (parent, _) in table.items():
        children.setdefault(parent, []).append(child)
    return children


def _has_children_files(pid: int) -> bool:
    return Path(f"/proc/{pid}/task/{pid}/children").exists()


# Without the children files a look reads every process's stat (80 ms on a
# host of 2,000 processes): often enough to see fio's workers, not each poll
SCAN_EVERY_S = 1.0


class Workers:
    """The processes a fio parent forked, by pid and start time (so a reused
    pid is never signalled)."""

    def __init__(self) -> None:
        self.known: dict[int, str] = {}
        self._scanned_at: float | None = None

    def record(self, leader: int, *, now: bool = False) -> None:
        """Every process now under ``leader``, at any depth (a process known
        from an earlier look may have forked since). Where the kernel has no
        children files, at most once in ``SCAN_EVERY_S`` unless ``now``."""
        if _has_children_files(leader):
            children: Callable[[int], list[int]] = _children
        else:
            clock = time.monotonic()
            if not now and self._scanned_at is not None and clock - self._scanned_at < SCAN_EVERY_S:
                return
            self._scanned_at = clock
            table = children_map(proc_table())  # one look at /proc for the whole walk
            children = lambda pid: table.get(pid, [])  # noqa: E731
        pending, looked = children(leader), {leader}
        while pending:
            pid = pending.pop()
            if pid in looked:
                continue
            looked.add(pid)
            started = start_time(pid)
            if started is not None:
                self.known[pid] = started
                pending += children(pid)

    def alive(self) -> list[int]:
        # a copy: a watching thread may record more meanwhile
        return [pid for pid, started in list(self.known.items()) if start_time(pid) == started]

    def kill(self) -> None:
        for pid in self.alive():
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)


def stop_group(
    proc: subprocess.Popen,
    steps: Sequence[tuple[int, float]] = (
        (signal.SIGINT, 10.0),
        (signal.SIGTERM, 5.0),
        (signal.SIGKILL, 5.0),
    ),
    workers: Workers | None = None,
    hurry: threading.Event | None = None,
) -> None:
    """Signal ``proc``'s whole group, escalating step by step, until the group
    is empty (each step waits up to its seconds). SIGINT lets fio finish its
    I/Os and write what it measured; SIGKILL is the last word, at once when
    ``hurry`` is set (a second Ctrl-C)."""
    pgid = proc.pid  # the session leader's pid is the group's id
    workers = workers or Workers()
    if proc.poll() is None:
        workers.record(pgid, now=True)

    def done() -> bool:
        _reap(proc)
        return not group_alive(pgid) and not workers.alive()

    for sig, wait_s in steps:
        if done():
            return
        if proc.returncode is not None:
            break  # orphans: fio's parent is gone, its workers heed nothing but SIGKILL
        signal_group(pgid, sig)
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline:
            if done():
                return
            if proc.returncode is not None or (hurry is not None and hurry.is_set()):
                break
            time.sleep(0.02)
        if hurry is not None and hurry.is_set():
            break
    _kill_orphans(proc, pgid, workers)


def _kill_orphans(proc: subprocess.Popen, pgid: int, workers: Workers, wait_s: float = 5.0) -> None:
    """SIGKILL what is left of the group and of fio's workers: once fio's
    parent has ended nothing collects their results, and they keep doing I/O
    (also the last step when fio ignored the gentler signals)."""
    deadline = time.monotonic() + wait_s
    while (group_alive(pgid) or workers.alive()) and time.monotonic() < deadline:
        signal_group(pgid, signal.SIGKILL)
        workers.kill()
        time.sleep(0.02)
        _reap(proc)
    _reap(proc)


def _reap(proc: subprocess.Popen) -> None:
    """Collect the leader's exit status (a zombie leader keeps the group alive)."""
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=0)
