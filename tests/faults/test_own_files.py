"""iorig never writes over its own files (issue 48): a report, a bundle or a
target that is the results database, one of its sidecars or a recovery
file is refused; temporary files are not at names anyone can plant a link
at; a database another application made is left as it is, not migrated.

Each case failed on main before this: ``report -o $IORIG_DB`` replaced the
database with HTML (exit 0), ``run --target $IORIG_DB --allow-destroy`` was
accepted, a link at ``DIR/.r.html.partial`` was written through, and
``--db other.sqlite runs`` switched another application's file to WAL and
added iorig's tables to it.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import sqlite3
from pathlib import Path

import pytest
from tests.conftest import cli_in_process, refused_in_process

from iorig.errors import UserError
from iorig.store import Store
from iorig.store.files import refuse_own, which_own
from iorig.store.live import LiveStore, LiveUnwritable

RECORDED = Path(__file__).resolve().parent.parent / "data" / "report-peak" / "results.sqlite"


@pytest.fixture
def db(tmp_path: Path) -> Path:
    """A copy of a recorded database, opened once (at the latest schema)."""
    copy = tmp_path / "results.sqlite"
    shutil.copyfile(RECORDED, copy)
    Store(copy).close()
    return copy


def _said(done) -> str:
    """The error as one line (long paths wrap it at the console's width)."""
    return " ".join(done.stderr.split())


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _run_ids(db: Path) -> list[str]:
    with Store(db) as store:
        return store.run_ids(limit=100)


def test_which_own_knows_the_database_its_sidecars_links_to_them_and_recovery_files(db):
    assert which_own(db, db) == "the results database"
    assert which_own(Path(f"{db}-wal"), db) == "the results database's write-ahead log"
    assert which_own(Path(f"{db}-live-shm"), db) == "a run's live file's shared memory"
    link = db.with_name("innocent.html")
    link.symlink_to(db)
    assert which_own(link, db) == "the results database"
    hard = db.with_name("hard.html")
    os.link(db, hard)
    assert which_own(hard, db) == "the results database"
    relative = Path(os.path.relpath(db))  # the same file by another spelling
    assert which_own(relative, db) == "the results database"
    assert which_own(db.with_name(f"{db.name}.recovery-abc.sqlite"), db) is not None
    assert which_own(db.with_name("report.html"), db) is None
    linked_db = db.with_name("linked.sqlite")  # a database given through a link
    linked_db.symlink_to(db)
    assert which_own(Path(f"{db}-wal"), linked_db) == "the results database's write-ahead log"
    assert which_own(db.with_name("other.sqlite.recovery-abc.sqlite"), db) is None
    with pytest.raises(UserError, match="is the results database"):
        refuse_own(link, db, "output")


@pytest.mark.parametrize("suffix", ["", "-wal", "-shm", "-live"])
def test_a_report_onto_the_database_or_its_files_is_refused_and_every_run_kept(db, suffix):
    before, runs = _digest(db), _run_ids(db)
    out = Path(f"{db}{suffix}")
    done = cli_in_process(db, "report", "last", "-o", str(out))
    assert done.returncode != 0
    assert "writing it would destroy stored runs" in _said(done), done.stderr
    assert _digest(db) == before and _run_ids(db) == runs
    if suffix:
        assert not out.exists() or out.read_bytes()[:6] != b"<!DOCT"


def test_a_report_through_a_link_to_the_database_is_refused(db, tmp_path):
    before = _digest(db)
    link = tmp_path / "report.html"
    link.symlink_to(db)
    done = cli_in_process(db, "report", "last", "-o", str(link), "--format", "md")
    assert done.returncode != 0 and "is the results database" in _said(done)
    assert _digest(db) == before


def test_a_link_planted_at_the_old_temporary_name_is_not_written_through(db, tmp_path):
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    out = tmp_path / "r.html"
    (tmp_path / ".r.html.partial").symlink_to(victim)  # main's fixed temporary name
    cli_in_process(db, "report", "last", "-o", str(out), check=True)
    assert victim.read_text() == "precious\n"
    assert out.read_bytes().lower().startswith(b"<!doctype html>") and not out.is_symlink()
    assert oct(out.stat().st_mode & 0o777) == oct(0o666 & ~_umask())  # an ordinary new file
    leftovers = [p.name for p in tmp_path.iterdir() if p.name.startswith(".r.html.")]
    assert leftovers == [".r.html.partial"], leftovers  # the planted link only


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def test_an_export_onto_the_database_is_refused(db, tmp_path):
    before = _digest(db)
    done = cli_in_process(db, "export", "last", "-o", str(db))
    assert done.returncode != 0 and "is the results database" in _said(done)
    assert _digest(db) == before
    bundle = tmp_path / "one.iorig"
    cli_in_process(db, "export", "last", "-o", str(bundle), check=True)
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".one.iorig")] == []
    assert _run_ids(bundle) == _run_ids(db)[:1]


@pytest.mark.parametrize("suffix", ["", "-wal", "-live"])
def test_a_target_that_is_the_database_is_refused_even_with_allow_destroy(db, suffix):
    before = _digest(db)
    done = refused_in_process(
        db, "run", "peak", "--quick", "--target", f"{db}{suffix}", "--allow-destroy"
    )
    assert done.returncode == 2, done.stdout + done.stderr
    assert "target 'data': " in _said(done) and "writing it would destroy" in _said(done)
    assert _digest(db) == before


def test_a_file_set_directory_that_holds_the_database_is_refused(tmp_path):
    home = tmp_path / "sets"
    (home / "iorig-data").mkdir(parents=True)
    db = home / "iorig-data" / "results.sqlite"
    done = refused_in_process(
        db, "run", "train", "--quick", "--target", str(home), "--allow-destroy"
    )
    assert done.returncode == 2, done.stdout + done.stderr
    assert "holds the results database" in _said(done)


def test_a_database_another_application_made_is_left_as_it_is(tmp_path):
    other = tmp_path / "other-app.sqlite"
    with sqlite3.connect(other) as conn:
        conn.execute("CREATE TABLE accounts (id INTEGER PRIMARY KEY, name TEXT)")
        conn.execute("INSERT INTO accounts (name) VALUES ('alice')")
    conn.close()
    before = _digest(other)
    for command in (("runs",), ("show", "last"), ("scenarios",)):
        done = cli_in_process(other, *command)
        if command == ("scenarios",):
            continue  # needs no database
        assert done.returncode != 0, command
        said = _said(done)
        assert "is not an iorig results database: it holds the tables 'accounts'" in said
    assert _digest(other) == before
    assert not Path(f"{other}-wal").exists()
    with sqlite3.connect(other) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "delete"
    conn.close()


def test_a_numbered_database_without_iorigs_tables_is_not_ours_either(tmp_path):
    other = tmp_path / "numbered.sqlite"
    with sqlite3.connect(other) as conn:
        conn.execute("PRAGMA user_version = 3")
    conn.close()
    with pytest.raises(UserError, match="schema version 3 and no tables"):
        Store(other)


def test_a_link_planted_beside_the_database_is_refused(db, tmp_path):
    victim = tmp_path / "victim.sqlite"
    victim.write_bytes(b"")
    wal = Path(f"{db}-wal")
    wal.unlink(missing_ok=True)
    wal.symlink_to(victim)
    with pytest.raises(UserError, match="-wal is a symbolic link"):
        Store(db)
    assert victim.read_bytes() == b""


def test_a_link_planted_at_the_live_file_is_refused_and_nothing_written_through(db, tmp_path):
    victim = tmp_path / "elsewhere.sqlite"
    with sqlite3.connect(victim) as conn:
        conn.execute("CREATE TABLE keep (x)")
    conn.close()
    before = _digest(victim)
    Path(f"{db}-live").symlink_to(victim)
    with pytest.raises(LiveUnwritable, match="symbolic link"):
        LiveStore(db)
    assert _digest(victim) == before
