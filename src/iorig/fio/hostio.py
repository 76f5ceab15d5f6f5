"""How many bytes a host's fio processes have read and written so far, read
on the host from /proc (the ``IO`` request of an agent's control channel
and of the SSH keeper): the host's side of live per-host figures.

The answer after ``OK`` is one line, ``t read_bytes write_bytes reads
writes``: the host's clock when read (6 decimals) and four counters that
only grow while one fio server runs.

Per process, from /proc/PID/io: read bytes are the larger of
``read_bytes`` (what reached the storage: O_DIRECT I/O of psync, libaio
and io_uring) and ``rchar`` (what read syscalls returned: buffered psync
reads served from the page cache too); write bytes likewise; reads and
writes are ``syscr`` and ``syscw``, the exact I/O count only for sync
engines (psync).

Two things of Linux and fio shape the sums:

* Linux adds a child's figures to its parent's /proc/PID/io when the
  parent reaps it (fio's backend process reaps its jobs, the connection
  process the backend, the server its connection processes): a process
  that is gone is counted by the ancestor that reaped it from then on,
  not kept beside it as well, or a job's bytes would count twice the
  moment it ended. One that left the tree some other way (its parent
  died first: init reaps it) keeps the last figures read of it.
* The fio server (the tree's root) and its connection processes (the
  root's children) do no job's I/O, but their reads and writes of the
  client's socket count in rchar, wchar, syscr and syscw: with
  ``--status-interval=1`` some 190 kB and 190 write calls a second for
  one job, which a read-only phase would show as writes. Their own
  threads' rchar, wchar, syscr and syscw (/proc/PID/task/*/io) are left
  out, also once an ancestor reaped them (what they did after the last
  read stays in, at a phase's end).

fio/sshkeeper.py holds a copy of this counter (it runs with nothing but
the standard library); a test holds the two to the same answers.
"""

from __future__ import annotations

import math
import re
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

COUNTER_MAX = 2**63
_COUNTER = re.compile(r"[0-9]{1,19}")
_TIME = re.compile(r"[0-9]{1,12}(\.[0-9]{1,9})?")


@dataclass(frozen=True)
class HostIo:
    """A host's fio processes' I/O so far, as read on the host at ``t_s``."""

    t_s: float  # the host's clock (time.time()) when read
    read_bytes: int  # bytes the fio server's processes read so far
    write_bytes: int
    reads: int  # read syscalls (exact I/O count for sync engines such as psync only)
    writes: int


def format_answer(io: HostIo) -> str:
    """``t read_bytes write_bytes reads writes``, t with 6 decimals."""
    return f"{io.t_s:.6f} {io.read_bytes:d} {io.write_bytes:d} {io.reads:d} {io.writes:d}"


def parse_answer(text: str, where: str) -> HostIo:
    """The figures in an answer to IO (the text after ``OK``); ValueError
    naming ``where`` for anything else (the callers make it a ControlError:
    fio.control cannot be imported here, it imports this)."""
    fields = text.split()
    shown = text[:80]
    if len(fields) != 5:
        raise ValueError(f"the agent at {where} sent no I/O figures: {shown!r}")
    if not _TIME.fullmatch(fields[0]) or not all(_COUNTER.fullmatch(f) for f in fields[1:]):
        raise ValueError(f"the agent at {where} sent malformed I/O figures: {shown!r}")
    t_s = float(fields[0])
    counters = [int(f) for f in fields[1:]]
    if not (math.isfinite(t_s) and t_s > 0) or any(c >= COUNTER_MAX for c in counters):
        raise ValueError(f"the agent at {where} sent impossible I/O figures: {shown!r}")
    return HostIo(t_s, *counters)


Figures = tuple[int, int, int, int]  # read bytes, write bytes, reads, writes
Raw = tuple[int, int, int, int, int, int]  # read_bytes, rchar, write_bytes, wchar, syscr, syscw
Calls = tuple[int, int, int, int]  # rchar, wchar, syscr, syscw: where a socket's traffic counts
NO_CALLS: Calls = (0, 0, 0, 0)


def io_fields(text: str) -> Raw:
    """The counters of a /proc/PID/io (or /proc/PID/task/TID/io) text;
    ValueError or KeyError when one is missing or not a number."""
    fields = {}
    for line in text.splitlines():
        name, _, value = line.partition(":")
        fields[name.strip()] = int(value)
    return (
        fields["read_bytes"],
        fields["rchar"],
        fields["write_bytes"],
        fields["wchar"],
        fields["syscr"],
        fields["syscw"],
    )


@dataclass(frozen=True)
class _Seen:
    """One process as last read."""

    start: str | None  # /proc/PID/stat's start time: a pid used again is another process
    parent: int | None  # its parent's pid (None: unknown)
    raw: Raw  # /proc/PID/io: the process, its threads gone and the children it reaped
    own: Calls = NO_CALLS  # its live threads' socket-prone counters, left out (a server's)
    left_out: Calls = NO_CALLS  # those of the servers' processes it reaped

    @property
    def figures(self) -> Figures:
        read_bytes, rchar, write_bytes, wchar, syscr, syscw = self.raw
        out = _add(self.own, self.left_out)
        return (
            max(read_bytes, rchar - out[0], 0),
            max(write_bytes, wchar - out[1], 0),
            max(syscr - out[2], 0),
            max(syscw - out[3], 0),
        )


class TreeCounter:
    """Sums /proc/PID/io of a process tree; a process that exited keeps the
    last figures read of it, so the sums never go back.

    Precisely: a process gone from the pids (exited, unreadable, or its pid
    now another process's: another start time or, without one, counters
    lower than before) is counted by the nearest of its ancestors still
    read, which reaped it; without such an ancestor (the tree's root, a
    process orphaned) or while it still runs outside the tree, its last
    figures go into a running total. Nothing is kept of a process beyond
    the read after it went. The tree's root and its children are the fio
    server and its connection processes: their own threads' socket traffic
    is left out (the module's docstring says why). The sums reported never
    go back (a moment between a job's end and its parent's reaping, a
    connection process killed before it reaped its jobs: the figure waits
    until the sums pass it)."""

    def __init__(self, proc: Path = Path("/proc")) -> None:
        self.proc = proc
        self._seen: dict[int, _Seen] = {}
        self._retired = [0, 0, 0, 0]
        self._high = [0, 0, 0, 0]
        self._lock = threading.Lock()  # the agent serves requests from threads

    def _stat(self, pid: int) -> tuple[str | None, int | None]:
        """Start time and parent of ``pid``; (None, None) when unreadable."""
        try:
            # the name between the parentheses may be any bytes: only what follows is read
            text = (self.proc / str(pid) / "stat").read_bytes().decode(errors="replace")
            fields = text[text.rindex(")") + 2 :].split()
            return fields[19], int(fields[1])
        except (OSError, ValueError, IndexError):
            return None, None

    def _own(self, pid: int) -> Calls:
        """The socket-prone counters of ``pid``'s live threads."""
        own = [0, 0, 0, 0]
        try:
            tasks = list((self.proc / str(pid) / "task").iterdir())
        except OSError:
            return NO_CALLS
        for task in tasks:
            try:
                _, rchar, _, wchar, syscr, syscw = io_fields((task / "io").read_text())
            except (OSError, ValueError, KeyError):
                continue  # ended: its counters are the process's now, and read below
            for i, value in enumerate((rchar, wchar, syscr, syscw)):
                own[i] += value
        return own[0], own[1], own[2], own[3]

    def _read_one(
        self, pid: int, start: str | None, parent: int | None, server: bool
    ) -> _Seen | None:
        # a server's threads before the whole: what they do in between counts, not less
        own = self._own(pid) if server else NO_CALLS
        try:
            raw = io_fields((self.proc / str(pid) / "io").read_text())
        except (OSError, ValueError, KeyError):
            return None
        return _Seen(start, parent, raw, own)

    def read(self, pids: Iterable[int]) -> HostIo:
        """The sums now, over ``pids`` and those read before."""
        with self._lock:
            pids = list(dict.fromkeys(pids))
            stats = {pid: self._stat(pid) for pid in pids}
            depth = _depths({pid: parent for pid, (_, parent) in stats.items()})
            now: dict[int, _Seen] = {}
            # parents before their children: a job that ends between the two
            # reads is in neither (for a moment) rather than in both
            for pid in sorted(pids, key=depth.__getitem__):
                start, parent = stats[pid]
                server = parent is not None and depth[pid] <= 1  # the root, its children
                if (seen := self._read_one(pid, start, parent, server)) is not None:
                    before = self._seen.get(pid)
                    if _same(before, seen):
                        seen = _Seen(start, parent, seen.raw, seen.own, before.left_out)
                    now[pid] = seen
            for pid, before in list(self._seen.items()):
                if not _same(before, now.get(pid)):
                    self._gone(pid, before, now)
            self._seen = now
            totals = [sum(s.figures[i] for s in now.values()) for i in range(4)]
            for i in range(4):
                self._high[i] = max(self._high[i], self._retired[i] + totals[i])
            return HostIo(time.time(), *self._high)

    def _gone(self, pid: int, before: _Seen, now: dict[int, _Seen]) -> None:
        """``before`` is no longer read: counted by the ancestor that reaped
        it, kept for another read while it runs outside the tree, or retired."""
        start, parent = self._stat(pid) if pid not in now else (None, None)
        if before.start is not None and start == before.start:  # the same process, still here
            if parent is not None and parent in now:
                now.setdefault(pid, before)  # a child of the tree left out: kept as it was
            else:
                self._retire(before)  # running outside the tree: nobody here will reap it
            return
        ancestor, visited = before.parent, {pid}
        while ancestor is not None and ancestor not in visited:
            visited.add(ancestor)
            reaper = now.get(ancestor)
            if _same(self._seen.get(ancestor), reaper):
                assert reaper is not None
                # reaped: in its figures now, less what was left out of it
                left_out = _add(reaper.left_out, before.own, before.left_out)
                now[ancestor] = _Seen(reaper.start, reaper.parent, reaper.raw, reaper.own, left_out)
                return
            older = self._seen.get(ancestor)
            ancestor = older.parent if older is not None else None
        self._retire(before)

    def _retire(self, seen: _Seen) -> None:
        for i, value in enumerate(seen.figures):
            self._retired[i] += value


def _add(*parts: Calls) -> Calls:
    rchar, wchar, syscr, syscw = (sum(part[i] for part in parts) for i in range(4))
    return rchar, wchar, syscr, syscw


def _depths(parents: dict[int, int | None]) -> dict[int, int]:
    """Each pid's depth in the tree that ``parents`` (pid -> parent) makes:
    0 for one whose parent is unknown or not among them."""
    depth: dict[int, int] = {}
    for pid in parents:
        chain: list[int] = []
        at: int | None = pid
        while at in parents and at not in depth and at not in chain:
            chain.append(at)
            at = parents[at]
        base = depth.get(at, -1) if at is not None else -1  # a loop (pids reused) ends too
        for offset, each in enumerate(reversed(chain)):
            depth[each] = base + 1 + offset
    return depth


def _same(before: _Seen | None, after: _Seen | None) -> bool:
    """Both readings of one process: the same start time or, without one,
    no counter lower."""
    if before is None or after is None or before.start != after.start:
        return False
    if before.start is not None:
        return True
    return all(a >= b for a, b in zip(after.raw, before.raw, strict=True))
