"""Bundles given to ``iorig import`` are untrusted data.

Each test crafts a bundle the way an attacker (or a broken disk) would —
by editing a real exported results file with sqlite3, checks bypassed — and
checks that the import refuses it naming the run and the field, changes
nothing already stored, and never inflates a compressed blob past what its
row declares.
"""

from __future__ import annotations

import functools
import os
import sqlite3
import subprocess
import sys
import tempfile
import zlib
from pathlib import Path

import numpy as np
import pytest
from tests import builders
from tests.conftest import REPO

from iorig.errors import UserError
from iorig.model import RunStatus, Scope
from iorig.store import Store, import_runs
from iorig.store.schema import LATEST

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
        # payloads: their decoders check all of them (the model checker does not again)
        ("UPDATE runs SET targets_json = '[1]'", "targets"),
        (
            'UPDATE runs SET disclosure_json = \'{"sections": {}, '
            '"interface_limit": {"bytes_per_s": -5, "source": "x"}}\'',
            "disclosure",
        ),
        ("UPDATE phases SET point_json = '[]'", "point"),
        ("UPDATE runs SET hosts_json = '[1e999]'", "hosts"),
        ("UPDATE runs SET params_json = '{'", "parameters"),
        ("UPDATE runs SET disclosure_json = '{\"sections\": [1]}'", "disclosure"),
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
        ("UPDATE runs SET sut_json = '{}'", "system under test"),
        (
            'UPDATE runs SET sut_json = \'{"description": '
            '{"product": {"name": "x", "cost": 1}}, "notes": []}\'',
            "system under test",
        ),
        (
            'UPDATE runs SET sut_json = \'{"description": {}, "notes": [""]}\'',
            "system under test",
        ),
        # the envelope of schema versions 3 to 9 in a file of version 10
        (
            'UPDATE runs SET disclosure_json = \'{"version": 2, "data": '
            '{"sections": {}, "interface_limit": null}}\'',
            "disclosure",
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


def _hosts_bundle(path: Path, run_id: str) -> Path:
    """A run on two hosts: the aggregate and a scope per host, whose series
    a bundle gives only when they are read."""
    level = np.full(5, 100.0)
    scopes = (
        builders.scope(level * 2),
        builders.scope(level, where=Scope(host="h1")),
        builders.scope(level, where=Scope(host="h2")),
    )
    phase = builders.phase("p", level * 2, scopes=scopes)
    with Store(path) as store:
        store.add_runs([builders.stored(run_id, None, [phase], hosts=["h1", "h2"])])
    return path


@pytest.mark.parametrize(
    "sql",
    [
        "UPDATE samples SET iops = -5 WHERE t_s = 3 AND result_id = 3",
        "UPDATE samples SET iops = 'many' WHERE t_s = 3 AND result_id = 3",
        "UPDATE histograms SET data = x'00' WHERE kind = 'per_second' AND result_id = 3",
    ],
)
def test_a_hosts_series_read_when_used_is_checked_like_the_rest(target, tmp_path, sql):
    bundle = _hosts_bundle(tmp_path / "b.sqlite", OTHER)
    _tamper(bundle, sql)
    before = _runs(target)
    with pytest.raises(UserError) as caught:
        _import(target, bundle)
    message = str(caught.value)
    assert str(bundle) in message and OTHER in message, message
    assert _runs(target) == before  # all or nothing


def test_a_hosts_series_read_when_used_arrives_whole(target, tmp_path):
    bundle = _hosts_bundle(tmp_path / "b.sqlite", OTHER)
    _import(target, bundle)
    with Store(target) as store:
        phase = store.load_run(OTHER).phases[0]
    assert [s.scope.host for s in phase.scopes] == [None, "h1", "h2"]
    assert [len(s.series["all"]) for s in phase.scopes] == [5, 5, 5]
    assert phase.scopes[2].series["all"].iops.tolist() == [100.0] * 5


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


# --------------------------------------------- what a bundle holds, truthfully


def _foreign(path: Path, *statements: str) -> Path:
    """A SQLite file written by another program: ``statements`` and nothing of iorig's."""
    conn = sqlite3.connect(path)
    for sql in statements:
        conn.execute(sql)
    conn.commit()
    conn.close()
    return path


def _script(path: Path, script: str) -> None:
    conn = sqlite3.connect(path)
    conn.executescript(script)
    conn.close()


SCHEMA_TAMPERING = {
    "a view in place of a table": (
        "PRAGMA legacy_alter_table = ON; ALTER TABLE runs RENAME TO runs_kept;"
        "CREATE VIEW runs AS SELECT * FROM runs_kept",
        "view runs",
    ),
    "a trigger": (
        "CREATE TRIGGER spy AFTER UPDATE ON runs BEGIN SELECT 1; END",
        "trigger spy",
    ),
    "an extra index": ("CREATE INDEX fast ON samples (iops)", "index fast"),
    "an extra table": ("CREATE TABLE extra (x)", "table extra"),
    "an extra column": ("ALTER TABLE runs ADD COLUMN evil TEXT", "table runs"),
    "statistics for the query planner": ("ANALYZE", "sqlite_stat1"),
    "a virtual table": ("CREATE VIRTUAL TABLE notes USING fts5 (body)", "table notes"),
    "a missing table": ("DROP TABLE steady_states", "table steady_states"),
    "another version's tables": ("PRAGMA user_version = 5", "schema version 5"),
}


@pytest.mark.parametrize("case", SCHEMA_TAMPERING)
def test_a_bundle_that_is_not_a_plain_set_of_iorigs_tables_is_refused_naming_it(
    target, tmp_path, case
):
    script, named = SCHEMA_TAMPERING[case]
    bundle = _bundle(tmp_path / "b.sqlite", OTHER)
    try:
        _script(bundle, script)
    except sqlite3.OperationalError as exc:  # e.g. a SQLite built without fts5
        pytest.skip(f"this SQLite cannot craft {case}: {exc}")
    before = _runs(target)
    with pytest.raises(UserError) as caught:
        _import(target, bundle)
    message = str(caught.value)
    assert "not an iorig results file" in message and named in message, message
    assert _runs(target) == before


@pytest.mark.parametrize(
    ("statements", "said"),
    [
        (("CREATE TABLE contacts (name TEXT, phone TEXT)",), "table contacts"),
        (("CREATE TABLE x (a)", "DROP TABLE x"), "holds no tables"),
        (("PRAGMA user_version = 3", "CREATE TABLE runs (id TEXT)"), "table runs"),
    ],
    ids=["another program's tables", "no tables at all", "a table of the same name"],
)
def test_a_sqlite_file_of_another_program_is_not_said_to_hold_no_runs(
    target, tmp_path, cli, statements, said
):
    bundle = _foreign(tmp_path / "other.sqlite", *statements)
    with pytest.raises(UserError) as caught:
        _import(target, bundle)
    message = str(caught.value)
    assert "not an iorig results file" in message and said in message, message
    done = cli(target, "import", str(bundle))
    assert done.returncode == 2 and "holds no runs" not in done.stdout + done.stderr, done
    assert "not an iorig results file" in done.stderr, done.stderr


def test_an_iorig_file_without_runs_is_said_to_hold_none(target, tmp_path, cli):
    empty = tmp_path / "empty.sqlite"
    Store(empty).close()
    done = cli(target, "import", str(empty))
    assert done.returncode == 0 and "holds no runs" in done.stdout, done


def test_a_bundle_whose_last_writes_sit_in_its_write_ahead_log_is_refused_saying_so(
    target, tmp_path
):
    # a results database still open elsewhere: its runs are in the -wal, not
    # yet in the file; reading the file alone would miss them
    live = tmp_path / "live.sqlite"
    Store(live).close()
    holder = sqlite3.connect(live)  # keeps the log from being folded in on close
    holder.execute("PRAGMA wal_autocheckpoint = 0")
    holder.execute("SELECT 1 FROM runs").fetchall()
    with Store(live) as store:
        store.add_runs([builders.stored(OTHER, None, [])])
    try:
        assert Path(f"{live}-wal").stat().st_size > 0
        with pytest.raises(UserError, match="write-ahead log") as caught:
            _import(target, live)
        assert f"{live}-wal" in str(caught.value)
    finally:
        holder.close()
    assert _runs(target) == [(GOOD, "failed", "device went away")]


@pytest.mark.parametrize("version", range(1, LATEST))
def test_a_bundle_of_every_earlier_schema_reads_as_its_upgraded_database(tmp_path, version):
    # read in place (no copy, no migration), through iorig's own column
    # lists: the same runs as the database upgraded by the migrations
    fixture = REPO / "tests" / "data" / f"schema-v{version}" / "results.sqlite"
    upgraded = tmp_path / "upgraded.sqlite"
    upgraded.write_bytes(fixture.read_bytes())
    with Store(upgraded) as store:
        expected = {i: store.load_run(i, artifacts=True) for i in store.run_ids()}
    with Store(tmp_path / "into.sqlite") as store:
        assert sorted(import_runs(store, fixture)) == sorted((i, True) for i in expected)
        for run_id, stored in expected.items():
            back = store.load_run(run_id, artifacts=True)
            assert back.run == stored.run
            assert [_phase_fields(p) for p in back.phases] == [
                _phase_fields(p) for p in stored.phases
            ]


def _phase_fields(phase) -> tuple:
    agg = phase.aggregate
    figures = (
        None
        if agg is None
        else {d: (t.ios, t.iops, t.hist.tobytes()) for d, t in agg.totals.items()}
    )
    series = None if agg is None else {d: s.iops.tobytes() for d, s in agg.series.items()}
    return (
        phase.name,
        phase.kind,
        phase.status,
        phase.point,
        phase.job_text,
        phase.fio_output,
        figures,
        series,
    )


def test_import_never_copies_the_bundle_into_tmpdir(target, tmp_path, monkeypatch):
    # a TMPDIR that cannot take a copy (here: not even a directory; in the
    # field a full one raised ENOSPC with a traceback) changes nothing
    blocked = tmp_path / "not-a-directory"
    blocked.write_text("")
    monkeypatch.setattr(tempfile, "tempdir", str(blocked))
    bundle = _bundle(tmp_path / "b.sqlite", OTHER)
    assert _import(target, bundle) == [(OTHER, True)]


def test_import_reports_its_progress_run_by_run(target, tmp_path):
    ids = [f"{i:012x}" for i in range(1, 6)]
    bundle = _bundle(tmp_path / "b.sqlite", *ids)
    seen: list[tuple[int, int]] = []
    with Store(target) as store:
        done = import_runs(store, bundle, progress=lambda n, total: seen.append((n, total)))
    assert sorted(done) == [(i, True) for i in ids]
    assert [n for n, _ in seen] == sorted(n for n, _ in seen) and seen[-1] == (5, 5)
    assert {total for _, total in seen} == {5}


def test_the_work_of_reading_a_bundle_is_bounded(target, tmp_path, monkeypatch):
    # a budget far below what two runs need, counted in steps of 10: iorig's
    # own queries on a file of iorig's schema never need many times their
    # usual work, so the bound (SQLite's progress handler) is tried this way
    from iorig.store import bundle as bundle_mod
    from iorig.store import connection

    bundle = _bundle(tmp_path / "b.sqlite", OTHER, "c0ffee000000")
    monkeypatch.setattr(bundle_mod, "WORK_PER_BYTE", 0.0001)
    monkeypatch.setattr(connection, "PROGRESS_STEPS", 10)
    with pytest.raises(UserError, match="more work than") as caught:
        _import(target, bundle)
    assert str(bundle) in str(caught.value)
    assert len(_runs(target)) == 1


ENDLESS = (
    "PRAGMA legacy_alter_table = ON; ALTER TABLE runs RENAME TO runs_kept;"
    "CREATE VIEW runs AS WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n) "
    "SELECT runs_kept.* FROM runs_kept, n"
)


def _start_import(bundle: Path, db: Path, tmpdir: Path) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "iorig", "import", str(bundle)],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=dict(os.environ, IORIG_DB=str(db), TMPDIR=str(tmpdir)),
    )


def _ended_after_ctrl_c(proc: subprocess.Popen, busy) -> tuple[float | None, str]:
    """Send SIGINT a second after ``busy()`` says the import is under way;
    seconds until the process ended then (None: not within 5 s)."""
    import signal
    import time

    deadline = time.monotonic() + 30
    while proc.poll() is None and not busy() and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(1)
    if proc.poll() is not None:
        return 0.0, proc.communicate()[1]
    proc.send_signal(signal.SIGINT)
    sent = time.monotonic()
    try:
        _, err = proc.communicate(timeout=5)
        return time.monotonic() - sent, err
    except subprocess.TimeoutExpired:
        proc.kill()
        return None, proc.communicate()[1]


@pytest.mark.system
@pytest.mark.timing
def test_a_bundle_that_would_run_forever_neither_hangs_nor_leaves_a_copy(target, tmp_path):
    bundle = _bundle(tmp_path / "b.sqlite", OTHER)
    _script(bundle, ENDLESS)
    tmpdir = tmp_path / "tmpdir"
    tmpdir.mkdir()
    before = _runs(target)
    proc = _start_import(bundle, target, tmpdir)
    waited, err = _ended_after_ctrl_c(proc, lambda: any(tmpdir.iterdir()))
    assert waited is not None and waited < 2, f"still going 5 s after Ctrl-C: {err[-500:]}"
    assert proc.returncode in (2, 130) and "Traceback" not in err, err
    assert list(tmpdir.iterdir()) == []  # no copy of the bundle left behind
    assert _runs(target) == before


MANY = 240  # runs in the big bundle: importing them takes seconds


@pytest.fixture(scope="module")
def big_bundles(tmp_path_factory) -> dict[int, Path]:
    """Bundles of real-size runs (tests/bundles.py, 60 s each): 10 and MANY."""
    from tests.bundles import many_runs

    folder = tmp_path_factory.mktemp("big")
    return {n: many_runs(folder / f"{n}.sqlite", n, seconds=60) for n in (10, MANY)}


@pytest.mark.system
def test_import_memory_does_not_grow_with_the_number_of_runs(big_bundles, tmp_path):
    # each run takes about 0.3 MB once decoded (tracemalloc; 1 MB while
    # per-second histograms were dense): reading them all before writing (as
    # import did) would grow by 70 MB from 10 runs to MANY against the 40 MiB
    # allowed; streamed, memory holds one run at a time
    # (bench/bundle_import.py: 10,000 runs)
    peaks = {}
    for n, bundle in big_bundles.items():
        done, peaks[n] = _max_rss_kib("import", str(bundle), db=tmp_path / f"into-{n}.sqlite")
        assert done.stdout.startswith("0\n"), done.stdout
    assert peaks[MANY] - peaks[10] < 40 << 10, peaks


@pytest.mark.system
@pytest.mark.timing
def test_ctrl_c_ends_a_long_import_within_two_seconds_leaving_nothing(
    big_bundles, target, tmp_path
):
    tmpdir = tmp_path / "tmpdir"
    tmpdir.mkdir()
    before = _runs(target)
    wal = Path(f"{target}-wal")
    proc = _start_import(big_bundles[MANY], target, tmpdir)
    waited, err = _ended_after_ctrl_c(proc, lambda: wal.is_file() and wal.stat().st_size > 0)
    print(f"the import ended {waited} s after Ctrl-C")
    assert waited is not None and 0 < waited < 2, (waited, err[-500:])
    assert proc.returncode == 130 and "nothing was imported" in err, err
    assert "Traceback" not in err, err
    assert _runs(target) == before
    assert list(tmpdir.iterdir()) == []
    assert sorted(p.name for p in target.parent.iterdir() if "target" in p.name) == [
        "target.sqlite"
    ]  # no journal, log or copy left beside the database


def test_a_bundle_is_read_with_sqlites_guards_and_nothing_else_is_allowed(tmp_path):
    from iorig.store import connection
    from iorig.store.bundle import TABLES

    bundle = _bundle(tmp_path / "b.sqlite", OTHER)
    before = bundle.read_bytes()
    conn, _, set_up = connection.read_only(bundle, TABLES, budget=1e9)
    try:
        set_up()
        assert conn.execute("SELECT COUNT(*) FROM runs").fetchone() == (1,)
        for sql in (
            "UPDATE runs SET label = 'x'",
            "CREATE TEMP TABLE t (a)",
            "CREATE TEMP VIEW v AS SELECT 1",
            f"ATTACH '{tmp_path / 'other.sqlite'}' AS other",
            "PRAGMA writable_schema = ON",
            "PRAGMA trusted_schema = ON",
            "SELECT load_extension('x')",
            "SELECT randomblob(10)",
            "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n) SELECT i FROM n",
        ):
            with pytest.raises(sqlite3.DatabaseError):
                conn.execute(sql).fetchall()
        if hasattr(conn, "getconfig"):  # Python 3.12+: SQLite's defensive mode
            assert conn.getconfig(sqlite3.SQLITE_DBCONFIG_DEFENSIVE)
    finally:
        conn.close()
    assert bundle.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["b.sqlite"]  # no -wal, -shm, copy


def test_the_database_itself_is_refused_also_through_a_hard_link(target, tmp_path):
    # read in place, the database being written would be read half-written
    same = tmp_path / "same.sqlite"
    os.link(target, same)
    for bundle in (target, same):
        with pytest.raises(UserError, match="into itself"):
            _import(target, bundle)
