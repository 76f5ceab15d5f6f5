"""Standard output that cannot be written (a full device, a reader that
went away) is an error message and a non-zero exit, never a traceback,
and a run whose progress cannot be printed is stored failed with what it
measured, not left "running" (issue 48: on main ``iorig runs > /dev/full``
and six other commands ended in a traceback, and ``run`` left its run
"running").
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from tests.conftest import REPO

from iorig.store import Store

RECORDED = Path(__file__).resolve().parent.parent / "data" / "report-peak" / "results.sqlite"

pytestmark = [pytest.mark.system]


def _iorig(db: Path, *args: str, stdout: object) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "iorig", *args],
        cwd=REPO,
        env=dict(os.environ, IORIG_DB=str(db), COLUMNS="120", NO_COLOR="1"),
        stdout=stdout,
        stderr=subprocess.PIPE,
        text=True,
        timeout=120,
    )


@pytest.mark.parametrize(
    "args",
    [
        ("runs",),
        ("show", "last", "--json"),
        ("show", "last", "--format", "csv"),
        ("show", "last", "--timeline"),
        ("scenarios",),
        ("report", "last", "--format", "md"),
    ],
    ids=lambda a: " ".join(a),
)
def test_a_full_standard_output_is_an_error_message(tmp_path, args):
    db = tmp_path / "results.sqlite"
    shutil.copyfile(RECORDED, db)
    with open("/dev/full", "w") as full:
        done = _iorig(db, *args, stdout=full)
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr and "─" not in done.stderr, done.stderr
    assert "cannot write the output: No space left on device" in done.stderr


def test_a_reader_that_went_away_ends_iorig_quietly(tmp_path):
    db = tmp_path / "results.sqlite"
    shutil.copyfile(RECORDED, db)
    read, write = os.pipe()
    os.close(read)  # nobody reads: every write is EPIPE
    with os.fdopen(write, "w") as gone:
        done = _iorig(db, "show", "last", "--json", stdout=gone)
    assert done.returncode == 1 and done.stderr == "", done.stderr


@pytest.mark.fio
def test_a_run_whose_progress_cannot_be_printed_is_stored_failed_not_running(scratch, tmp_path):
    db = tmp_path / "results.sqlite"
    with open("/dev/full", "w") as full:
        done = _iorig(
            db, "run", "--rw", "randread", "--size", "8MiB", "--duration", "1s",
            "--target", f"{scratch}/", stdout=full,
        )  # fmt: skip
    assert done.returncode == 1, done.stderr
    assert "cannot write the output" in done.stderr and "Traceback" not in done.stderr
    with Store(db) as store:
        (run_id,) = store.run_ids(limit=1)
        run = store.load_run(run_id).run
    assert str(run.status) == "failed" and "OutputLost" in (run.error or ""), run.error
