"""The integrity scenario on real fio: a clean run passes naming the blocks it
checked; blocks damaged at rest, and acknowledged writes lost after the
mixed phase, fail the run as lost data (exit 3) named by file and offset;
and a mixed phase cut short by fio's trigger (the moment of a fault) is
checked up to what fio had acknowledged, which without the saved state
would read as lost blocks."""

from __future__ import annotations

import json
import os
import re
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from tests.conftest import REPO
from tests.faults.watch import wait_stored
from tests.fioservers import fio_servers, server_dir

from iorig.fio import parse
from iorig.store import Store

pytestmark = pytest.mark.fio

BS = 4096
AT_REST = 24 << 20  # the quick profile: 48 MiB, half of it at rest, the churn part after it
CHURN = 24 << 20
MAGIC = b"\xca\xac"  # fio's verify header magic (0xacca, little-endian) at a block's start


def _show(iorig) -> dict:
    return json.loads(iorig("show", "last", "--json", check=True).stdout)


def _writes(db: Path, phase: str = "mixed") -> int:
    """The writes the mixed phase's writer completed (what fio acknowledged)."""
    with sqlite3.connect(db) as conn:
        row = conn.execute(
            "SELECT t.ios FROM totals t JOIN phase_results r ON r.id = t.result_id "
            "JOIN phases p ON p.id = r.phase_id WHERE p.name = ? AND r.workload = 'writes' "
            "AND t.ddir = 'write'",
            (phase,),
        ).fetchone()
    return int(row[0])


def _written(data: Path) -> list[int]:
    """Offsets of the churn blocks that hold a verify header (the mixed phase wrote them)."""
    with open(data, "rb") as f:
        f.seek(AT_REST)
        churn = f.read(CHURN)
    return [AT_REST + o for o in range(0, CHURN, BS) if churn[o : o + 2] == MAGIC]


def _named(error: str) -> list[int]:
    return [int(o) for o in re.findall(r"iorig-data\.dat offset (\d+)", error)]


def _no_state_files(*places: Path) -> None:
    for place in places:
        assert not list(place.glob("*verify.state")), place


def test_healthy_storage_passes_naming_the_blocks_checked(iorig, scratch, db_path):
    result = iorig("run", "integrity", "--quick", "--target", f"{scratch}/")
    assert result.returncode == 0, result.stdout + result.stderr
    shown = _show(iorig)
    writes = _writes(db_path)
    # every block at rest, and each write the mixed phase had acknowledged (a
    # thousand a second for three seconds: less than the churn part, no rewrite)
    assert 0 < writes < CHURN // BS
    blocks = AT_REST // BS + writes
    mib = (AT_REST + writes * BS) / 2**20
    assert shown["verdict"].startswith(f"PASS: all {blocks:,} blocks ("), shown["verdict"]
    assert shown["verdict"].endswith("read back as last written"), shown["verdict"]
    assert f"{mib:.3g}MiB" in shown["verdict"] or f"{mib:.0f}MiB" in shown["verdict"]
    (row,) = shown["verdicts"]
    assert row["passed"] and row["phase"] == "verify"
    assert f"Verdict: PASS: all {blocks:,} blocks" in result.stdout
    # the check read only what it checked (the replay's regenerated writes
    # never reached the storage)
    timed = {p["phase"]: p for p in shown["timed_phases"]}
    assert timed["verify"]["io_bytes"] == AT_REST + writes * BS
    texts = Store(db_path).job_texts(shown["run"]["id"])
    assert "verify_state_save=1" in texts["mixed"] and "verify_only=1" in texts["verify"]
    # fio's state stayed in iorig's working directory, gone with the run
    _no_state_files(scratch, REPO, Path.cwd())
    assert not (scratch / "iorig-data.dat").exists()


def test_blocks_damaged_at_rest_are_named_and_fail_the_run_as_lost_data(iorig, scratch, db_path):
    first = iorig("run", "integrity", "--quick", "--keep-files", "--target", f"{scratch}/")
    assert first.returncode == 0, first.stdout + first.stderr
    data = scratch / "iorig-data.dat"
    # twelve blocks at rest: their data changed (a checksum mismatch), one
    # moved to another block's place (a misplaced write), one zeroed
    damaged = [i * 2 * 2**20 + 5 * BS for i in range(10)]
    moved, zeroed = 21 * 2**20 + 7 * BS, 23 * 2**20
    with open(data, "r+b") as f:
        for offset in damaged:
            f.seek(offset + 100)
            f.write(b"not what was written")
        f.seek(3 * BS)
        block = f.read(BS)
        f.seek(moved)
        f.write(block)
        f.seek(zeroed)
        f.write(bytes(BS))
        os.fsync(f.fileno())
    # check only what is at rest, as the kept files hold it
    again = iorig(
        "run",
        "integrity",
        "--quick",
        "--set",
        "write=false",
        "--set",
        "mixed=false",
        "--target",
        f"{scratch}/",
    )
    assert again.returncode == 3, again.stdout + again.stderr
    shown = _show(iorig)
    bad = sorted([*damaged, moved, zeroed])
    assert shown["verdict"] == "FAIL: data lost: 12 blocks did not read back as last written"
    assert "Verdict: FAIL: data lost: 12 blocks" in again.stdout
    error = shown["run"]["error"]
    # fio reads the part at rest in order: the first ten, by file and offset, then a count
    assert _named(error) == bad[:10], error
    assert "12 block(s)" in error and "… and 2 more" in error
    assert f"offset {damaged[0]} " in error and "crc32c mismatch: crc32c expected " in error
    (row,) = shown["verdicts"]
    assert not row["passed"] and "12 did not" in row["name"]
    verify = next(p for p in shown["timed_phases"] if p["phase"] == "verify")
    assert verify["status"] == "failed"
    # all twelve, the misplaced and the zeroed block with what fio found there
    with Store(db_path) as store:
        stored = store.load_run(shown["run"]["id"], artifacts=True)
    (phase,) = [p for p in stored.phases if p.name == "verify"]
    failures = parse.verify_failures(phase.fio_stderr)
    assert [f.offset for f in failures] == bad
    assert failures[-2].detail == (
        f"misplaced write (the header names another offset): header offset expected {moved}, "
        f"found {3 * BS}"
    )
    assert failures[-1].detail.endswith("magic expected acca, found 0")
    data.unlink()


def _start(scratch: Path, db: Path, tmp: Path, *args: str) -> subprocess.Popen:
    """iorig in the background, its working directories under ``tmp``."""
    env = dict(os.environ, IORIG_DB=str(db), COLUMNS="160", NO_COLOR="1", TMPDIR=str(tmp))
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "iorig",
            "run",
            "integrity",
            "--quick",
            *args,
            "--target",
            f"{scratch}/",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=REPO,
    )


def test_acknowledged_writes_lost_after_the_mixed_phase_are_named(scratch, db_path, tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    proc = _start(scratch, db_path, work, "--set", "settle=4s")
    try:
        wait_stored(proc, db_path, at_least=2)  # written and mixed: the pause runs
        data = scratch / "iorig-data.dat"
        written = _written(data)
        assert len(written) == _writes(db_path) > 40
        lost = written[::40][:6]  # six acknowledged writes that the storage "forgot"
        with open(data, "r+b") as f:
            for offset in lost:
                f.seek(offset)
                f.write(bytes(BS))
            os.fsync(f.fileno())
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 3, out + err
    assert "Verdict: FAIL: data lost: 6 blocks did not read back as last written" in out
    with Store(db_path) as store:
        (run,) = store.list_runs()
        error = store.load_run(run.id).run.error or ""
    # exactly the lost writes (in the order fio wrote them), never a churn block
    # the mixed phase did not write
    assert sorted(_named(error)) == sorted(lost), error
    assert "no verify header (never written, or the write was lost): magic expected acca" in error


def test_a_fault_mid_write_is_checked_up_to_what_fio_had_acknowledged(
    scratch, db_path, tmp_path, iorig
):
    """fio's trigger file ($IORIG_TRIGGER: what a fault that may lose the
    writes in flight touches first) makes fio save which writes it had issued and which had
    completed, and stop: the check covers exactly those. Without the saved
    state, the same check reads the churn blocks never written as lost."""
    work = tmp_path / "work"
    work.mkdir()
    # the fault is an event command: it touches $IORIG_TRIGGER first, as a
    # power cut's script would
    cut = 'cut=touch "$IORIG_TRIGGER" && echo "$IORIG_TRIGGER"'
    proc = _start(
        scratch,
        db_path,
        work,
        "--set",
        "duration=60s",
        "--keep-files",
        "--event",
        "mixed@3s=run cut",
        "--event-command",
        cut,
    )
    try:
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, out + err
    shown = _show(iorig)
    (cut,) = shown["events"]
    assert cut["status"] == "done" and cut["detail"].strip().endswith("/state/trigger"), cut
    mixed = next(p for p in shown["phases"] if p["name"] == "mixed")
    assert mixed["elapsed_s"] < 20, mixed  # stopped at the trigger, not after 60 s
    # fio checked the writes it had seen complete when it saved its state;
    # those still in flight then (at most the queue depth, 4) completed
    # afterwards but are not counted: the storage never acknowledged them
    # before the "fault"
    writes = _writes(db_path)
    found = re.match(r"PASS: all ([\d,]+) blocks", shown["verdict"])
    assert found, shown["verdict"]
    checked = int(found[1].replace(",", "")) - AT_REST // BS
    assert writes - 4 <= checked <= writes, (checked, writes)
    # the mechanism matters: the same check without the saved state replays the
    # writer's whole pass and finds the blocks it never wrote (random data)
    replay = Store(db_path).job_texts(shown["run"]["id"])["verify"]
    assert "verify_state_load=1" in replay
    job = tmp_path / "no-state" / "job.fio"
    job.parent.mkdir()
    job.write_text(replay.replace("verify_state_load=1\n", ""))
    done = subprocess.run(
        ["fio", "--output=/dev/null", str(job)],
        cwd=job.parent,
        capture_output=True,
        text=True,
        timeout=120,
    )
    never = [f.offset for f in parse.verify_failures(done.stderr) if f.offset >= AT_REST]
    assert len(never) >= CHURN // BS - writes - 64, (len(never), writes)
    assert all(f.what.startswith("no verify header") for f in parse.verify_failures(done.stderr))
    _no_state_files(scratch, REPO, job.parent, work)
    assert not list(work.iterdir())  # the run's working directory went with it
    (scratch / "iorig-data.dat").unlink()


def test_fio_servers_are_refused_before_anything_is_written(iorig, tmp_path):
    """A fio server saves a job's state in its own directory and fio asks
    the client for it when loading: the check could never run there."""
    with fio_servers(1, tmp_path) as hosts:
        result = iorig("run", "integrity", "--quick", "--hosts", hosts[0].label)
        left = list(server_dir(tmp_path, hosts[0]).iterdir())
    assert result.returncode != 0 and result.returncode != 3, result.stdout
    assert "works on this machine only, not on fio servers" in result.stdout + result.stderr
    assert left == [], left
