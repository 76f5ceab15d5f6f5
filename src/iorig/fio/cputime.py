"""The CPU time fio uses on this machine, measured from outside fio.

fio's per-job usr/sys figures are each job's own thread (``getrusage``),
which leaves out the threads that do a job's I/O for it: io_uring's workers
(``iou-wrk-*``; ``iou-sqp-*`` with sqpoll), threads the kernel adds to the
job's process. Four io_uring jobs at QD 32 pinned to one CPU on tmpfs kept
that CPU busy while fio's figures added up to half of it, and the generator
went unblamed. So iorig reads what the kernel counts for every fio process:
``/proc/PID/stat``'s utime and stime are the whole thread group's, threads
that ended included (io_uring's workers come and go, so a sum over
``/proc/PID/task/*/stat`` would lose theirs), and cutime/cstime hold the
children a process has reaped (jobs that ended). fio's job workers leave
fio's process group (``setsid``), so the tree is walked by parenthood
(``/proc/PID/task/TID/children``), as ``process.Workers`` does.

A live process's utime and stime lag what it runs, though: on kernel 6.18,
sixty-four buffered read jobs pinned to one CPU showed no time in their
stat for 0.6 s while the CPU was busy with nothing else, and caught up in
bursts (fio read as 0.55 of a CPU it kept busy alone, and the generator
went unblamed). Each thread's ``schedstat`` (the scheduler's own runtime,
in nanoseconds) does not lag but forgets threads that ended; so a process's
own time is the larger of the two, both counting no more than it ran.

The same samples read how busy the CPUs fio may run on were (``/proc/stat``,
each CPU of iorig's affinity, which fio inherits): what other processes
took of them is what fio could not have, and a CPU-bound fio beside a busy
neighbour is starved, not measuring the storage (``analyze/generator.py``).

Not a cgroup of fio's own (``cpu.stat``): that needs root and a delegated
cgroup (v2, or v1's cpuacct) and would move fio out of the cgroup the user
put iorig in (a CPU quota, a cpuset); /proc needs neither.

Parsing and accounting are pure functions over a sample's text (path ->
contents); ``read_tree`` takes the sample, ``CpuWatch`` samples a phase.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from iorig.model import GeneratorCpu

PROC = Path("/proc")
# fields after ``comm`` (proc(5)'s numbering less 3)
_UTIME, _STIME, _CUTIME, _CSTIME = 11, 12, 13, 14
# below this the clock ticks at the window's ends (1/CLK_TCK per process at
# each end, 10 ms here) weigh too much: fio's own figures stand in
MIN_WALL_S = 0.5


def stat_times(text: str) -> tuple[int, int] | None:
    """(utime + stime, cutime + cstime) in clock ticks of one
    ``/proc/PID/stat`` text: the process's own time (all its threads, ended
    ones included) and its reaped children's; None when it is not one.
    ``comm`` may hold spaces and parentheses: the fields start after the
    last ``)``."""
    _, closed, rest = text.rpartition(")")
    fields = rest.split()
    if not closed or len(fields) < 20:
        return None
    try:
        own = int(fields[_UTIME]) + int(fields[_STIME])
        return own, int(fields[_CUTIME]) + int(fields[_CSTIME])
    except ValueError:
        return None


def schedstat_s(text: str) -> float | None:
    """A thread's time on a CPU so far (seconds), the first field of its
    ``/proc/PID/task/TID/schedstat`` (nanoseconds); None when it is not one."""
    fields = text.split()
    try:
        return int(fields[0]) / 1e9 if len(fields) == 3 else None
    except ValueError:
        return None


@dataclass(frozen=True)
class TreeCpu:
    cpu_s: float  # of the whole tree so far, reaped children included
    pids: frozenset[int]  # the processes counted


def tree_cpu(leader: int, files: Mapping[str, str], clk_tck: int) -> TreeCpu | None:
    """CPU seconds used so far by ``leader`` and every process under it,
    from one /proc sample (``/proc/PID/stat``, ``/proc/PID/task/TID/children``
    and ``…/schedstat`` -> their text): each process's own time (the larger
    of its stat's and its live threads' schedstat, see the module's doc)
    plus its reaped children's. None when the sample does not hold the
    leader. A process gone between two reads is missed in this sample only
    (its time is in its parent's cutime by the next): never counted twice,
    which would blame the generator wrongly."""
    children: dict[int, set[int]] = defaultdict(set)
    threads_s: dict[int, float] = defaultdict(float)
    for path, text in files.items():
        parts = path.split("/")  # "", "proc", pid, "task", tid, "children" | "schedstat"
        if len(parts) != 6 or parts[3] != "task" or not parts[2].isdigit():
            continue
        if parts[5] == "children":
            with contextlib.suppress(ValueError):
                children[int(parts[2])].update(int(c) for c in text.split())
        elif parts[5] == "schedstat" and (ran := schedstat_s(text)) is not None:
            threads_s[int(parts[2])] += ran
    if stat_times(files.get(f"/proc/{leader}/stat", "")) is None:
        return None
    total, seen, counted, pending = 0.0, set(), set(), [leader]
    while pending:
        pid = pending.pop()
        if pid in seen:
            continue
        seen.add(pid)
        times = stat_times(files.get(f"/proc/{pid}/stat", ""))
        if times is not None:
            own, reaped = times
            total += max(own / clk_tck, threads_s.get(pid, 0.0)) + reaped / clk_tck
            counted.add(pid)
            pending += sorted(children.get(pid, ()))
    return TreeCpu(total, frozenset(counted))


def _read(path: str) -> str | None:
    """A /proc file's text (os.read: a tree is read every tick, and
    ``Path.read_text`` costs twice as much); None once it is gone."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:  # the process or thread ended meanwhile
        return None
    try:
        chunks = []
        while chunk := os.read(fd, 65536):
            chunks.append(chunk)
        return b"".join(chunks).decode(errors="replace")
    except OSError:
        return None
    finally:
        os.close(fd)


def children_listed(proc: Path = PROC) -> bool:
    """Whether the kernel lists a task's children (CONFIG_PROC_CHILDREN):
    without it fio's jobs cannot be found, and fio's parent alone would
    understate fio."""
    return (proc / "self" / "task" / str(os.getpid()) / "children").exists()


def read_tree(leader: int, proc: Path = PROC) -> dict[str, str]:
    """What ``tree_cpu`` reads, for ``leader`` and every process under it:
    each process's stat before its threads' schedstat and children (a child
    reaped between the reads is missed, not counted twice)."""
    files: dict[str, str] = {}
    pending, seen = [leader], set()
    while pending:
        pid = pending.pop()
        if pid in seen:
            continue
        seen.add(pid)
        stat = _read(f"{proc}/{pid}/stat")
        if stat is None:
            continue
        files[f"/proc/{pid}/stat"] = stat
        try:
            tasks = sorted(os.listdir(f"{proc}/{pid}/task"))
        except OSError:
            continue
        for tid in tasks:
            ran = _read(f"{proc}/{pid}/task/{tid}/schedstat")
            if ran is not None:
                files[f"/proc/{pid}/task/{tid}/schedstat"] = ran
            text = _read(f"{proc}/{pid}/task/{tid}/children")
            if text is not None:
                files[f"/proc/{pid}/task/{tid}/children"] = text
                pending += [int(c) for c in text.split() if c.isdigit()]
    return files


# /proc/stat's per-CPU fields (proc(5)): user nice system idle iowait irq
# softirq steal; guest time is in user already
_BUSY_FIELDS = (0, 1, 2, 5, 6, 7)


def busy_ticks(stat_text: str, cpus: frozenset[int]) -> int | None:
    """Clock ticks the CPUs ``cpus`` spent busy (not idle, not waiting for
    I/O) so far, from ``/proc/stat``'s text; None when one of them is not
    listed (a CPU taken offline)."""
    total, seen = 0, set()
    for line in stat_text.splitlines():
        name, _, rest = line.partition(" ")
        if not name.startswith("cpu") or not name[3:].isdigit() or int(name[3:]) not in cpus:
            continue
        fields = rest.split()
        try:
            total += sum(int(fields[i]) for i in _BUSY_FIELDS if i < len(fields))
        except ValueError:
            return None
        seen.add(int(name[3:]))
    return total if seen == cpus else None


@dataclass(frozen=True)
class CpuSample:
    t_s: float  # unix seconds
    cpu_s: float  # of the whole tree, cumulative
    pids: frozenset[int] = frozenset()  # the processes counted
    busy: int | None = None  # ticks the CPUs fio may use were busy, by anyone, cumulative


def window_cpu(samples: Sequence[CpuSample], clk_tck: int) -> GeneratorCpu | None:
    """fio's CPU over the longest stretch of samples in which its processes
    stayed the same, over that stretch's wall time: from the first sample
    once fio has forked its jobs to the last before they end. A live
    process's time is read as it stands, a reaped one's joins its parent's
    cutime caught up, so a stretch that ends after jobs ended gains what
    their reading lagged (67 jobs ending read as 2.6 CPUs busy on one CPU);
    within it the same processes are read the same way. Not from when fio's status says the
    jobs began I/O: a CPU-starved fio's first status, 4 s late, put that 2 s
    too late. fio's start-up after the fork is in the stretch: short where a
    prefill phase made the files, and fio's own work on the same CPUs where
    it is not. None with less than ``MIN_WALL_S`` in the longest stretch."""
    best: tuple[CpuSample, CpuSample] | None = None
    start = 0
    for i, sample in enumerate(samples):
        if sample.pids != samples[start].pids:
            start = i
        first = samples[start]
        if best is None or sample.t_s - first.t_s > best[1].t_s - best[0].t_s:
            best = (first, sample)
    if best is None:
        return None
    first, last = best
    wall_s = last.t_s - first.t_s
    if wall_s < MIN_WALL_S or last.cpu_s < first.cpu_s:
        return None
    cpu_s = round(last.cpu_s - first.cpu_s, 6)
    others = None
    if first.busy is not None and last.busy is not None and last.busy >= first.busy:
        # the CPUs' busy time (whole ticks) less fio's: a hair below zero is
        # the ticks' rounding, not a negative neighbour
        others = max((last.busy - first.busy) / clk_tck - cpu_s, 0.0)
    return GeneratorCpu(cpu_s, wall_s, others)


class CpuWatch:
    """Samples a running fio's process tree (``sample``, on every tick of its
    supervision, less often where reading a large tree would take more than
    ``1 / SPACING`` of a CPU: iorig's CPU is taken from the CPUs fio may
    use); ``measured`` makes of the samples the phase's figure."""

    SPACING = 20  # a sample waits 20 times the CPU time the last one took

    def __init__(self, proc: Path = PROC, cpus: frozenset[int] | None = None) -> None:
        self.proc = proc
        self.samples: list[CpuSample] = []
        self.able = children_listed(proc)
        self._next = 0.0
        self.clk_tck = os.sysconf("SC_CLK_TCK")
        # the CPUs fio may run on: this process's, which fio inherits
        self.cpus = cpus if cpus is not None else frozenset(os.sched_getaffinity(0))

    def sample(self, leader: int | None) -> None:
        start = time.monotonic()
        if leader is None or not self.able or start < self._next:
            return
        # CPU time, not wall time: on a CPU fio keeps busy a read waits its turn
        # (133 ms of wall for 9 ms of CPU beside 67 jobs on one CPU)
        cpu = time.thread_time()
        before = time.time()
        tree = tree_cpu(leader, read_tree(leader, self.proc), self.clk_tck)
        stat = _read(f"{self.proc}/stat")
        busy = busy_ticks(stat, self.cpus) if stat is not None else None
        if tree is not None:
            self.samples.append(CpuSample((before + time.time()) / 2, tree.cpu_s, tree.pids, busy))
        self._next = start + self.SPACING * (time.thread_time() - cpu)

    def measured(self) -> GeneratorCpu | None:
        return window_cpu(self.samples, self.clk_tck)
