"""What a killed run leaves (issue 27): its working directory in TMPDIR
(``iorig-*``) and the data file it laid out in a directory target were
never cleaned. The next run, or ``iorig doctor --clean``, removes what a
dead run provably left — a directory carrying its owner's stamp, a data
file recorded by its run and marked ``user.iorig`` — naming each; nothing of
a live run and nothing of the user's is touched."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest
from tests.faults.killed import kill9, run, start
from tests.faults.watch import wait_stored

pytestmark = pytest.mark.fio

LONG = ("run", "--rw", "randread", "--bs", "4k", "--size", "16MiB", "--duration", "60s")


def _tmp_entries(tmp: Path) -> set[str]:
    return {p.name for p in tmp.iterdir() if p.name.startswith("iorig-")}


def _killed_run(target: Path, tmp: Path, db: Path, env: dict[str, str]) -> set[str]:
    """A run on the directory ``target`` killed in its measured phase; its
    entries in ``tmp``."""
    before = _tmp_entries(tmp)
    proc = start(db, *LONG, "--target", f"{target}/", env=env)
    try:
        wait_stored(proc, db, "phases")  # the prefill is stored: the data file is laid out
        kill9(proc)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    left = _tmp_entries(tmp) - before
    assert (target / "iorig-data.dat").exists() and left  # what the dead run left
    return left


@pytest.fixture
def tmpdir_env(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    return tmp, dict(os.environ, TMPDIR=str(tmp))


def test_doctor_clean_removes_what_a_dead_run_left_and_nothing_else(scratch, tmp_path, tmpdir_env):
    tmp, env = tmpdir_env
    dead, live = scratch / "dead", scratch / "live"
    dead.mkdir()
    live.mkdir()
    # a live run in the same TMPDIR (started first: a run's start cleans up too)
    proc = start(tmp_path / "live.sqlite", *LONG, "--target", f"{live}/", env=env)
    try:
        wait_stored(proc, tmp_path / "live.sqlite", "phases")
        lives = _tmp_entries(tmp)
        assert lives and (live / "iorig-data.dat").exists()
        left = _killed_run(dead, tmp, tmp_path / "dead.sqlite", env)
        # the user's: a directory named like iorig's, a file beside the data file
        (tmp / "iorig-mine").mkdir()
        (tmp / "iorig-mine" / "notes.txt").write_text("mine")
        (dead / "keep.txt").write_text("mine")
        done = run(tmp_path / "doctor.sqlite", "doctor", "--clean", env=env)
        assert done.returncode == 0, done.stdout + done.stderr
        said = " ".join((done.stdout + done.stderr).split())
        assert not (dead / "iorig-data.dat").exists()
        assert str(dead / "iorig-data.dat") in said, said
        for name in left:
            assert not (tmp / name).exists()
            assert name in said, said
        # the user's and the live run's are untouched
        assert (tmp / "iorig-mine" / "notes.txt").read_text() == "mine"
        assert (dead / "keep.txt").read_text() == "mine"
        assert all((tmp / name).exists() for name in lives)
        assert (live / "iorig-data.dat").exists()
        assert proc.poll() is None
    finally:
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=60)
    assert proc.returncode == 130
    assert not (live / "iorig-data.dat").exists()  # the live run cleaned up after itself
    assert _tmp_entries(tmp) == {"iorig-mine"}


def test_the_next_run_removes_what_a_dead_run_left_naming_it(scratch, tmp_path, tmpdir_env):
    tmp, env = tmpdir_env
    dead, kept, other = scratch / "dead", scratch / "kept", scratch / "other"
    for d in (dead, kept, other):
        d.mkdir()
    # both running before either is killed (a run's start cleans up what it finds)
    runs = [start(tmp_path / "dead.sqlite", *LONG, "--target", f"{dead}/", env=env)]
    try:
        wait_stored(runs[0], tmp_path / "dead.sqlite", "phases")
        runs.append(
            start(tmp_path / "kept.sqlite", *LONG, "--target", f"{kept}/", "--keep-files", env=env)
        )
        wait_stored(runs[1], tmp_path / "kept.sqlite", "phases")
        left = _tmp_entries(tmp)
        for proc in runs:
            kill9(proc)
    finally:
        for proc in runs:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
    assert len(left) >= 2 and (dead / "iorig-data.dat").exists()
    done = run(
        tmp_path / "next.sqlite",
        "run",
        "--rw",
        "randread",
        "--bs",
        "4k",
        "--size",
        "16MiB",
        "--duration",
        "1s",
        "--target",
        f"{other}/",
        env=env,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    said = " ".join(done.stderr.split())
    assert f"removed {dead / 'iorig-data.dat'}" in said, said
    assert not (dead / "iorig-data.dat").exists()
    assert (kept / "iorig-data.dat").exists()  # --keep-files: kept, as that run was asked
    for name in left:
        assert not (tmp / name).exists() and name in said, (name, said)
    assert _tmp_entries(tmp) == set()
