"""Bundles given to ``iorig import`` are untrusted data.

Each test crafts a bundle the way an attacker (or a broken disk) would —
by editing a real exported results file with sqlite3, checks bypassed — and
checks that the import refuses it naming the run and the field, changes
nothing already stored, and never inflates a compressed blob past what its
row declares.
"""

from __future__ import annotations

import functools
import sqlite3
import subprocess
import sys
import zlib
from pathlib import Path

import numpy as np
import pytest
from tests import builders
from tests.conftest import REPO

from iorig.errors import UserError
from iorig.model import RunStatus
from iorig.store import Store, import_runs

JOB_FILE = (
    "INSERT OR REPLACE INTO artifacts (phase_id, name, data) SELECT id, 'job.fio', ? FROM phases"
)
GOOD = "0123456789ab"
OTHER = "ba9876543210"


def _bundle(path: Path, *run_ids: str, **over) -> Path:
    with Store(path) as store:
        store.add_runs(
            [
                builders.stored(r, None, [builders.phase("p", np.full(3, 100.0))], **over)
                for r in run_ids
            ]
        )
    return path


def _tamper(path: Path, sql: str, *params: object) -> None:
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA ignore_check_constraints = ON")
    conn.execute(sql, params)
    conn.commit()
    conn.close()


@functools.cache  # 8 s of zlib at level 9 for 1 GiB: once per test process
def _bomb(expanded_bytes: int) -> bytes:
    """A zlib stream of zeros that inflates to ``expanded_bytes`` (about
    1,000 times its size), built without holding the expansion in memory."""
    z = zlib.compressobj(9)
    chunk = bytes(1 << 20)
    parts = [z.compress(chunk) for _ in range(expanded_bytes >> 20)]
    return b"".join(parts) + z.flush()


def _runs(db: Path) -> list[tuple]:
    conn = sqlite3.connect(db)
    try:
        return conn.execute("SELECT id, status, error FROM runs ORDER BY id").fetchall()
    finally:
        conn.close()


@pytest.fixture
def target(tmp_path: Path) -> Path:
    """A database holding one failed run (id GOOD), the one attackers want to rewrite."""
    path = tmp_path / "target.sqlite"
    _bundle(path, GOOD, status=RunStatus.FAILED, error="device went away")
    return path


def _import(target: Path, bundle: Path) -> list[tuple[str, bool]]:
    with Store(target) as store:
        return import_runs(store, bundle)


def test_a_bundle_cannot_rewrite_a_stored_run(target, tmp_path):
    bundle = _bundle(tmp_path / "b.sqlite", GOOD, OTHER)  # GOOD here says "ok"
    # and phases filed under the stored run's id, riding on another run
    _tamper(bundle, "UPDATE phases SET run_id = ?, seq = 7 WHERE run_id = ?", GOOD, OTHER)
    before = _runs(target)
    assert sorted(_import(target, bundle)) == [(GOOD, False), (OTHER, True)]
    assert [r for r in _runs(target) if r[0] == GOOD] == [r for r in before if r[0] == GOOD]
    with Store(target) as store:
        assert len(store.load_run(GOOD).phases) == 1
        assert store.load_run(OTHER).phases == ()


@pytest.mark.parametrize(
    ("sql", "field"),
    [
        ("UPDATE runs SET status = 'totally-fine'", "status"),
        ("UPDATE runs SET params_json = '{'", "parameters"),
        ('UPDATE runs SET disclosure_json = \'{"version": 99, "data": {}}\'', "disclosure"),
        ("UPDATE runs SET started_at = 'yesterday'", "started_at"),
        ("UPDATE runs SET pid = -4", "pid"),
        ("UPDATE runs SET label = x'00ff'", "label"),
        ("UPDATE phases SET kind = 'rm -rf'", "kind"),
        ("UPDATE phases SET seq = 'one'", "seq"),
        ("UPDATE phases SET ended_at = 1e308 * 10", "ended_at"),
        ("UPDATE phase_results SET host = '<script>'", "host"),
        ("UPDATE totals SET ios = -5", "ios"),
        ("UPDATE totals SET iops = 'fast'", "iops"),
        ("UPDATE samples SET bytes_per_s = -1", "bytes_per_s"),
        ("UPDATE histograms SET rows = 2 WHERE kind = 'per_second'", "histogram"),
        ("UPDATE histograms SET data = x'789c' WHERE kind = 'total'", "histogram"),
        ('UPDATE runs SET sut_json = \'{"version": 2, "data": {}}\'', "system under test"),
        (
            'UPDATE runs SET sut_json = \'{"version": 1, "data": {"description": '
            '{"product": {"name": "x", "cost": 1}}, "notes": []}}\'',
            "system under test",
        ),
        (
            'UPDATE runs SET sut_json = \'{"version": 1, "data": {"description": {}, '
            '"notes": [""]}}\'',
            "system under test",
        ),
    ],
)
def test_a_bad_value_is_refused_naming_the_run_and_the_field(target, tmp_path, sql, field):
    bundle = _bundle(tmp_path / "b.sqlite", OTHER, "c0ffee000000")
    _tamper(bundle, sql)
    before = _runs(target)
    with pytest.raises(UserError) as caught:
        _import(target, bundle)
    message = str(caught.value)
    assert field in message and ("c0ffee000000" in message or OTHER in message), message
    assert _runs(target) == before  # all or nothing


@pytest.mark.parametrize("run_id", ["../../etc/passwd", "x" * 200, "", "DROP TABLE runs"])
def test_a_run_id_of_another_form_is_refused(target, tmp_path, run_id):
    bundle = _bundle(tmp_path / "b.sqlite", OTHER)
    conn = sqlite3.connect(bundle)
    conn.execute("PRAGMA foreign_keys = OFF")
    conn.execute("UPDATE runs SET id = ?", (run_id,))
    conn.execute("UPDATE phases SET run_id = ?", (run_id,))
    conn.commit()
    conn.close()
    with pytest.raises(UserError, match="run id"):
        _import(target, bundle)
    assert len(_runs(target)) == 1


def test_a_file_that_is_not_a_results_database_is_refused(target, tmp_path):
    bogus = tmp_path / "bogus.sqlite"
    bogus.write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(UserError, match="not an iorig results file"):
        _import(target, bogus)


def _max_rss_kib(*args: str, db: Path) -> tuple[subprocess.CompletedProcess, int]:
    """Run the iorig CLI as a child of a small Python and report the child's peak RSS."""
    probe = (
        "import os, resource, subprocess, sys\n"
        "done = subprocess.run(sys.argv[1:], capture_output=True, text=True, "
        "env=dict(os.environ, IORIG_DB=" + repr(str(db)) + "))\n"
        "sys.stdout.write(str(done.returncode) + '\\n' + done.stderr)\n"
        "sys.stderr.write(str(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe, sys.executable, "-m", "iorig", *args],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=120,
    )
    return done, int(done.stderr)


@pytest.mark.system
@pytest.mark.parametrize("where", ["artifact", "histogram"])
def test_a_decompression_bomb_is_refused_without_inflating_it(target, tmp_path, where):
    bundle = _bundle(tmp_path / "b.sqlite", OTHER)
    bomb = _bomb(1 << 30)  # about 1 MB that would inflate to 1 GiB
    if where == "artifact":
        _tamper(bundle, JOB_FILE, bomb)
    else:
        _tamper(bundle, "UPDATE histograms SET data = ? WHERE kind = 'total'", bomb)
    done, rss_kib = _max_rss_kib("import", str(bundle), db=target)
    code, _, stderr = done.stdout.partition("\n")
    assert code == "2" and "Traceback" not in stderr, done.stdout
    assert where in stderr and OTHER in stderr, stderr
    assert rss_kib < 400 << 10, rss_kib  # far below the 1 GiB the blob would become
    assert len(_runs(target)) == 1


@pytest.mark.system
def test_a_bomb_already_in_the_database_does_not_exhaust_show_or_report(target, tmp_path):
    _tamper(target, JOB_FILE, _bomb(1 << 30))
    for args in (("show", GOOD, "--jobs"), ("report", GOOD, "-o", str(tmp_path / "r.html"))):
        done, rss_kib = _max_rss_kib(*args, db=target)
        code, _, stderr = done.stdout.partition("\n")
        assert code == "2" and "Traceback" not in stderr, (args, done.stdout)
        assert "job.fio" in stderr, stderr
        assert rss_kib < 400 << 10, (args, rss_kib)
