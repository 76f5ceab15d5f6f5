"""Two runs on one target at once (issue 27): both used to be stored ``ok``
with halved figures and no warning. A target in use by another iorig run is
refused before the second run stores anything or creates any file, naming
the first run; the lock dies with its owner (``kill -9``), so the next run
goes ahead; and I/O on the target's device that is not fio's own is named
by the audit."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import signal
import subprocess
from pathlib import Path

import pytest
from tests.conftest import HAS_FIO
from tests.faults.killed import kill9, loop_device, run, run_ids, start
from tests.faults.watch import wait_stored
from tests.fioservers import paced_scenario
from tests.waiting import wait_until

from iorig.fio.server import process_tree
from iorig.machine import statedir
from iorig.machine.locks import target_keys
from iorig.store import Store

pytestmark = pytest.mark.fio

SHORT = ("--rw", "randread", "--bs", "4k", "--size", "16MiB", "--duration", "1s")


def holding(tmp_path: Path) -> tuple[str, ...]:
    """A run that holds its target 30 s at a paced 200 IOPS: the run the
    second one meets, light on a machine other tests share."""
    scenario = tmp_path / "held.yaml"
    scenario.write_text(paced_scenario(200, "30s"))
    return (str(scenario),)


def _second_run_is_refused(target: str, tmp_path: Path, env: dict[str, str] | None = None) -> str:
    """The first run's id, once a second was refused and a third was not."""
    first_db, second_db = tmp_path / "first.sqlite", tmp_path / "second.sqlite"
    names = [f"{key}.lock" for key in target_keys(target, "data")]  # what the first run locks
    first = start(first_db, "run", *holding(tmp_path), "--target", target, env=env)
    try:
        wait_stored(first, first_db, "runs")
        (first_id,) = run_ids(first_db)
        held = {name: (statedir.shared() / name).read_text() for name in names}
        assert all(first_id in text for text in held.values()), held
        place = Path(target.rstrip("/")).parent  # (a device's: /dev, where others come and go)
        before = sorted(p.name for p in place.iterdir()) if place != Path("/dev") else []
        second = run(second_db, "run", *SHORT, "--target", target, env=env)
        assert second.returncode == 2, second.stdout + second.stderr
        assert f"in use by iorig run {first_id}" in second.stderr, second.stderr
        assert "Traceback" not in second.stderr
        assert run_ids(second_db) == []  # no run row
        after = sorted(p.name for p in place.iterdir()) if place != Path("/dev") else []
        assert after == before  # no file of the second run
        assert first.poll() is None  # the first run goes on
        kill9(first)
    finally:
        if first.poll() is None:
            first.kill()
            first.communicate()
    # the lock died with its owner: the next run is not refused
    third = run(second_db, "run", *SHORT, "--target", target, env=env)
    assert third.returncode == 0, third.stdout + third.stderr
    assert not any((statedir.shared() / name).exists() for name in names)  # none left behind
    return first_id


@pytest.mark.parametrize("kind", ["file", "directory"])
def test_a_second_run_on_a_target_in_use_is_refused_naming_the_first(kind, scratch, tmp_path):
    place = scratch / "t"
    place.mkdir()
    target = f"{place}/data.bin" if kind == "file" else f"{place}/"
    _second_run_is_refused(target, tmp_path)


@pytest.mark.blockdev
def test_a_second_run_on_a_block_device_in_use_is_refused(tmp_path, scratch, monkeypatch):
    # the machine-wide default (/run/lock/iorig), not the test's own directory
    monkeypatch.delenv("IORIG_STATE_DIR")
    assert statedir.shared() == statedir.BASES[0] / "iorig" or not statedir.BASES[0].is_dir()
    with loop_device(scratch) as device:
        _second_run_is_refused(str(device), tmp_path, dict(os.environ))


def _busy(device: Path, seconds: float) -> subprocess.Popen:
    """Another program reading the device: a bare fio, no iorig run."""
    return subprocess.Popen(
        [
            "fio",
            "--name=other",
            f"--filename={device}",
            "--rw=randread",
            "--bs=4k",
            "--direct=1",
            "--rate_iops=2000",
            "--time_based",
            f"--runtime={seconds:g}",
            "--output=/dev/null",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )


def _reads(device: Path) -> int:
    """Reads the kernel completed on ``device`` (/sys/block/NAME/stat)."""
    return int((Path("/sys/block") / device.name / "stat").read_text().split()[0])


def _held_for(run_id: str) -> list[str]:
    """The lock files in the state directory a live process holds that name
    ``run_id`` (flock'd, as a run taking them would find them)."""
    held = []
    for path in statedir.shared().glob("*.lock"):
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError:
            continue  # removed meanwhile: free
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)  # free: let go at the close
        except BlockingIOError:
            if run_id in path.read_text(errors="replace"):
                held.append(path.name)
        finally:
            os.close(fd)
    return held


def _freed(run_id: str) -> None:
    """Wait until the host has freed the killed run's locks: it notices the
    lost connection within seconds."""
    wait_until(
        lambda: not _held_for(run_id),
        30,
        f"the host freeing the locks of the killed run {run_id}",
        detail=lambda: _held_for(run_id),
    )


def _device_warnings(db: Path) -> list[dict]:
    shown = run(db, "show", "last", "--json")
    assert shown.returncode == 0, shown.stderr
    return [w for w in json.loads(shown.stdout)["run"]["warnings"] if w["code"] == "device-busy"]


@pytest.mark.blockdev
@pytest.mark.skipif(not HAS_FIO, reason="fio is not installed")
def test_other_io_on_the_targets_device_is_named_by_the_audit(tmp_path, scratch):
    with loop_device(scratch) as device:
        quiet_db, busy_db = tmp_path / "quiet.sqlite", tmp_path / "busy.sqlite"
        scenario = tmp_path / "paced.yaml"
        scenario.write_text(paced_scenario(1000, "3s"))
        args = ("run", str(scenario), "--target", str(device))
        quiet = run(quiet_db, *args)
        assert quiet.returncode == 0, quiet.stdout + quiet.stderr
        assert _device_warnings(quiet_db) == []  # fio's own I/O alone: nothing to name
        reads = _reads(device)
        other = _busy(device, 30)
        try:
            wait_until(
                lambda: _reads(device) > reads,
                30,
                f"the other fio reading {device}",
                detail=lambda: f"{_reads(device) - reads} reads",
                proc=other,
            )
            busy = run(busy_db, *args)
        finally:
            # the whole tree: fio's job worker calls setsid() and holds stderr
            # open, so killing fio's parent alone left communicate() waiting
            # out the worker's 30 s (fio/process.py)
            for pid in process_tree(other.pid):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            other.communicate()
        assert busy.returncode == 0, busy.stdout + busy.stderr
        found = _device_warnings(busy_db)
        assert found, "the device did three times fio's I/Os and the audit said nothing"
        assert device.name in found[0]["message"], found


@pytest.mark.blockdev
@pytest.mark.skipif(not HAS_FIO, reason="fio is not installed")
def test_fios_own_ios_split_by_the_device_are_not_other_io(tmp_path, scratch):
    """1 MiB reads on a loop device: each may be two requests to it, its
    128 segments (512 KiB where each page is a segment) the limit before its
    max_sectors_kb (1280): the device's counts are fio's own, not another
    program's. Whether a read splits is the buffer's: pages that happen to
    be physically adjacent merge into one segment (a soak round's 7,709
    reads took 7,773 requests, session 59's runs nearly twice as many)."""
    with loop_device(scratch) as device:
        db = tmp_path / "r.sqlite"
        before = _reads(device)
        done = run(db, "run", "--rw", "read", "--bs", "1m", "--iodepth", "4",
                   "--duration", "2s", "--size", "32MiB", "--target", str(device))  # fmt: skip
        assert done.returncode == 0, done.stdout + done.stderr
        requests = _reads(device) - before
        with Store(db) as store:
            (run_id,) = store.run_ids(limit=1)
            ios = sum(
                p.aggregate.totals["read"].ios
                for p in store.load_run(run_id).phases
                if "read" in p.aggregate.totals
            )
        # the device split them or not: a request or two each (and the engine
        # probe's few 4 KiB reads)
        print(f"1 MiB reads: {ios} by fio, {requests} requests to the device")
        assert ios <= requests <= 2 * ios + 64, (requests, ios)
        assert _device_warnings(db) == [], "fio's own I/O alone was called another program's"


# ------------------------------------------------------------ many hosts

REMOTE_SHORT = ("--rw", "randread", "--bs", "4k", "--size", "16MiB", "--duration", "1s")


def _second_remote_run_is_refused(
    hosts: str, env: dict[str, str], tmp_path: Path, local_target: Path
) -> None:
    """A run through ``hosts``, then another one there and one on this
    machine on the same file (the host is this machine): both refused naming
    the first; once it is killed the next run goes ahead."""
    first_db = tmp_path / "first.sqlite"
    first = start(first_db, "run", *holding(tmp_path), "--hosts", hosts, env=env)
    try:
        wait_stored(first, first_db, "runs")
        (first_id,) = run_ids(first_db)
        second = run(tmp_path / "second.sqlite", "run", *REMOTE_SHORT, "--hosts", hosts, env=env)
        assert second.returncode == 2, second.stdout + second.stderr
        said = " ".join(second.stderr.split())
        assert f"in use by iorig run {first_id}" in said and hosts in said, said
        assert run_ids(tmp_path / "second.sqlite") == []
        here = run(tmp_path / "here.sqlite", "run", *SHORT, "--target", str(local_target), env=env)
        assert here.returncode == 2, here.stdout + here.stderr
        assert f"in use by iorig run {first_id}" in " ".join(here.stderr.split())
        kill9(first)  # its connection to the host ends: the host frees the lock
    finally:
        if first.poll() is None:
            first.kill()
            first.communicate()
    _freed(first_id)
    # (the killed run's file is still on the host: an agent cannot tell it is)
    third = run(
        tmp_path / "third.sqlite",
        "run",
        *REMOTE_SHORT,
        "--hosts",
        hosts,
        "--allow-destroy",
        env=env,
    )
    assert third.returncode == 0, third.stdout + third.stderr


@pytest.mark.system
def test_a_target_in_use_through_an_agent_is_refused_there_and_here(tmp_path):
    from tests.agents import token_agents

    with token_agents(1, tmp_path) as lab:
        env = {**os.environ, **lab.env}
        workdir = lab.agents[0].workdir
        _second_remote_run_is_refused(lab.hosts_arg, env, tmp_path, workdir / "iorig-data.dat")


@pytest.mark.system
def test_a_target_in_use_over_ssh_is_refused_there_and_here(tmp_path):
    from tests.sshd import ssh_hosts

    with ssh_hosts(1, tmp_path) as lab:
        target = lab.base / "shared.dat"  # an absolute path on the host: --allow-destroy
        hosts = lab.hosts[0].label
        env = lab.env
        first_db = tmp_path / "first.sqlite"
        args = ("--target", str(target), "--allow-destroy")
        first = start(first_db, "run", *holding(tmp_path), "--hosts", hosts, *args, env=env)
        try:
            wait_stored(first, first_db, "runs")
            (first_id,) = run_ids(first_db)
            second = run(
                tmp_path / "second.sqlite", "run", *REMOTE_SHORT, "--hosts", hosts, *args, env=env
            )
            assert second.returncode == 2, second.stdout + second.stderr
            assert f"in use by iorig run {first_id}" in " ".join(second.stderr.split())
            here = run(
                tmp_path / "here.sqlite",
                "run",
                *SHORT,
                "--target",
                str(target),
                "--allow-destroy",
                env=env,
            )
            assert here.returncode == 2, here.stdout + here.stderr
            kill9(first)  # the session ends: the keeper frees the lock as it exits
        finally:
            if first.poll() is None:
                first.kill()
                first.communicate()
        _freed(first_id)
        third = run(
            tmp_path / "third.sqlite", "run", *REMOTE_SHORT, "--hosts", hosts, *args, env=env
        )
        assert third.returncode == 0, third.stdout + third.stderr
