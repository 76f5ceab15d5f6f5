"""A hung host, a stalled host, a killed client: real fio servers on
127.0.0.x, one of them stopped with SIGSTOP (the whole server: listener,
connection and job processes) or its local fio client killed.

What must hold: Ctrl-C ends the run within 5 s whatever a host does (a second
signal at once) and keeps what the healthy hosts measured; a host that
stopped reporting mid-phase fails the phase naming it and its seconds never
reach the per-second figures; a killed client's jobs do not go on running on
its server.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from tests.conftest import REPO
from tests.faults.watch import processes_with, stored_hosts
from tests.fioservers import fio_server, server_dir
from tests.waiting import wait_for_phase, wait_until

from iorig.fio.server import FioServer, process_tree
from iorig.model import PhaseKind
from iorig.model.kinds import ALL
from iorig.run.servers import CLIENT_STOP
from iorig.store import Store

# Ctrl-C must end a run within seconds: on a busy machine a healthy
# shutdown took 5.4 s against the 5 s bound, so the machine to themselves
pytestmark = pytest.mark.fio

# a prefill, then one measured phase of random reads: paced (light), or
# free-running
ADHOC = ("--rw", "randread", "--size", "16MiB", "--iodepth", "4")
PACED = """\
name: paced-reads
title: paced random reads
parameters:
  duration: {type: duration, default: 8s}
targets:
  data: {size: 16MiB}
phases:
  - {name: fill, kind: prefill, workloads: [{rw: write, bs: 1MiB}]}
  - name: randread
    kind: measure
    duration: ${duration}
    workloads: [{rw: randread, bs: 4k, iodepth: 4, rate_iops: 2000}]
"""


@contextlib.contextmanager
def _run(
    tmp_path: Path, db: Path, servers: list[FioServer], duration: str, *, paced: bool = True
) -> Iterator[subprocess.Popen]:
    env = dict(os.environ, IORIG_DB=str(db), COLUMNS="200", TMPDIR=str(tmp_path))
    hosts = ",".join(s.address.label for s in servers)
    what: tuple[str, ...] = (*ADHOC, "--duration", duration)
    if paced:
        scenario = tmp_path / "paced.yaml"
        scenario.write_text(PACED)
        what = (str(scenario), "--set", f"duration={duration}")
    proc = subprocess.Popen(
        [sys.executable, "-m", "iorig", "run", *what, "--hosts", hosts],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()


def _measuring(
    proc: subprocess.Popen, db: Path, servers: list[FioServer], seconds: int = 1
) -> None:
    """Wait until fio has moved bytes on every host in ``seconds`` of the
    measured phase's live seconds (their jobs run; a healthy host has figures)."""
    hosts = [s.address.label for s in servers]
    wait_for_phase(db, "randread", io_seconds=seconds, hosts=hosts, timeout_s=60, proc=proc)


def _stopped(tree: list[int]) -> bool:
    """Every process of ``tree`` still there is stopped (state T)."""
    states = []
    for pid in tree:
        with contextlib.suppress(OSError):
            stat = Path(f"/proc/{pid}/stat").read_text()
            states.append(stat[stat.rindex(")") + 2])
    return all(state == "T" for state in states)


def _signal_tree(server: FioServer, sig: int) -> list[int]:
    assert server.pid is not None
    tree = process_tree(server.pid)
    for pid in tree:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, sig)
    return tree


def _local_clients(tmp_path: Path) -> list[int]:
    """This test's fio clients still running (their output lies under tmp_path)."""
    return processes_with(b"--client=", str(tmp_path).encode())


def _ctrl_c(proc: subprocess.Popen) -> tuple[float, str, str]:
    """Ctrl-C to the run: the seconds it took to end, and what it printed."""
    sent = time.monotonic()
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    return time.monotonic() - sent, out, err


@pytest.mark.timing
def test_ctrl_c_with_a_stopped_server_ends_in_seconds_and_keeps_the_healthy_host(tmp_path):
    db = tmp_path / "results.sqlite"
    with contextlib.ExitStack() as stack:
        servers = [stack.enter_context(fio_server(tmp_path, index=i)) for i in range(2)]
        # the same run with both hosts healthy, stopped at the same point: what
        # ending (stopping, storing, removing files) takes on this machine now
        baseline = tmp_path / "healthy.sqlite"
        with _run(tmp_path, baseline, servers, "20s") as healthy_run:
            _measuring(healthy_run, baseline, servers)
            healthy_took, out, err = _ctrl_c(healthy_run)
        assert healthy_run.returncode == 130, out + err
        # hosts that answered the stop have their data files removed, or are
        # named in a warning: a fio client's tiny job takes 1.3-1.4 s on a
        # quiet machine, and main gave the removal 1 s, so every host's files
        # stayed; now 2.5 s, and beside a load a slower client may still miss
        # it (a stressed soak's did), which the warning must then say
        said = " ".join((out + err).split())
        for server in servers:
            left = list(server_dir(tmp_path, server.address).glob("iorig-*"))
            named = f"could not remove iorig's data file(s) on {server.address.label}" in said
            assert bool(left) == named, (server.address.label, left, out + err)
            for path in left:  # for the hung run below, as a user would
                path.unlink()
        proc = stack.enter_context(_run(tmp_path, db, servers, "20s"))
        _measuring(proc, db, servers)
        hung = servers[1]
        tree = _signal_tree(hung, signal.SIGSTOP)
        stack.callback(lambda: [os.kill(p, signal.SIGCONT) for p in tree if _exists(p)])
        wait_until(lambda: _stopped(tree), 10, f"{hung.address.label}'s processes stopped")
        time.sleep(1.0)  # on purpose: the host hung a while, not just stopped, at the Ctrl-C
        took, out, err = _ctrl_c(proc)
        clients_left = _local_clients(tmp_path)
    assert proc.returncode == 130, out + err
    # the healthy client gets its results back; the hung one is given the
    # client's stop steps (SIGINT, SIGTERM, then SIGKILL's wait) and no more:
    # a hung host adds at most those to what ending takes with none. Not a
    # bound in seconds alone: beside the timing stage's other tests and a
    # load, a healthy end itself has taken 3 s (a second signal kills at
    # once: test_processes.py)
    allowance = sum(wait for _sig, wait in CLIENT_STOP)
    print(f"ctrl-c took {took:.2f} s, {healthy_took:.2f} s with no host hung")
    assert took < healthy_took + allowance, (
        f"the run took {took:.1f} s to end after Ctrl-C with a host hung, "
        f"{healthy_took:.1f} s with none: more than the client's stop steps ({allowance:g} s)"
    )
    assert "Traceback" not in err
    assert clients_left == []
    (status, _), hosts = stored_hosts(db)
    assert status == "aborted"
    healthy = servers[0].address.label
    # the hung host's data file is not asked for: it cannot answer
    said = " ".join((out + err).split())
    assert (
        f"could not remove iorig's data file(s) on {hung.address.label}: it did not "
        "answer the stop request"
    ) in said, out + err
    assert hosts[hung.address.label][0] == "failed"
    assert hung.address.label in (hosts[hung.address.label][2] or "")
    # the healthy host answered the stop: its figures are kept
    assert hosts[healthy][0] == "ok" and (hosts[healthy][1] or 0) > 0, hosts


def _exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


# free-running on two servers (a paced job may rightly log nothing in a
# second). Beside the timing tests its first seconds once came too late to
# keep when it stalled the host 2.5 s after the prefill; it now waits for
# fio's logged seconds of I/O on both hosts first (tests/waiting.py)
@pytest.mark.timing
@pytest.mark.parametrize("paced", [False, True], ids=["free", "paced"])
def test_a_host_stalled_mid_phase_fails_the_phase_naming_it_and_its_seconds_are_cut(
    tmp_path, paced
):
    """Paced or not: on main a paced phase stopped mid-way was stored ok,
    fio's catch-up burst counted as measured seconds (issue 48)."""
    db = tmp_path / "results.sqlite"
    with contextlib.ExitStack() as stack:
        servers = [stack.enter_context(fio_server(tmp_path, index=i)) for i in range(2)]
        proc = stack.enter_context(_run(tmp_path, db, servers, "8s", paced=paced))
        # two whole seconds of I/O on both hosts before the stall: logged, so
        # kept (a stall 1 s after the launch came before the first, on a busy machine)
        _measuring(proc, db, servers, seconds=3)
        stalled = servers[1]
        _signal_tree(stalled, signal.SIGSTOP)
        stopped_at = time.monotonic()
        time.sleep(4.0)  # on purpose: the stall the error must name (3-6 s of it)
        _signal_tree(stalled, signal.SIGCONT)
        out, err = proc.communicate(timeout=90)
        assert time.monotonic() - stopped_at < 60
    assert proc.returncode == 1, out + err
    (status, error), _ = stored_hosts(db)
    assert status == "failed"
    label = stalled.address.label
    assert f"{label} logged nothing in seconds" in error, error
    # the stretch reported covers the 4 s the server was stopped (to a window)
    first, last = (int(x) for x in error.split("in seconds ")[1].split(" ")[0].split("–"))
    assert 3 <= last - first + 1 <= 6, error
    shown = subprocess.run(
        [sys.executable, "-m", "iorig", "show", "last", "--json"],
        cwd=REPO,
        env=dict(os.environ, IORIG_DB=str(db)),
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    samples = [s for s in json.loads(shown)["samples"] if s["kind"] == "measure"]
    assert samples, "the seconds before the stall are kept"
    # none of the stalled host's seconds at or after its stall, on its own
    # axis (the error's); the aggregate's is the first host's, which a host
    # started a second later shifts (a fresh clone beside stress-ng)
    with Store(db) as store:
        (run_id,) = store.run_ids(limit=1)
        phase = next(p for p in store.load_run(run_id).phases if p.kind is PhaseKind.MEASURE)
    (host,) = [sc for sc in phase.host_scopes if sc.scope.host == label]
    kept = host.series[ALL].t_s if ALL in host.series else np.array([])
    # every scope's seconds, to tell a cut from a series never built
    seconds = {
        str(sc.scope): {str(d): s.t_s.tolist() for d, s in sc.series.items()} for sc in phase.scopes
    }
    assert len(kept) and int(kept.max()) < first, (error, seconds)


@pytest.mark.timing
def test_a_killed_client_leaves_no_jobs_running_on_its_server(tmp_path):
    db = tmp_path / "results.sqlite"
    with contextlib.ExitStack() as stack:
        servers = [stack.enter_context(fio_server(tmp_path, index=i)) for i in range(2)]
        proc = stack.enter_context(_run(tmp_path, db, servers, "8s"))
        _measuring(proc, db, servers)
        victim = servers[1]
        assert victim.pid is not None
        assert len(process_tree(victim.pid)) > 1, "the server runs the phase's jobs"
        mine = [
            pid
            for pid in _local_clients(tmp_path)
            if victim.address.label.split(":")[0].encode()
            in Path(f"/proc/{pid}/cmdline").read_bytes()
        ]
        assert len(mine) == 1
        os.kill(mine[0], signal.SIGKILL)
        killed_at = time.monotonic()
        left = process_tree(victim.pid)
        while len(left) > 1 and time.monotonic() - killed_at < 10:
            time.sleep(0.1)
            left = process_tree(victim.pid)
        gone_after = time.monotonic() - killed_at
        print(f"killed client: server jobs gone after {gone_after:.2f} s")
        out, err = proc.communicate(timeout=90)
    # the server's job process and its workers are gone within seconds, not
    # after the seconds the phase had left
    assert left == [victim.pid], left
    assert gone_after < 3.0, gone_after
    assert proc.returncode == 1, out + err
    (status, error), hosts = stored_hosts(db)
    assert status == "failed" and "killed by signal 9" in error, error
    assert hosts[servers[0].address.label][0] == "ok"
