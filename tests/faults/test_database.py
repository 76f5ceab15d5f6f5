"""The results database under faults: locked by another writer, read-only,
empty (0 bytes), and runs whose owner process is gone or was replaced.

A finished phase is never lost: a write waits out another writer's lock
(``IORIG_DB_LOCK_WAIT`` seconds, short here) and then the run goes to a
recovery file that ``iorig import`` puts back. A database a run could not
write to is refused before the target or fio is touched.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from tests import builders
from tests.conftest import REPO, refused_in_process
from tests.waiting import wait_until

from iorig.errors import UserError
from iorig.model import RunStatus
from iorig.run.safekeeping import Keeper
from iorig.store import Store, Unwritable, import_runs, owner, recovery_path, write_recovery
from iorig.store.repository import STOP_GRACE_S

RUN = ["run", "--rw", "randread", "--size", "16MiB", "--duration", "2s"]
# after the lock's wait, the recovery file written and iorig's exit: 1.1 s
# quiet, up to 2.0 s beside stress-ng (4.04 s from the signal in all, against
# a bound of 4 s that counted fio's stop in it); the brief's "a few seconds"
RECOVERY_S = 3.0


def _fio_children(pid: int) -> list[int]:
    """fio processes whose parent is ``pid`` (iorig's own fio, not another test's)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            name, rest = stat[stat.index("(") + 1 : stat.rindex(")")], stat[stat.rindex(")") + 2 :]
            if name.startswith("fio") and int(rest.split()[1]) == pid:
                found.append(int(entry.name))
    return found


def _env(db: Path, **extra: str) -> dict[str, str]:
    return dict(os.environ, IORIG_DB=str(db), COLUMNS="160", NO_COLOR="1", **extra)


def _iorig(db: Path, *args: str, **extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "iorig", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=_env(db, **extra),
        cwd=REPO,
    )


def _count(db: Path, sql: str) -> int:
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return int(conn.execute(sql).fetchone()[0])
    except sqlite3.Error:
        return 0
    finally:
        conn.close()


class LockHolder:
    """A second connection holding the write lock (``BEGIN EXCLUSIVE``) once
    ``ready()`` says so, until ``release`` or ``hold_s`` seconds."""

    def __init__(self, db: Path, ready, hold_s: float) -> None:
        self.db, self.ready, self.hold_s = db, ready, hold_s
        self.locked_at: float | None = None
        self.released_at: float | None = None  # wall clock, as phases record time
        self._release = threading.Event()
        self._thread = threading.Thread(target=self._hold, daemon=True)
        self._thread.start()

    def _hold(self) -> None:
        deadline = time.monotonic() + 60
        while not self.ready() and time.monotonic() < deadline and not self._release.is_set():
            time.sleep(0.05)
        if self._release.is_set():
            return
        conn = sqlite3.connect(self.db, isolation_level=None, timeout=10)
        conn.execute("BEGIN EXCLUSIVE")
        self.locked_at = time.time()
        self._release.wait(self.hold_s)
        conn.execute("ROLLBACK")
        conn.close()
        self.released_at = time.time()

    def release(self) -> None:
        self._release.set()
        self._thread.join(15)


def _run_under_lock(db: Path, target: Path, hold_s: float, wait_s: str):
    """``iorig run`` whose measured phase ends while another writer holds the
    lock (taken once the prefill phase is stored)."""
    holder = LockHolder(db, lambda: _count(db, "SELECT COUNT(*) FROM phases") >= 1, hold_s)
    try:
        done = _iorig(db, *RUN, "--target", f"{target}/", IORIG_DB_LOCK_WAIT=wait_s)
    finally:
        holder.release()
    assert holder.locked_at is not None, done.stdout + done.stderr
    return done, holder


def _run_id(db: Path) -> str:
    conn = sqlite3.connect(db)
    try:
        (run_id,) = conn.execute("SELECT id FROM runs").fetchone()
        return str(run_id)
    finally:
        conn.close()


def _phase_names(db: Path, run_id: str) -> list[str]:
    with Store(db) as store:
        return [p.name for p in store.load_run(run_id).phases]


def _show(db: Path, run_id: str) -> dict:
    done = _iorig(db, "show", run_id, "--json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@pytest.mark.fio
def test_a_lock_held_past_the_wait_keeps_the_phase_in_a_recovery_file(scratch, tmp_path):
    db = tmp_path / "results.sqlite"
    Store(db).close()
    done, _ = _run_under_lock(db, scratch, hold_s=40, wait_s="1")
    out = done.stdout + done.stderr
    assert "Traceback" not in out, out
    assert done.returncode == 1, out
    run_id = _run_id(db)
    kept = recovery_path(db, run_id)
    assert kept.is_file(), out
    assert f"import {kept}" in " ".join(out.split()), out
    with Store(kept) as store:
        recovered = store.load_run(run_id)
    assert [p.name for p in recovered.phases] == ["fill", "randread"]
    assert recovered.run.status is RunStatus.FAILED
    assert "stayed locked" in (recovered.run.error or "")
    measured = recovered.phases[1].aggregate
    assert measured is not None and measured.totals["all"].ios > 0
    # the lock is gone; `runs` marks the run aborted and names the recovery file
    runs = _iorig(db, "runs")
    assert runs.returncode == 0, runs.stderr
    assert _show(db, run_id)["run"]["status"] == "aborted"
    assert _phase_names(db, run_id) == ["fill"]  # only the prefill reached the database
    imported = _iorig(db, "import", str(kept))
    assert imported.returncode == 0 and f"{run_id}: imported" in imported.stdout, imported
    assert _show(db, run_id)["run"]["status"] == "failed"
    assert _phase_names(db, run_id) == ["fill", "randread"]
    with Store(db) as store:
        back = store.load_run(run_id).phases[1].aggregate
    assert back is not None
    assert back.totals["all"].ios == measured.totals["all"].ios
    assert back.totals["all"].iops == measured.totals["all"].iops
    assert np.array_equal(back.series["all"].iops, measured.series["all"].iops)
    again = _iorig(db, "import", str(kept))  # a second import changes nothing
    assert f"{run_id}: already present, skipped" in again.stdout, again
    assert _phase_names(db, run_id) == ["fill", "randread"]


@pytest.mark.fio
def test_sigterm_while_the_database_is_locked_ends_in_seconds_with_a_recovery_file(
    scratch, tmp_path
):
    # another writer holds the lock for a minute from the measured phase on,
    # and iorig would wait ten: SIGTERM ends it within seconds all the same,
    # what it measured kept in a recovery file (issue 48)
    db = tmp_path / "results.sqlite"
    Store(db).close()
    holder = LockHolder(db, lambda: _count(db, "SELECT COUNT(*) FROM phases") >= 1, 60)
    proc = subprocess.Popen(
        [sys.executable, "-m", "iorig", *RUN, "--target", f"{scratch}/"],
        env=_env(db, IORIG_DB_LOCK_WAIT="600"),
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        wait_until(lambda: holder.locked_at, 60, "the lock taken after the prefill", proc=proc)
        proc.send_signal(signal.SIGTERM)
        signalled = time.monotonic()
        # fio's own stop (it ends its I/Os and writes what it measured) is
        # fio's time, however loaded the machine: measured, not allowed for
        wait_until(lambda: not _fio_children(proc.pid), 30, "fio stopped", proc=proc)
        fio_stopped_s = time.monotonic() - signalled
        out, err = proc.communicate(timeout=60)
        ended_after_s = time.monotonic() - signalled
    finally:
        if proc.poll() is None:
            proc.kill()
        holder.release()
    print(
        f"SIGTERM: fio stopped after {fio_stopped_s:.2f} s, iorig ended after {ended_after_s:.2f} s"
    )
    # then iorig waits STOP_GRACE_S for the lock and writes the recovery file
    assert ended_after_s - fio_stopped_s < STOP_GRACE_S + RECOVERY_S, (ended_after_s, out, err)
    assert proc.returncode == 130 and "Traceback" not in err, out + err
    kept = recovery_path(db, _run_id(db))
    assert kept.is_file() and f"import {kept}" in " ".join((out + err).split()), out + err
    with Store(kept) as store:
        recovered = store.load_run(_run_id(db))
    assert recovered.run.status is RunStatus.ABORTED, recovered.run
    assert [p.name for p in recovered.phases][:1] == ["fill"]


@pytest.mark.fio
def test_a_lock_shorter_than_the_wait_delays_the_phase_and_loses_nothing(scratch, tmp_path):
    db = tmp_path / "results.sqlite"
    Store(db).close()
    done, holder = _run_under_lock(db, scratch, hold_s=4, wait_s="30")
    assert done.returncode == 0, done.stdout + done.stderr
    with Store(db) as store:
        measured = store.load_run(_run_id(db)).phases[1]
    assert measured.ended_at < holder.released_at  # so storing it waited for the lock
    run_id = _run_id(db)
    assert not recovery_path(db, run_id).exists()
    assert _show(db, run_id)["run"]["status"] == "ok"
    assert _phase_names(db, run_id) == ["fill", "randread"]


def test_store_writes_wait_for_a_lock_with_backoff_then_give_up(tmp_path):
    db = tmp_path / "r.sqlite"
    with Store(db, lock_wait_s=5) as store:
        other = sqlite3.connect(db, isolation_level=None, check_same_thread=False)
        other.execute("BEGIN EXCLUSIVE")
        threading.Timer(0.5, lambda: other.execute("ROLLBACK")).start()
        started = time.monotonic()
        store.create_run(builders.record("0123456789ab", status=RunStatus.RUNNING))
        assert time.monotonic() - started >= 0.4
        other.execute("BEGIN EXCLUSIVE")
        store.lock_wait_s = 0.5
        with pytest.raises(Unwritable, match="stayed locked by another writer") as caught:
            store.finish_run("0123456789ab", RunStatus.OK)
        assert "IORIG_DB_LOCK_WAIT" in str(caught.value)
        other.execute("ROLLBACK")
        assert store.conn.in_transaction is False
        store.finish_run("0123456789ab", RunStatus.OK)


@pytest.mark.system
def test_reading_commands_do_not_wait_for_a_lock_to_reap(tmp_path):
    db = tmp_path / "r.sqlite"
    dead = subprocess.Popen(["true"])
    dead.wait()
    with Store(db) as store:
        store.create_run(
            builders.record(
                "0123456789ab",
                status=RunStatus.RUNNING,
                pid=dead.pid,
                hostname=socket.gethostname(),
            )
        )
    other = sqlite3.connect(db, isolation_level=None)
    other.execute("BEGIN EXCLUSIVE")
    try:
        started = time.monotonic()
        done = _iorig(db, "runs", "--json", IORIG_DB_LOCK_WAIT="60")
        assert done.returncode == 0, done.stderr
        assert time.monotonic() - started < 20
        assert json.loads(done.stdout)["runs"][0]["status"] == "running"  # reaped later
    finally:
        other.execute("ROLLBACK")
    done = _iorig(db, "runs", "--json")
    assert json.loads(done.stdout)["runs"][0]["status"] == "aborted"


@pytest.mark.system
def test_a_bad_lock_wait_is_refused():
    done = _iorig(Path("/nonexistent/r.sqlite"), "runs", IORIG_DB_LOCK_WAIT="soon")
    assert done.returncode == 2 and "IORIG_DB_LOCK_WAIT='soon'" in done.stderr, done


# ------------------------------------------------------- refused before writing


@pytest.fixture
def fio_spy(tmp_path: Path) -> Iterator[tuple[Path, Path]]:
    """A fio that notes each start in a file, then runs the real one."""
    log = tmp_path / "fio-started"
    spy = tmp_path / "fio-spy"
    spy.write_text(f'#!/bin/sh\necho "$@" >> {log}\nexec {shutil.which("fio") or "fio"} "$@"\n')
    spy.chmod(0o755)
    yield spy, log


def _refused_before_writing(db: Path, target: Path, fio_spy, *wanted: str) -> None:
    spy, log = fio_spy
    target.mkdir(exist_ok=True)
    before = _digest(db)
    done = _iorig(db, *RUN, "--fio", str(spy), "--target", f"{target}/")
    out = " ".join((done.stdout + done.stderr).split())
    assert done.returncode == 2, out
    assert "Traceback" not in out, out
    for text in wanted:
        assert text in out, out
    assert list(target.iterdir()) == []  # no target file created
    assert not log.exists(), log.read_text()  # fio never started
    assert _digest(db) == before  # the database unchanged


def _digest(path: Path) -> str | None:
    return hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else None


def _need_root(tool: str) -> None:
    if os.geteuid() != 0 or not shutil.which(tool):
        pytest.skip(f"needs root and {tool} (as root, chmod alone does not stop writes)")


@pytest.mark.system
def test_an_empty_file_is_not_a_database_and_is_never_given_a_schema(tmp_path, fio_spy):
    db = tmp_path / "results.sqlite"
    db.touch()
    _refused_before_writing(db, tmp_path / "target", fio_spy, "is empty (0 bytes)", "--db")
    for args in (["runs"], ["show"], ["import", str(tmp_path / "x.sqlite")]):
        done = _iorig(db, *args)
        assert done.returncode == 2 and "is empty (0 bytes)" in done.stderr, (args, done)
    assert db.stat().st_size == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fio-spy", "results.sqlite", "target"]


@pytest.mark.system  # root: chattr
def test_an_immutable_database_file_is_refused_before_the_target(tmp_path, fio_spy):
    _need_root("chattr")
    db = tmp_path / "results.sqlite"
    with Store(db) as store:
        store.add_runs([builders.stored("0123456789ab", None, [])])
    if subprocess.run(["chattr", "+i", str(db)], capture_output=True).returncode != 0:
        pytest.skip("this filesystem has no immutable attribute")
    try:
        _refused_before_writing(db, tmp_path / "target", fio_spy, "is read-only", "--db")
        runs = _iorig(db, "runs", "--json")  # reading still works
        assert runs.returncode == 0, runs.stderr
        assert [r["id"] for r in json.loads(runs.stdout)["runs"]] == ["0123456789ab"]
    finally:
        subprocess.run(["chattr", "-i", str(db)], check=True)


_GROW_THE_SHARED_MEMORY = """
import subprocess, sys
from iorig.store import Store, Unwritable
db = sys.argv[1]
with Store(db) as store:
    store.write(lambda c: c.execute("CREATE TABLE filler (x BLOB)"))
    subprocess.run(["chattr", "+i", db + "-shm"], check=True)
    try:  # 5,000 pages in one transaction: the WAL's index outgrows its first 32 KiB
        store.write(lambda c: c.executemany(
            "INSERT INTO filler VALUES (zeroblob(4000))", [()] * 5000))
        print("written")
    except Unwritable as exc:
        print("unwritable:", exc.message, "|", exc.hint)
    finally:
        subprocess.run(["chattr", "-i", db + "-shm"], check=True)
"""


@pytest.mark.system  # root: chattr
def test_an_immutable_shared_memory_file_is_unwritable_not_a_sigbus(tmp_path):
    # SQLite grows the -shm file as the WAL grows and maps it; made immutable
    # mid-run, the mapping went past its end and iorig died of SIGBUS, no
    # recovery file written (issue 48). A write now checks it first.
    _need_root("chattr")
    db = tmp_path / "results.sqlite"
    try:
        done = subprocess.run(
            [sys.executable, "-c", _GROW_THE_SHARED_MEMORY, str(db)],
            cwd=REPO, capture_output=True, text=True, timeout=60,
        )  # fmt: skip
    finally:  # the process may have died before its own chattr -i
        subprocess.run(["chattr", "-i", f"{db}-shm"], capture_output=True, check=False)
    if "Operation not supported" in done.stderr:
        pytest.skip("this filesystem has no immutable attribute")
    assert done.returncode == 0, (done.returncode, done.stderr[-2000:])
    said = " ".join(done.stdout.split())
    assert f"unwritable: {db}-shm (the database's shared memory) may no longer" in said, said
    assert "the recovery file" in said


@pytest.fixture
def read_only_dir(tmp_path: Path) -> Iterator[Path]:
    """A small tmpfs holding a results database, remounted read-only."""
    _need_root("mount")
    mnt = tmp_path / "ro"
    mnt.mkdir()
    if (
        subprocess.run(
            ["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(mnt)], capture_output=True
        ).returncode
        != 0
    ):
        pytest.skip("this machine does not allow mounting a tmpfs")
    try:
        with Store(mnt / "results.sqlite") as store:
            store.add_runs([builders.stored("0123456789ab", None, [])])
        subprocess.run(["mount", "-o", "remount,ro", str(mnt)], check=True)
        yield mnt
    finally:
        subprocess.run(["umount", str(mnt)], check=True)


@pytest.mark.system  # root: a tmpfs remounted read-only
def test_a_database_in_a_read_only_directory_is_refused_before_the_target(
    read_only_dir, tmp_path, fio_spy
):
    target = tmp_path / "target"
    _refused_before_writing(
        read_only_dir / "results.sqlite", target, fio_spy, "is read-only", "remount"
    )
    # a new database there too
    wanted = f"directory {read_only_dir} of the results database is read-only"
    _refused_before_writing(read_only_dir / "new" / "results.sqlite", target, fio_spy, wanted)


@pytest.mark.system
@pytest.mark.parametrize("kind", ["directory", "not sqlite"])
def test_other_files_are_refused_by_what_they_are(tmp_path, fio_spy, kind):
    db = tmp_path / "results.sqlite"
    if kind == "directory":
        db.mkdir()
        wanted = "is a directory"
    else:
        db.write_text("hello\n")
        wanted = "not an iorig results database"
    done = _iorig(db, *RUN, "--target", f"{tmp_path / 't'}/")
    assert done.returncode == 2 and wanted in done.stderr, done
    assert "Traceback" not in done.stderr


# ----------------------------------------------------------- stale-run owner


@pytest.fixture
def sleeper() -> Iterator[subprocess.Popen]:
    """A live python process unrelated to any run."""
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    yield proc
    proc.kill()
    proc.wait()


def _started_after(other: subprocess.Popen) -> subprocess.Popen:
    """A python process whose start time (in clock ticks, 10 ms here) is not
    ``other``'s: two started in one tick are one process to the owner check,
    which made the test below fail now and then."""
    while True:
        proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
        if owner.start_time(proc.pid) != owner.start_time(other.pid):
            return proc
        proc.kill()
        proc.wait()


def _running(store: Store, run_id: str, pid: int) -> None:
    store.create_run(
        builders.record(run_id, status=RunStatus.RUNNING, pid=pid, hostname=socket.gethostname())
    )


def _status(store: Store, run_id: str) -> str:
    return str(store.load_run(run_id).run.status)


@pytest.mark.system
def test_a_live_process_that_is_not_the_owner_does_not_keep_a_run_running(tmp_path, sleeper):
    with Store(tmp_path / "r.sqlite") as store:
        # the run's owner ended, and its pid now belongs to another python process
        gone = _started_after(sleeper)
        _running(store, "0123456789ab", gone.pid)
        gone.kill()
        gone.wait()
        store.conn.execute("UPDATE runs SET pid = ?", (sleeper.pid,))
        assert store.reap_stale() == ["0123456789ab"]
        assert _status(store, "0123456789ab") == "aborted"
        assert f"pid {sleeper.pid}" in (store.load_run("0123456789ab").run.error or "")


@pytest.mark.system
def test_the_owner_is_compared_by_pid_start_time_and_boot(tmp_path, sleeper):
    with Store(tmp_path / "r.sqlite") as store:
        _running(store, "0123456789ab", sleeper.pid)  # the owner itself, alive
        _running(store, "0123456789ac", sleeper.pid)
        _running(store, "0123456789ad", sleeper.pid)
        started = owner.start_time(sleeper.pid)
        assert started is not None
        wrong = str(int(started) + 1)
        store.conn.execute("UPDATE runs SET owner_started = ? WHERE id LIKE '%ac'", (wrong,))
        store.conn.execute("UPDATE runs SET owner_boot = 'another-boot' WHERE id LIKE '%ad'")
        assert sorted(store.reap_stale()) == ["0123456789ac", "0123456789ad"]
        assert _status(store, "0123456789ab") == "running"
        sleeper.kill()
        sleeper.wait()
        assert store.reap_stale() == ["0123456789ab"]


@pytest.mark.system
def test_iorig_in_another_pid_namespace_leaves_a_live_run_running(tmp_path, sleeper):
    # a container or `unshare -p` sees none of this namespace's processes: it
    # took every live run for one whose owner is gone and marked it aborted
    db = tmp_path / "r.sqlite"
    with Store(db) as store:
        _running(store, "0123456789ab", sleeper.pid)  # its owner, alive here
    done = subprocess.run(
        ["unshare", "--pid", "--fork", "--mount-proc",
         sys.executable, "-m", "iorig", "--db", str(db), "runs"],
        cwd=REPO, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    with Store(db) as store:
        assert _status(store, "0123456789ab") == "running"
        sleeper.kill()
        sleeper.wait()
        assert store.reap_stale() == ["0123456789ab"]  # here, where it is seen to end


@pytest.mark.system
def test_old_rows_without_a_start_time_keep_the_earlier_rule(tmp_path, sleeper):
    # before schema 4 only the pid was recorded: a live iorig/python process
    # there still counts as the owner (never reap a run that may be going)
    other = subprocess.Popen(["sleep", "120"])
    try:
        with Store(tmp_path / "r.sqlite") as store:
            _running(store, "0123456789ab", sleeper.pid)
            _running(store, "0123456789ac", other.pid)
            store.conn.execute("UPDATE runs SET owner_started = NULL, owner_boot = NULL")
            assert store.reap_stale() == ["0123456789ac"]
            assert _status(store, "0123456789ab") == "running"
    finally:
        other.kill()
        other.wait()


def test_the_v3_database_gets_owner_columns_empty(tmp_path):
    copy = tmp_path / "results.sqlite"
    shutil.copy(REPO / "tests" / "data" / "schema-v3" / "results.sqlite", copy)
    with Store(copy) as store:
        rows = store.conn.execute(
            "SELECT owner_started, owner_boot, recovery_file FROM runs"
        ).fetchall()
    assert rows and set(rows) == {(None, None, None)}


# ------------------------------------------- import completes an unfinished run


def _phases(n: int) -> list:
    return [builders.phase(f"p{i}", np.full(3, 100.0 + i), seq=i) for i in range(n)]


def _unfinished(db: Path, pid: int, stored_phases: int) -> Path:
    """A database whose run is ``running`` with the first phases stored, and
    its recovery file holding the whole run, finished."""
    run = builders.stored(
        "0123456789ab",
        None,
        _phases(3),
        status=RunStatus.FAILED,
        error="stopped",
        pid=pid,
        hostname=socket.gethostname(),
    )
    with Store(db) as store:
        _running(store, "0123456789ab", pid)
        store.conn.execute("UPDATE runs SET ended_at = NULL, status = 'running'")
        for phase in run.phases[:stored_phases]:
            store.save_phase("0123456789ab", phase)
    bundle = recovery_path(db, "0123456789ab")
    with Store(bundle) as kept:
        kept.add_runs([run])
    return bundle


@pytest.mark.system
def test_a_recovery_file_completes_its_run_only_when_the_owner_is_gone(tmp_path):
    db = tmp_path / "r.sqlite"
    bundle = _unfinished(db, os.getpid(), 1)
    with Store(db) as store:
        assert import_runs(store, bundle) == [("0123456789ab", False)]  # owner alive: no
    gone = subprocess.Popen(["true"])
    gone.wait()
    with Store(db) as store:
        store.conn.execute("UPDATE runs SET pid = ?", (gone.pid,))
    with Store(bundle) as kept:
        kept.conn.execute("UPDATE runs SET pid = ?", (gone.pid,))
    with Store(db) as store:
        assert import_runs(store, bundle) == [("0123456789ab", True)]
        run = store.load_run("0123456789ab")
        assert [p.name for p in run.phases] == ["p0", "p1", "p2"]
        assert (run.run.status, run.run.error) == (RunStatus.FAILED, "stopped")


@pytest.mark.system
@pytest.mark.parametrize(
    ("change", "stored_phases"),
    [
        ("UPDATE runs SET started_at = started_at + 1", 1),  # another run, same id
        ("UPDATE runs SET command = 'iorig run evil'", 1),
        ("DELETE FROM phases WHERE seq = 0", 1),  # lacks a phase the database has
    ],
)
def test_a_recovery_file_that_does_not_match_its_run_changes_nothing(
    tmp_path, change, stored_phases
):
    gone = subprocess.Popen(["true"])
    gone.wait()
    db = tmp_path / "r.sqlite"
    bundle = _unfinished(db, gone.pid, stored_phases)
    conn = sqlite3.connect(bundle)
    conn.execute(change)
    conn.commit()
    conn.close()
    with Store(db) as store:
        assert import_runs(store, bundle) == [("0123456789ab", False)]
        run = store.load_run("0123456789ab")
        assert [p.name for p in run.phases] == ["p0"] and run.run.status is RunStatus.RUNNING


def test_a_recovery_file_that_cannot_be_written_anywhere_is_said(tmp_path, monkeypatch):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    monkeypatch.setattr(tempfile, "gettempdir", lambda: str(blocker))
    run = builders.stored("0123456789ab", None, _phases(1))
    with pytest.raises(UserError, match="could not be written anywhere"):
        write_recovery(blocker / "r.sqlite", run)


# ------------------------- a recovery file stays importable until it is imported

RUN_ID = "0123456789ab"
TARGETS = [{"role": "data", "kind": "file", "path": "/x", "given": "/x", "size_bytes": 1}]


def _owner_gone(db: Path) -> None:
    """The run's process ended (its recorded start time no longer matches)."""
    conn = sqlite3.connect(db)
    conn.execute("UPDATE runs SET owner_started = '1'")
    conn.commit()
    conn.close()


def _kept_in_tmpdir(db: Path, tmpdir: Path, monkeypatch, status=RunStatus.FAILED) -> Path:
    """A run whose database would take its first phase only (then filled up):
    it stays ``running`` there, and its recovery file went to ``tmpdir`` (the
    database's own directory was full too)."""
    same = dict(pid=os.getpid(), hostname=socket.gethostname(), targets=TARGETS)
    run = builders.stored(RUN_ID, None, _phases(3), status=status, error="disk full", **same)
    with Store(db) as store:
        store.create_run(builders.record(RUN_ID, status=RunStatus.RUNNING, **same))
        store.save_phase(RUN_ID, run.phases[0])
    # next to the database, no room: in the field ENOSPC, here a directory in the way
    next_to_db = recovery_path(db, RUN_ID)
    next_to_db.mkdir()  # the file cannot take its place
    (next_to_db / "in-the-way").touch()
    monkeypatch.setattr(tempfile, "gettempdir", lambda: str(tmpdir))
    kept = write_recovery(db, run)
    assert kept.parent == tmpdir
    _owner_gone(db)
    return kept


def _reaped(db: Path, tmpdir: Path, monkeypatch) -> RunStatus:
    """What a later `iorig runs` does, with ``tmpdir`` as its TMPDIR."""
    monkeypatch.setattr(tempfile, "gettempdir", lambda: str(tmpdir))
    with Store(db) as store:
        assert store.reap_stale() == [RUN_ID]
        return store.load_run(RUN_ID).run.status


@pytest.mark.parametrize("later_tmpdir", ["same", "another"])
def test_a_recovery_file_in_tmpdir_completes_its_run_after_runs_marked_it_aborted(
    tmp_path, monkeypatch, later_tmpdir
):
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    db = tmp_path / "r.sqlite"
    kept = _kept_in_tmpdir(db, tmpdir, monkeypatch)
    elsewhere = tmp_path / "other-tmp"
    elsewhere.mkdir()
    assert _reaped(db, tmpdir if later_tmpdir == "same" else elsewhere, monkeypatch) == "aborted"
    with Store(db) as store:
        assert import_runs(store, kept) == [(RUN_ID, True)]
        run = store.load_run(RUN_ID)
        assert [p.name for p in run.phases] == ["p0", "p1", "p2"]  # no finished phase lost
        assert (run.run.status, run.run.error) == (RunStatus.FAILED, "disk full")
        assert import_runs(store, kept) == [(RUN_ID, False)]  # imported once, then skipped
        assert [p.name for p in store.load_run(RUN_ID).phases] == ["p0", "p1", "p2"]


def test_runs_and_show_name_the_recovery_file_waiting_to_be_imported(tmp_path, monkeypatch, cli):
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    db = tmp_path / "r.sqlite"
    kept = _kept_in_tmpdir(db, tmpdir, monkeypatch)
    for args in (["runs"], ["show", RUN_ID], ["runs", "--json"], ["show", RUN_ID, "--json"]):
        done = cli(db, *args)
        out = " ".join((done.stdout + done.stderr).split())
        assert done.returncode == 0, out
        assert str(kept) in out and f"import {kept}" in out, (args, out)
    with Store(db) as store:
        import_runs(store, kept)
    for args in (["runs"], ["show", RUN_ID]):
        assert str(kept) not in cli(db, *args).stdout  # imported: no longer waiting


def test_a_recovery_file_of_a_killed_run_completes_it_as_aborted(tmp_path, monkeypatch):
    # iorig was killed (kill -9) after the database refused a phase and the
    # recovery file was written, before the run's end: the file says `running`
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    db = tmp_path / "r.sqlite"
    kept = _kept_in_tmpdir(db, tmpdir, monkeypatch, status=RunStatus.RUNNING)
    with Store(db) as store:
        assert import_runs(store, kept) == [(RUN_ID, True)]
        run = store.load_run(RUN_ID)
    assert [p.name for p in run.phases] == ["p0", "p1", "p2"]
    assert run.run.status is RunStatus.ABORTED
    assert "ended without finishing" in (run.run.error or "")


@pytest.fixture
def small_fs(tmp_path: Path) -> Iterator[Path]:
    """A 4 MiB tmpfs (root: mount) for a results database to fill up."""
    _need_root("mount")
    mnt = tmp_path / "small"
    mnt.mkdir()
    if (
        subprocess.run(
            ["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(mnt)], capture_output=True
        ).returncode
        != 0
    ):
        pytest.skip("this machine does not allow mounting a tmpfs")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


def _fill(folder: Path) -> Path:
    filler = folder / "filler"
    with open(filler, "wb", buffering=0) as f:
        try:
            while True:
                f.write(bytes(1 << 14))
        except OSError:
            pass
    return filler


@pytest.mark.fio
def test_a_full_database_loses_no_phase_whatever_runs_in_between(scratch, tmp_path, small_fs):
    # the database fills up once the prefill is stored: the measured phase
    # goes to a recovery file in TMPDIR (there is no room next to the
    # database either) and the run stays `running` there; later, with room
    # again, `iorig runs` (from a shell with another TMPDIR) marks it
    # aborted. Importing the recovery file must still add the phase.
    db = small_fs / "results.sqlite"
    Store(db).close()
    tmpdir = tmp_path / "tmpdir"
    tmpdir.mkdir()
    filled: list[Path] = []
    watcher = threading.Thread(
        target=lambda: filled.append(
            _fill(small_fs)
            if _wait_for(lambda: _count(db, "SELECT COUNT(*) FROM phases") >= 1)
            else small_fs
        ),
        daemon=True,
    )
    watcher.start()
    done = _iorig(
        db, *RUN[:-1], "4s", "--target", f"{scratch}/", TMPDIR=str(tmpdir), IORIG_DB_LOCK_WAIT="1"
    )
    watcher.join(60)
    out = " ".join((done.stdout + done.stderr).split())
    assert filled and filled[0].name == "filler", out
    assert done.returncode == 1 and "Traceback" not in out, out
    run_id = _run_id(db)
    kept = tmpdir / recovery_path(db, run_id).name
    assert kept.is_file() and f"import {kept}" in out, out
    filled[0].unlink()  # room again
    other_tmp = tmp_path / "other-tmp"
    other_tmp.mkdir()
    runs = _iorig(db, "runs", TMPDIR=str(other_tmp))
    assert runs.returncode == 0, runs.stderr
    assert _show(db, run_id)["run"]["status"] == "aborted"
    imported = _iorig(db, "import", str(kept))
    assert imported.returncode == 0 and f"{run_id}: imported" in imported.stdout, imported
    assert _phase_names(db, run_id) == ["fill", "randread"]
    assert _show(db, run_id)["run"]["status"] == "failed"


def _wait_for(ready, timeout_s: float = 60) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if ready():
            return True
        time.sleep(0.02)
    return False


def _dead_running_run(db: Path, run_id: str = "0123456789ab") -> str:
    """A run left ``running`` by a process that is gone (kill -9), with one
    finished phase, beside a finished run labelled 'other'."""
    dead = subprocess.Popen(["true"])
    dead.wait()
    one = [builders.phase("p0", np.full(3, 100.0))]
    with Store(db) as store:
        store.add_runs(
            [
                builders.stored(
                    run_id,
                    "killed",
                    one,
                    status=RunStatus.RUNNING,
                    pid=dead.pid,
                    hostname=socket.gethostname(),
                ),
                builders.stored("0123456789ff", "other", one),
            ]
        )
    return run_id


@pytest.mark.system
@pytest.mark.parametrize(
    ("args", "shown"),
    [
        (["report", "killed", "--format", "json"], '"status": "aborted"'),
        (["compare", "killed", "other", "--format", "json"], '"status": "aborted"'),
        (["export", "killed", "-o", "{tmp}/b.iorig"], "exported run"),
        (["show", "killed", "--format", "html"], "aborted"),
    ],
    ids=["report", "compare", "export", "show-html"],
)
def test_every_command_that_shows_a_run_marks_a_dead_owners_run_aborted_first(
    tmp_path, cli, args, shown
):
    # killed with kill -9 while running: the next command to show or carry the
    # run (a report, a comparison, a bundle) must not present it as running
    # (the next run marked it so only in its notes: issue 27's campaign)
    db = tmp_path / "r.sqlite"
    run_id = _dead_running_run(db)
    done = cli(db, *(a.replace("{tmp}", str(tmp_path)) for a in args))
    assert done.returncode == 0, done.stdout + done.stderr
    assert shown in done.stdout and '"status": "running"' not in done.stdout, done.stdout[:3000]
    with Store(db) as store:
        assert _status(store, run_id) == "aborted"
    if args[0] == "export":
        with Store(tmp_path / "b.iorig") as bundle:
            assert _status(bundle, run_id) == "aborted"


@pytest.mark.fio
def test_the_next_run_marks_a_dead_owners_run_aborted(scratch, tmp_path, cli):
    db = tmp_path / "r.sqlite"
    run_id = _dead_running_run(db)
    done = cli(
        db,
        "run",
        "--rw",
        "randread",
        "--size",
        "8MiB",
        "--duration",
        "1s",
        "--target",
        f"{scratch}/",
    )
    assert done.returncode == 0, done.stdout + done.stderr
    with Store(db) as store:
        assert _status(store, run_id) == "aborted"


@pytest.mark.fio
def test_a_database_on_a_full_filesystem_is_refused_leaving_no_target_file(scratch, small_fs):
    # preflight sees a writable directory; only opening the new database finds
    # the filesystem full, after the data file was laid out: it stayed (issue
    # 27's campaign). It is removed, and nothing else was made.
    _fill(small_fs)
    before = sorted(p.name for p in small_fs.iterdir())
    target = scratch / "target"
    target.mkdir()
    done = refused_in_process(small_fs / "r.sqlite", *RUN, "--target", f"{target}/")
    assert done.returncode == 2, done.stdout + done.stderr
    assert "database or disk is full" in done.stderr, done.stderr
    assert list(target.iterdir()) == []
    assert sorted(p.name for p in small_fs.iterdir()) == before


@pytest.mark.system
def test_doctor_marks_a_dead_owners_run_aborted_and_makes_no_database(tmp_path, cli):
    # doctor puts back what killed runs left; their rows stayed `running`
    # until a later runs/show (issue 27's campaign: kill -9, then doctor)
    db = tmp_path / "r.sqlite"
    run_id = _dead_running_run(db)
    done = cli(db, "doctor")
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"marked run {run_id} aborted" in done.stdout, done.stdout
    with Store(db) as store:
        assert _status(store, run_id) == "aborted"
    assert "marked run" not in cli(db, "doctor").stdout  # once
    missing = tmp_path / "none.sqlite"
    assert cli(missing, "doctor").returncode == 0
    assert not missing.exists()


@pytest.mark.parametrize("how", ["replaced", "directory removed"])
def test_a_database_replaced_or_removed_mid_run_sends_the_run_to_a_recovery_file(
    tmp_path, monkeypatch, how
):
    """On main the run went on writing into the file it had open (a removed
    one, or the old inode of a replaced one), exited 0 and printed "stored
    in X", and X did not hold it. Each write now checks that the database at
    its path is still the file opened (device and inode)."""
    home = tmp_path / "home"
    home.mkdir()
    db = home / "r.sqlite"
    elsewhere = tmp_path / "tmp"
    elsewhere.mkdir()
    monkeypatch.setattr(tempfile, "gettempdir", lambda: str(elsewhere))
    phases = _phases(2)
    with Store(db) as store:
        keeper = Keeper(store, builders.record(RUN_ID, status=RunStatus.RUNNING))
        keeper.create()
        assert keeper.save_phase(phases[0], phases[:1]) is None
        if how == "replaced":
            other = tmp_path / "other.sqlite"
            Store(other).close()
            os.replace(other, db)
        else:
            shutil.rmtree(home)
        stopped = keeper.save_phase(phases[1], phases)
    assert stopped is not None and "is no longer the file this run opened" in stopped
    kept = keeper.recovery
    assert kept is not None and kept.is_file()
    assert kept.parent == (home if how == "replaced" else elsewhere)
    with Store(kept) as bundle:
        assert [p.name for p in bundle.load_run(RUN_ID).phases] == ["p0", "p1"]


@pytest.mark.parametrize("length", [219, 251, 300])
def test_a_database_name_too_long_for_what_sits_beside_it_is_refused(tmp_path, length):
    # a name of 251 bytes opened, and its -wal (255) could not be made; 300
    # was SQLite's "unable to open database file" (issue 48): refused now,
    # saying how long a name may be, before any file or target is made
    db = tmp_path / ("r" * (length - len(".sqlite")) + ".sqlite")
    target = tmp_path / "target"
    target.mkdir()
    for args in (("runs",), (*RUN, "--target", f"{target}/")):
        done = refused_in_process(db, *args, columns=400)
        said = " ".join(done.stderr.split())
        assert done.returncode == 2, said
        assert f"the results database's name is {length} bytes" in said, said
        assert "name a file of at most 218 bytes" in said, said
    assert sorted(p.name for p in tmp_path.iterdir()) == ["target"]
    assert list(target.iterdir()) == []
