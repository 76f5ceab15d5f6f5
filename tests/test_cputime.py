"""fio's CPU measured from /proc (iorig.fio.cputime), on samples recorded
from a real fio: four io_uring jobs at QD 32 on tmpfs pinned to one CPU
(tests/data/proc-iouring/record.py), where fio's own per-job figures leave
out io_uring's worker threads; and on constructed samples for what a
recording cannot show on demand (a job reaped between two samples)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from tests import builders

from iorig.analyze.generator import generator_load
from iorig.fio.cputime import (
    MIN_WALL_S,
    CpuSample,
    CpuWatch,
    busy_ticks,
    read_tree,
    schedstat_s,
    stat_times,
    tree_cpu,
    window_cpu,
)
from iorig.fio.process import Workers, stop_group
from iorig.model import GeneratorCpu
from iorig.store import codecs

RECORDED = Path(__file__).resolve().parent / "data" / "proc-iouring"
CLK_TCK = 100  # the recording machine's (getconf CLK_TCK)


def _sample(n: int) -> tuple[float, dict[str, str]]:
    """A recorded sample: unix seconds, and every file read (path -> text)."""
    text = (RECORDED / f"sample-{n}.txt").read_text()
    t_s = float(re.match(r"# t_s (\S+)\n", text).group(1))
    files = {}
    for block in text.split("==> ")[1:]:
        path, _, body = block.partition(" <==\n")
        files[path] = body
    return t_s, files


def _ticks(leader: int, files: dict[str, str]) -> int | None:
    """The tree's CPU in the recording's clock ticks (the recorded samples
    hold no schedstat: their stat times stand)."""
    tree = tree_cpu(leader, files, CLK_TCK)
    return None if tree is None else round(tree.cpu_s * CLK_TCK)


def stat_ticks(text: str) -> int | None:
    times = stat_times(text)
    return None if times is None else sum(times)


def _comm(text: str) -> str:
    return text[text.index("(") + 1 : text.rindex(")")]


def _stat(pid: int, comm: str, utime: int, stime: int, cutime: int = 0, cstime: int = 0) -> str:
    """A /proc/PID/stat line with the given times (other fields as a sleeping process's)."""
    rest = [
        "S",
        "1",
        str(pid),
        str(pid),
        "0",
        "-1",
        "4194304",
        "0",
        "0",
        "0",
        "0",
        str(utime),
        str(stime),
        str(cutime),
        str(cstime),
        "20",
        "0",
        "1",
        "0",
        "100",
        "1000",
        "10",
    ]
    return f"{pid} ({comm}) {' '.join(rest)}\n"


def test_a_stat_line_is_read_after_the_last_parenthesis():
    assert stat_times(_stat(7, "fio", 10, 20, 3, 4)) == (30, 7)
    # a command name may hold spaces and parentheses
    assert stat_ticks(_stat(7, "a) b (c", 1, 2)) == 3
    assert stat_ticks("") is None and stat_ticks("7 (fio) S 1 2") is None
    assert stat_ticks(_stat(7, "fio", 10, 20).replace(" 10 20 ", " x 20 ")) is None


def test_the_recorded_tree_counts_io_urings_worker_threads_that_fios_figures_leave_out():
    (t1, first), (t2, second) = _sample(1), _sample(2)
    leader = min(int(p.split("/")[2]) for p in first)
    # the recording: fio's parent and four job processes, each with an io_uring worker thread
    comms = [
        _comm(text) for path, text in second.items() if "/task/" in path and path.endswith("/stat")
    ]
    workers = [c for c in comms if c.startswith("iou-wrk-")]
    assert len(workers) == 4
    # each process's own stat counts all its threads: the tree's total is the
    # sum over every thread of every fio process (within a tick per thread:
    # the reads are microseconds apart)
    threads = sum(
        stat_ticks(text)
        for path, text in second.items()
        if "/task/" in path and path.endswith("/stat")
    )
    total = _ticks(leader, second)
    assert total is not None and abs(total - threads) <= len(comms)

    # over the 2 s between the samples, io_uring's workers did almost half the work
    def ticks(files: dict[str, str], prefix: str) -> int:
        return sum(
            stat_ticks(text)
            for path, text in files.items()
            if path.endswith("/stat") and _comm(text).startswith(prefix)
        )

    in_workers = ticks(second, "iou-wrk-") - ticks(first, "iou-wrk-")
    trees = tree_cpu(leader, first, CLK_TCK), tree_cpu(leader, second, CLK_TCK)
    assert trees[0].pids == trees[1].pids and len(trees[0].pids) == 5  # fio and its 4 jobs
    measured = window_cpu(
        [CpuSample(t, tree.cpu_s, tree.pids) for t, tree in zip((t1, t2), trees, strict=True)],
        CLK_TCK,
    )
    assert measured is not None
    assert measured.wall_s == pytest.approx(t2 - t1)
    assert in_workers / CLK_TCK == pytest.approx(0.48 * measured.cpu_s, abs=0.05 * measured.cpu_s)
    # fio's own per-job figures (its JSON output of the same run) say 0.41 of
    # the one CPU; the tree used 0.71 of it (the rest went to other processes
    # of a busy machine)
    jobs = json.loads((RECORDED / "output.json").read_text())["jobs"]
    per_job = sum(j["usr_cpu"] + j["sys_cpu"] for j in jobs) / 100
    assert per_job == pytest.approx(0.41, abs=0.01)
    assert measured.cpus_busy == pytest.approx(0.71, abs=0.01)
    # and so the audit: four jobs crowding one CPU, busy beyond half of it by
    # the measurement, not by fio's figures
    per_second = np.full(3, 150_000.0)
    agg = replace(builders.scope(per_second, cpu=per_job * 25), jobs=4, sys_cpu_pct=0.0)
    phase = builders.phase("p", per_second, scopes=(agg,), engine="io_uring")
    unmeasured = generator_load(phase, 1.0)
    assert unmeasured is not None and not unmeasured.limiting
    assert "they leave out io_uring's worker threads" in unmeasured.describe()
    load = generator_load(replace(phase, generator_cpu=measured), 1.0)
    assert load is not None and load.limiting and load.measured
    assert load.per_job_cpus == pytest.approx(per_job)
    assert "kept 0.71 of the 1 CPU it may run on busy (71 %) measured over all" in load.describe()


def test_reading_a_proc_tree_takes_the_files_the_accounting_reads(tmp_path):
    _, recorded = _sample(2)
    leader = min(int(p.split("/")[2]) for p in recorded)
    for path, text in recorded.items():
        file = tmp_path / path.removeprefix("/proc/")
        file.parent.mkdir(parents=True, exist_ok=True)
        file.write_text(text)
    read = read_tree(leader, tmp_path)
    # what the reader takes is the stat of each process and each thread's
    # children (and schedstat, which the recording did not keep)
    wanted = {p: t for p, t in recorded.items() if p.count("/") == 3 or p.endswith("/children")}
    assert read == wanted
    assert _ticks(leader, read) == _ticks(leader, recorded)
    # a process that ended before its stat was read is left out, not an error
    job = recorded[f"/proc/{leader}/task/{leader}/children"].split()[0]
    (tmp_path / job / "stat").unlink()
    assert _ticks(leader, read_tree(leader, tmp_path)) < _ticks(leader, recorded)


def test_a_job_reaped_between_samples_is_counted_once():
    children = {"/proc/10/task/10/children": "11 12"}
    before = {
        "/proc/10/stat": _stat(10, "fio", 5, 1),
        "/proc/11/stat": _stat(11, "fio", 40, 60),
        "/proc/12/stat": _stat(12, "fio", 30, 20),
        **children,
    }
    # job 11 ended (with 110 ticks in all) and fio reaped it: its time is in cutime
    after = {
        "/proc/10/stat": _stat(10, "fio", 6, 1, 80, 30),
        "/proc/12/stat": _stat(12, "fio", 45, 30),
        "/proc/10/task/10/children": "12",
    }
    assert _ticks(10, before) == 156
    assert _ticks(10, after) == 6 + 1 + 110 + 75
    # a zombie not reaped yet is still its parent's child: counted once, by itself
    zombie = {
        **after,
        "/proc/10/stat": _stat(10, "fio", 6, 1),
        "/proc/11/stat": _stat(11, "fio", 50, 60).replace(" S ", " Z ", 1),
        "/proc/10/task/10/children": "11 12",
    }
    assert _ticks(10, zombie) == _ticks(10, after)
    # a process outside the tree (not a child) is not fio's
    assert _ticks(10, {**before, "/proc/99/stat": _stat(99, "other", 500, 0)}) == 156
    assert _ticks(10, {"/proc/11/stat": _stat(11, "fio", 1, 1)}) is None  # leader gone


def test_the_window_is_the_longest_stretch_with_the_same_processes():
    fio, jobs = frozenset({1}), frozenset({1, 2, 3})
    samples = [
        CpuSample(100.25, 0.2, fio),  # fio parsing its job file: not forked yet
        CpuSample(100.5, 0.3, jobs),
        CpuSample(101.0, 0.8, jobs),
        CpuSample(102.0, 1.8, jobs),
        CpuSample(103.5, 3.3, jobs),
        # the jobs ended and were reaped: their times join fio's cutime
        # caught up, more than their last reading
        CpuSample(103.75, 3.8, fio),
        CpuSample(104.0, 3.85, fio),
    ]
    assert window_cpu(samples, CLK_TCK) == GeneratorCpu(3.0, 3.0)
    # too short a stretch, or none: no figure (fio's own stands in)
    assert window_cpu([CpuSample(1.0, 0), CpuSample(1.0 + MIN_WALL_S / 2, 0.4)], CLK_TCK) is None
    assert window_cpu(samples[:1], CLK_TCK) is None and window_cpu([], CLK_TCK) is None


def test_a_watch_samples_the_tree_and_measures_nothing_without_children_lists(tmp_path):
    (_, first), (_, second) = _sample(1), _sample(2)
    leader = min(int(p.split("/")[2]) for p in first)
    proc = tmp_path / "proc"
    watch = CpuWatch(proc)
    assert not watch.able  # this kernel's /proc would list no children: fio's jobs unseen
    watch.sample(leader)
    assert watch.samples == [] and watch.measured() is None
    (proc / "self" / "task" / str(os.getpid())).mkdir(parents=True)
    (proc / "self" / "task" / str(os.getpid()) / "children").write_text("")
    watch = CpuWatch(proc)
    watch.SPACING = 0
    for files in (first, second):
        for path, text in files.items():
            file = proc / path.removeprefix("/proc/")
            file.parent.mkdir(parents=True, exist_ok=True)
            file.write_text(text)
        watch.sample(leader)
    assert [round(s.cpu_s * CLK_TCK) for s in watch.samples] == [
        _ticks(leader, first),
        _ticks(leader, second),
    ]
    assert watch.measured() is None  # taken milliseconds apart: too short a window
    watch.sample(None)  # before fio started
    assert len(watch.samples) == 2


def test_the_stored_figure_reads_back_and_a_crafted_one_is_refused():
    for measured in (GeneratorCpu(2.41, 2.779), GeneratorCpu(2.41, 2.779, 0.52)):
        assert codecs.GENERATOR_CPU.decode(codecs.GENERATOR_CPU.encode(measured)) == measured
    # as schema version 12 wrote it: not measured, not none
    old = codecs.GENERATOR_CPU.decode(json.dumps({"cpu_s": 2.41, "wall_s": 2.779}))
    assert old == GeneratorCpu(2.41, 2.779) and old.others_cpu_s is None
    assert codecs.GENERATOR_CPU.decode(codecs.GENERATOR_CPU.encode(None)) is None
    for data, why in [
        ({"cpu_s": -1, "wall_s": 2}, "infinite or negative"),
        ({"cpu_s": 1, "wall_s": 0}, "out of range"),
        ({"cpu_s": 1e300, "wall_s": 2}, "out of range"),
        ({"cpu_s": "1", "wall_s": 2}, "not a number"),
        ({"cpu_s": True, "wall_s": 2}, "not a number"),
        ({"cpu_s": 1}, "not {cpu_s, wall_s, others_cpu_s}"),
        ({"cpu_s": 1, "wall_s": 2, "others_cpu_s": -1}, "infinite or negative"),
        ({"cpu_s": 1, "wall_s": 2, "others": 0}, "not {cpu_s, wall_s, others_cpu_s}"),
        ([1, 2], "not {cpu_s, wall_s, others_cpu_s}"),
    ]:
        with pytest.raises(codecs.PayloadError, match=why):
            codecs.GENERATOR_CPU.decode(json.dumps(data))


def test_what_other_processes_took_of_fios_cpus_is_the_cpus_busy_time_less_fios():
    stat = (
        "cpu  900 0 300 5000 40 0 10 0 0 0\n"
        "cpu0 500 0 200 2000 20 0 5 0 0 0\n"
        "cpu1 400 0 100 3000 20 0 5 0 0 0\n"
        "intr 12345\n"
    )
    assert busy_ticks(stat, frozenset({0})) == 705  # user, system and softirq; not idle, iowait
    assert busy_ticks(stat, frozenset({0, 1})) == 1210
    assert busy_ticks(stat, frozenset({0, 2})) is None  # a CPU it does not list: unknown
    pids = frozenset({10})
    samples = [CpuSample(0.0, 1.0, pids, 1000), CpuSample(2.0, 1.6, pids, 1180)]
    measured = window_cpu(samples, 100)
    # 1.8 s of the CPUs busy, 0.6 s of it fio's
    assert measured is not None and (measured.cpu_s, measured.wall_s) == (0.6, 2.0)
    assert measured.others_cpu_s == pytest.approx(1.2)
    assert measured.others_cpus_busy == pytest.approx(0.6)
    # where the CPUs' time could not be read, none is claimed for the others
    assert window_cpu([CpuSample(0.0, 1.0, pids), samples[1]], 100).others_cpu_s is None


def test_a_process_whose_stat_lags_is_read_from_its_threads_schedstat():
    """On kernel 6.18 sixty-four buffered read jobs pinned to one CPU showed
    no time in their stat for 0.6 s while the CPU was busy with nothing else
    (their schedstat counted it); a thread that ended is in the stat alone.
    Each process counts the larger, and its reaped children beside."""
    job = {
        "/proc/10/stat": _stat(10, "fio", 5, 1),
        "/proc/10/task/10/children": "11",
        "/proc/11/stat": _stat(11, "fio", 2, 3),  # 5 ticks: lagging
        "/proc/11/task/11/schedstat": "400000000 2000 90\n",
        "/proc/11/task/12/schedstat": "100000000 100 10\n",  # a second thread
        "/proc/11/task/11/children": "",
        "/proc/11/task/12/children": "",
    }
    assert schedstat_s("400000000 2000 90\n") == 0.4
    assert schedstat_s("") is None and schedstat_s("x 1 2") is None
    tree = tree_cpu(10, job, CLK_TCK)
    assert tree is not None and tree.cpu_s == pytest.approx(0.06 + 0.5)
    # a worker thread ended: its 0.3 s is in the stat's 80 ticks, no schedstat has it
    ended = {**job, "/proc/11/stat": _stat(11, "fio", 50, 30)}
    del ended["/proc/11/task/12/schedstat"]
    assert tree_cpu(10, ended, CLK_TCK).cpu_s == pytest.approx(0.06 + 0.8)
    # reaped children's time joins the process's own, whichever way it is read
    reaped = {**job, "/proc/10/stat": _stat(10, "fio", 5, 1, 70, 20)}
    assert tree_cpu(10, reaped, CLK_TCK).cpu_s == pytest.approx(0.06 + 0.9 + 0.5)
    # a schedstat the kernel does not keep (no CONFIG_SCHED_INFO): the stat stands
    bare = {k: v for k, v in job.items() if not k.endswith("schedstat")}
    assert tree_cpu(10, bare, CLK_TCK).cpu_s == pytest.approx(0.11)


@pytest.mark.fio
def test_a_live_fio_tree_is_read_with_every_threads_schedstat(tmp_path):
    """What the watch reads of a real fio: every thread's schedstat beside
    the stats, and a tree that counts no less than the stats alone."""
    fio = shutil.which("fio")
    if fio is None:
        pytest.skip("needs fio")
    proc = subprocess.Popen(
        [fio, "--name=spin", "--ioengine=null", "--size=1g", "--rw=randread",
         "--numjobs=2", "--time_based", "--runtime=3", "--output=/dev/null"],
        cwd=tmp_path, start_new_session=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 10
        while True:
            files = read_tree(proc.pid)
            stats = [p for p in files if p.count("/") == 3]
            if len(stats) >= 3 or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        assert len(stats) >= 3, "fio forked no jobs in 10 s"
        schedstats = [p for p in files if p.endswith("/schedstat")]
        assert len(schedstats) >= len(stats)  # a thread or more per process
        tree = tree_cpu(proc.pid, files, os.sysconf("SC_CLK_TCK"))
        bare = tree_cpu(
            proc.pid, {k: v for k, v in files.items() if not k.endswith("schedstat")},
            os.sysconf("SC_CLK_TCK"),
        )  # fmt: skip
        assert tree is not None and bare is not None and tree.cpu_s >= bare.cpu_s
    finally:
        # the group and fio's job workers, which leave it (killing the parent
        # alone left them running for good)
        workers = Workers()
        workers.record(proc.pid, now=True)
        stop_group(proc, workers=workers)
        assert not workers.alive()
