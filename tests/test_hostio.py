"""What a host's fio processes read and wrote so far (fio.hostio, the IO
request of the agent and of the SSH keeper): the answer's format, and the
counter on a fake /proc — each case run on iorig's counter and on the
keeper's copy of it, which must give the same figures. The real thing
(fio through an agent and over SSH, against fio's own count) is in
test_agent_auth.py and test_ssh_hosts.py."""

from __future__ import annotations

import os
import shutil
import socket
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path

import pytest

from iorig.fio import sshkeeper
from iorig.fio.control import MAGIC, ControlError, ControlServer, read_io
from iorig.fio.hostio import HostIo, TreeCounter, format_answer, parse_answer

# ---------------------------------------------------------------- the answer


def test_an_answer_reads_back_as_written():
    io = HostIo(1795555402.1234567, 10 << 30, 0, 12345, 2**63 - 1)
    text = format_answer(io)
    assert text == f"1795555402.123457 {10 << 30} 0 12345 {2**63 - 1}"
    assert parse_answer(text, "db1") == HostIo(1795555402.123457, 10 << 30, 0, 12345, 2**63 - 1)
    assert parse_answer("  1.5 0 0 0 0 ", "db1") == HostIo(1.5, 0, 0, 0, 0)
    assert read_io("7 1 2 3 4", "db1") == HostIo(7.0, 1, 2, 3, 4)


@pytest.mark.parametrize(
    "text",
    [
        "",
        "none",
        "1795555402.1 1 2 3",  # a field missing
        "1795555402.1 1 2 3 4 5",  # one too many
        "1795555402.1 1 2 3 x",
        "1795555402.1 -1 2 3 4",  # negative
        "1795555402.1 1.5 2 3 4",  # not an integer
        "1795555402.1 +1 2 3 4",
        "1795555402.1 1_000 2 3 4",
        "1795555402.1 0x10 2 3 4",
        "1795555402.1 ١ 2 3 4",  # a digit, but not an ASCII one
        f"1795555402.1 {2**63} 2 3 4",  # beyond a signed 64-bit counter
        f"1795555402.1 1 2 3 {10**30}",
        "nan 1 2 3 4",
        "inf 1 2 3 4",
        "0 1 2 3 4",  # not a time
        "0.000000 1 2 3 4",
        "-1795555402.1 1 2 3 4",
        "1.8e9 1 2 3 4",
        "1795555402. 1 2 3 4",
        "OK 1795555402.1 1 2 3",
    ],
)
def test_an_answer_that_is_not_five_figures_is_refused_naming_the_host(text):
    with pytest.raises(ValueError, match="db1"):
        parse_answer(text, "db1")
    with pytest.raises(ControlError, match="the agent at db1 sent"):
        read_io(text, "db1")


# ---------------------------------------------------------------- a fake /proc


def write_proc(
    proc: Path,
    pid: int,
    *,
    rchar: int = 0,
    wchar: int = 0,
    syscr: int = 0,
    syscw: int = 0,
    read_bytes: int = 0,
    write_bytes: int = 0,
    parent: int | None = None,
    start: int = 1000,
) -> None:
    """/proc/PID/io as Linux writes it and, with ``parent``, /proc/PID/stat
    (a name with a parenthesis and spaces in it, as a process may have)."""
    where = proc / str(pid)
    where.mkdir(parents=True, exist_ok=True)
    (where / "io").write_text(
        f"rchar: {rchar}\nwchar: {wchar}\nsyscr: {syscr}\nsyscw: {syscw}\n"
        f"read_bytes: {read_bytes}\nwrite_bytes: {write_bytes}\ncancelled_write_bytes: 0\n"
    )
    if parent is not None:
        (where / "stat").write_text(
            f"{pid} (fio ) x) S {parent} " + " ".join(["0"] * 17) + f" {start} 0 0 0\n"
        )


def write_task(proc: Path, pid: int, tid: int, **counters: int) -> None:
    """/proc/PID/task/TID/io: one thread's own counters."""
    where = proc / str(pid) / "task" / str(tid)
    where.mkdir(parents=True, exist_ok=True)
    fields = ("rchar", "wchar", "syscr", "syscw", "read_bytes", "write_bytes")
    (where / "io").write_text("".join(f"{n}: {counters.get(n, 0)}\n" for n in fields))


def gone(proc: Path, pid: int) -> None:
    shutil.rmtree(proc / str(pid))


Counter = Callable[[Iterable[int]], tuple[int, int, int, int]]


@pytest.fixture(params=["iorig", "keeper"])
def counter(request, tmp_path) -> Counter:
    """``counter(pids)``: read bytes, write bytes, reads, writes so far, as
    iorig's TreeCounter or the SSH keeper's copy answers them."""
    proc = tmp_path / "proc"
    proc.mkdir()
    if request.param == "iorig":
        ours = TreeCounter(proc)

        def read(pids: Iterable[int]) -> tuple[int, int, int, int]:
            io = ours.read(pids)
            assert abs(io.t_s - time.time()) < 5
            return io.read_bytes, io.write_bytes, io.reads, io.writes

        return read
    keeper = sshkeeper.IoCounter(str(proc))

    def read_keeper(pids: Iterable[int]) -> tuple[int, int, int, int]:
        io = parse_answer(keeper.read(pids), "keeper")
        return io.read_bytes, io.write_bytes, io.reads, io.writes

    return read_keeper


def test_the_counts_of_a_tree_are_summed_as_they_rise(counter, tmp_path):
    proc = tmp_path / "proc"
    write_proc(proc, 10, rchar=100, wchar=50, syscr=3, syscw=2)
    write_proc(proc, 11, read_bytes=4096, rchar=10, syscr=1, write_bytes=8192)
    assert counter([10, 11]) == (4196, 8242, 4, 2)
    write_proc(proc, 11, read_bytes=3 * 4096, rchar=20, syscr=2, write_bytes=8192)
    assert counter([10, 11]) == (100 + 3 * 4096, 8242, 5, 2)
    assert counter([10, 11, 10]) == (100 + 3 * 4096, 8242, 5, 2)  # a pid twice counts once


def test_read_bytes_are_what_reached_the_storage_or_what_reads_returned(counter, tmp_path):
    proc = tmp_path / "proc"
    # O_DIRECT through libaio or io_uring: read_bytes only; buffered reads
    # from the page cache: rchar only; psync with O_DIRECT: both
    write_proc(proc, 20, read_bytes=1 << 20, rchar=300, syscr=4)
    write_proc(proc, 21, read_bytes=0, rchar=5 << 20, syscr=1280)
    write_proc(proc, 22, read_bytes=2 << 20, rchar=2 << 20, syscr=512)
    write_proc(proc, 23, write_bytes=7 << 20, wchar=1 << 20, syscw=256)
    assert counter([20, 21, 22, 23]) == (8 << 20, 7 << 20, 1796, 256)


def test_a_process_gone_keeps_the_last_figures_read_of_it(counter, tmp_path):
    proc = tmp_path / "proc"
    write_proc(proc, 30, rchar=1000, syscr=10)
    write_proc(proc, 31, rchar=500, syscr=5)
    assert counter([30, 31]) == (1500, 0, 15, 0)
    gone(proc, 31)  # exited: nobody read here holds its figures
    assert counter([30, 31]) == (1500, 0, 15, 0)
    write_proc(proc, 30, rchar=2000, syscr=20)
    assert counter([30]) == (2500, 0, 25, 0)
    (proc / "30" / "io").write_text("rchar: garbled\n")  # unreadable: kept too
    assert counter([30]) == (2500, 0, 25, 0)
    assert counter([]) == (2500, 0, 25, 0)


def test_a_pid_used_again_is_another_process(counter, tmp_path):
    proc = tmp_path / "proc"
    write_proc(proc, 40, read_bytes=1 << 20, syscr=100, wchar=10, syscw=1)
    assert counter([40]) == (1 << 20, 10, 100, 1)
    write_proc(proc, 40, read_bytes=4096, syscr=1)  # lower: a new process
    assert counter([40]) == ((1 << 20) + 4096, 10, 101, 1)
    write_proc(proc, 40, read_bytes=8192, syscr=2)
    assert counter([40]) == ((1 << 20) + 8192, 10, 102, 1)
    # with its start time: another process even with counters as high
    write_proc(proc, 41, rchar=100, parent=1, start=5)
    assert counter([40, 41]) == ((1 << 20) + 8192 + 100, 10, 102, 1)
    write_proc(proc, 41, rchar=100, parent=1, start=6)
    assert counter([40, 41]) == ((1 << 20) + 8192 + 200, 10, 102, 1)


def test_a_job_reaped_by_its_parent_counts_once(counter, tmp_path):
    """Linux adds a reaped child's figures to its parent's /proc/PID/io:
    fio's connection process reaps its jobs, the server its connections."""
    proc = tmp_path / "proc"
    write_proc(proc, 50, rchar=100, parent=1)  # the fio server
    write_proc(proc, 51, rchar=10, parent=50)  # a connection process
    write_proc(proc, 52, read_bytes=1 << 20, parent=51)  # its jobs
    write_proc(proc, 53, read_bytes=2 << 20, parent=51)
    assert counter([50, 51, 52, 53]) == (100 + 10 + (3 << 20), 0, 0, 0)
    gone(proc, 52)  # ended with 1.5 MiB read; its parent reaped it
    write_proc(proc, 51, rchar=10, read_bytes=3 << 19, parent=50)
    write_proc(proc, 53, read_bytes=3 << 20, parent=51)
    assert counter([50, 51, 53]) == (100 + (3 << 19) + (3 << 20), 0, 0, 0)
    # the other job and the connection end together: the server holds all
    gone(proc, 53)
    gone(proc, 51)
    write_proc(proc, 50, rchar=110, read_bytes=(3 << 19) + (7 << 19), parent=1)
    assert counter([50]) == ((3 << 19) + (7 << 19), 0, 0, 0)
    gone(proc, 50)  # the server itself: nobody read holds it
    assert counter([]) == ((3 << 19) + (7 << 19), 0, 0, 0)


def test_the_sums_never_go_back(counter, tmp_path):
    proc = tmp_path / "proc"
    write_proc(proc, 60, rchar=100, parent=1)
    write_proc(proc, 61, read_bytes=1 << 20, parent=60)
    assert counter([60, 61]) == (100 + (1 << 20), 0, 0, 0)
    # the job is gone and its parent was read before it reaped it: the sum
    # waits for the parent's figures
    gone(proc, 61)
    assert counter([60]) == (100 + (1 << 20), 0, 0, 0)
    write_proc(proc, 60, rchar=100, read_bytes=(1 << 20) + 4096, parent=1)
    assert counter([60]) == ((1 << 20) + 4096, 0, 0, 0)


def test_a_job_outside_the_tree_is_retired_and_one_left_out_kept(counter, tmp_path):
    proc = tmp_path / "proc"
    write_proc(proc, 70, rchar=100, parent=1)
    write_proc(proc, 71, read_bytes=1 << 20, parent=70)
    write_proc(proc, 72, read_bytes=2 << 20, parent=70)
    assert counter([70, 71, 72]) == (100 + (3 << 20), 0, 0, 0)
    # 71 runs on without its parent (init adopted it): its last figures stay
    # and nothing it does later counts; 72 is left out of the list, still
    # the server's child: kept as it was until it is reaped
    write_proc(proc, 71, read_bytes=5 << 20, parent=1)
    write_proc(proc, 72, read_bytes=4 << 20, parent=70)
    assert counter([70]) == (100 + (3 << 20), 0, 0, 0)
    gone(proc, 71)
    gone(proc, 72)
    write_proc(proc, 70, rchar=100, read_bytes=4 << 20, parent=1)  # it reaped 72
    assert counter([70]) == ((1 << 20) + (4 << 20), 0, 0, 0)


def test_the_fio_servers_own_socket_traffic_is_left_out(counter, tmp_path):
    """The server (the root) and its connection processes (its children)
    read and write the client's socket: ~190 kB and 190 write calls a
    second of status for one job, no I/O of any job."""
    proc = tmp_path / "proc"
    # the server, a connection, the backend running the job, the job (psync)
    write_proc(proc, 90, rchar=62000, syscr=80, parent=1)
    write_task(proc, 90, 90, rchar=62000, syscr=80)
    write_proc(proc, 91, rchar=500, wchar=190000, syscr=10, syscw=190, parent=90)
    write_task(proc, 91, 91, rchar=500, wchar=190000, syscr=10, syscw=190)
    write_proc(proc, 92, rchar=300, syscr=3, parent=91)
    write_proc(proc, 93, rchar=4 << 20, read_bytes=0, syscr=1024, parent=92)
    tree = [90, 91, 92, 93]
    assert counter(tree) == (300 + (4 << 20), 0, 3 + 1024, 0)
    write_proc(proc, 91, rchar=600, wchar=380000, syscr=12, syscw=380, parent=90)
    write_task(proc, 91, 91, rchar=600, wchar=380000, syscr=12, syscw=380)
    write_proc(proc, 93, rchar=8 << 20, syscr=2048, parent=92)
    assert counter(tree) == (300 + (8 << 20), 0, 3 + 2048, 0)
    # the job ends and the backend reaps it; then the backend ends, reaped
    # by the connection: in the connection's figures, not in its threads'
    gone(proc, 93)
    write_proc(proc, 92, rchar=300 + (9 << 20), syscr=3 + 2304, parent=91)
    assert counter([90, 91, 92]) == (300 + (9 << 20), 0, 3 + 2304, 0)
    gone(proc, 92)
    write_proc(
        proc, 91, rchar=600 + 300 + (9 << 20), wchar=380000, syscr=12 + 3 + 2304, syscw=380,
        parent=90,
    )  # fmt: skip
    assert counter([90, 91]) == (300 + (9 << 20), 0, 3 + 2304, 0)
    # the client goes: the server reaps the connection, with what it wrote
    # since the last read (the job's final output: counted, once)
    gone(proc, 91)
    write_proc(
        proc, 90, rchar=62000 + 600 + 300 + (9 << 20), wchar=570000,
        syscr=80 + 12 + 3 + 2304, syscw=570, parent=1,
    )  # fmt: skip
    assert counter([90]) == (300 + (9 << 20), 190000, 3 + 2304, 190)


def test_processes_gone_are_not_remembered(tmp_path):
    proc = tmp_path / "proc"
    counter = TreeCounter(proc)
    keeper = sshkeeper.IoCounter(str(proc))
    write_proc(proc, 80, rchar=1)
    for pid in range(100, 400):
        write_proc(proc, pid, read_bytes=4096)
        counter.read([80, pid])
        keeper.read([80, pid])
        gone(proc, pid)
    final = counter.read([80])
    assert (final.read_bytes, final.reads) == (300 * 4096 + 1, 0)
    assert parse_answer(keeper.read([80]), "keeper").read_bytes == 300 * 4096 + 1
    assert list(counter._seen) == list(keeper.seen) == [80]


# ---------------------------------------------------------------- the agent


def test_the_agent_answers_io_for_its_fio_servers_processes():
    # this test's own process stands in for the fio server's tree
    server = ControlServer(None, lambda: [os.getpid()])
    answers = []
    for _ in range(2):
        ours, theirs = socket.socketpair()
        thread = threading.Thread(target=server.handle, args=(theirs,), daemon=True)
        thread.start()
        with ours:
            ours.settimeout(10)
            ours.sendall(f"{MAGIC} IO\n".encode())
            answers.append(ours.makefile("rb").readline().decode().strip())
        thread.join(10)
    first, second = (read_io(a.removeprefix("OK "), "agent") for a in answers)
    assert all(a.startswith("OK ") for a in answers), answers
    assert first.t_s <= second.t_s and abs(second.t_s - time.time()) < 5
    assert 0 < first.read_bytes <= second.read_bytes  # python read its own files
    assert first.reads <= second.reads
