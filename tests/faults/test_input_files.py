"""Files the user names are read as bounded regular files, and the command
line is UTF-8 text — each case here once exhausted the machine, hung or
ended in a traceback with a file left behind:

* ``--sut``, ``--hosts-file``, ``--allow-commands``, ``sut check`` and a
  scenario read ``/dev/zero`` until memory ran out (10–18 GB in 25 s), and
  hung on a FIFO no one writes to; ``import`` called a device "missing";
* ``--label`` with a byte that is not UTF-8 was a traceback after the run
  had laid out its 16 MiB data file, which stayed.

Each input is fed a character device, a FIFO, a directory and a file
larger than iorig reads; each must be refused (exit 2) naming the option
and what the path is, with no run stored and nothing left in the target.
"""

from __future__ import annotations

import os
import resource
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from tests.conftest import REPO

ADHOC = ("run", "--rw", "randread", "--bs", "4k", "--duration", "1s", "--size", "1MiB")
LARGE = 8 << 20  # above every limit iorig reads files with


def _rows(db: Path) -> int:
    if not db.exists():
        return 0
    with sqlite3.connect(db) as con:
        return con.execute("select count(*) from runs").fetchone()[0]


@pytest.fixture
def memory_cap():
    """Today's main read /dev/zero until memory ran out: cap this process's
    address space at what it uses plus 1 GiB while the test runs, so that
    such a read fails the test instead of the machine."""
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    with open("/proc/self/statm") as f:
        used = int(f.read().split()[0]) * resource.getpagesize()
    cap = used + (1 << 30)
    if hard != resource.RLIM_INFINITY:
        cap = min(cap, hard)
    resource.setrlimit(resource.RLIMIT_AS, (cap, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


def _special(tmp_path: Path, kind: str) -> tuple[str, str]:
    """A path of ``kind`` and the words the refusal must use for it."""
    if kind == "chardev":
        return "/dev/zero", "a character device"
    if kind == "fifo":
        fifo = tmp_path / "in.yaml"
        os.mkfifo(fifo)
        return str(fifo), "a named pipe"
    if kind == "directory":
        folder = tmp_path / "folder.yaml"
        folder.mkdir()
        return str(folder), "a directory"
    big = tmp_path / "big.yaml"
    with big.open("wb") as f:
        f.truncate(LARGE)  # sparse: no disk used
    return str(big), "larger than"


def _commands(path: str, target: str) -> dict[str, tuple[str, ...]]:
    return {
        "--sut": (*ADHOC, "--target", target, "--sut", path),
        "--hosts-file": (*ADHOC, "--target", target, "--hosts-file", path),
        "--allow-commands": (*ADHOC, "--target", target, "--allow-commands", path),
        "sut check": ("sut", "check", path),
        "scenario file": ("run", path, "--target", target),
        "scenarios show": ("scenarios", "show", path),
        "bundle": ("import", path),
    }


NAMED = {  # what the refusal calls the file, per command
    "--sut": "--sut",
    "--hosts-file": "--hosts-file",
    "--allow-commands": "--allow-commands",
    "sut check": "--sut",
    "scenario file": "scenario file",
    "scenarios show": "scenario file",
    "bundle": "bundle",
}
KINDS = ["chardev", "fifo", "directory", "large"]


@pytest.mark.timeout(30)  # main hung on the FIFO: fail, do not wait 5 minutes
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("which", list(NAMED))
def test_an_input_that_is_no_regular_file_or_too_large_is_refused(
    refused, db_path, tmp_path, memory_cap, which, kind
):
    if which == "bundle" and kind == "large":
        pytest.skip("a bundle is a database of any size: SQLite reads it, iorig does not")
    path, words = _special(tmp_path, kind)
    target = tmp_path / "target"
    target.mkdir()
    done = refused(*_commands(path, f"{target}/")[which])
    assert done.returncode == 2, done.stdout + done.stderr
    message = " ".join(done.stderr.split())
    assert f"{NAMED[which]} {path}" in message and words in message, message
    assert "Traceback" not in done.stderr
    assert _rows(db_path) == 0
    assert list(target.iterdir()) == []


@pytest.mark.timeout(30)
def test_a_scenario_through_a_link_to_a_device_is_refused(refused, db_path, tmp_path, memory_cap):
    link = tmp_path / "zero.yaml"
    link.symlink_to("/dev/zero")
    done = refused("scenarios", "show", str(link))
    assert done.returncode == 2, done.stderr
    assert f"scenario file {link}" in done.stderr and "a character device" in done.stderr


def test_the_limits_are_the_ones_stated(tmp_path):
    """A file of exactly the limit is read; one byte more is refused."""
    from iorig.errors import UserError
    from iorig.untrusted import INPUT_LIMIT_BYTES, read_input

    path = tmp_path / "f.txt"
    path.write_bytes(b"a" * INPUT_LIMIT_BYTES)
    assert len(read_input(path, "--x")) == INPUT_LIMIT_BYTES
    path.write_bytes(b"a" * (INPUT_LIMIT_BYTES + 1))
    with pytest.raises(UserError, match=r"--x .*larger than 4,194,304 bytes"):
        read_input(path, "--x")
    path.write_bytes(b"ok\n\xff\n")
    with pytest.raises(UserError, match=r"--x .* is not UTF-8 text \(line 2, byte 4\)"):
        read_input(path, "--x")


# ------------------------------------------------- invalid UTF-8 on argv


def _surrogate(text: str) -> str:
    """``text`` with byte 0xff in it, as Python decodes such an argument."""
    return text.replace("\xff", "\udcff")


@pytest.mark.parametrize(
    ("option", "value"),
    [
        ("--label", "a\xffb"),
        ("--note", "cache\xff"),
        ("--target", "DIR/t\xff/"),
        ("--sut", "DIR/s\xff.yaml"),
        ("--set", "engine=psync\xff"),
    ],
)
def test_an_argument_that_is_not_utf8_is_refused_before_anything(
    refused, db_path, tmp_path, option, value
):
    target = tmp_path / "target"
    target.mkdir()
    value = _surrogate(value.replace("DIR", str(target)))
    args = [*ADHOC, "--target", f"{target}/", option, value]
    if option == "--target":
        args = [*ADHOC, option, value]
    done = refused(*args)
    assert done.returncode == 2, done.stdout + done.stderr
    message = " ".join(done.stderr.split())
    assert "not valid UTF-8" in message and "0xff" in message and option in message, message
    assert "Traceback" not in done.stderr and "\udcff" not in done.stderr
    assert _rows(db_path) == 0
    assert list(target.iterdir()) == []


@pytest.mark.system
def test_a_real_command_line_with_a_byte_that_is_not_utf8(tmp_path):
    """The bytes as a shell passes them, through a real interpreter's
    decoding of argv (surrogateescape)."""
    target = tmp_path / "target"
    target.mkdir()
    db = tmp_path / "results.sqlite"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "iorig",
            "--db",
            str(db),
            *ADHOC,
            "--target",
            f"{target}/",
            "--label",
            b"a\xffb",
        ],
        capture_output=True,
        cwd=REPO,
        timeout=120,
        env=dict(os.environ, COLUMNS="200", NO_COLOR="1", LC_ALL="C.UTF-8"),
    )
    stderr = done.stderr.decode("utf-8", "replace")
    assert done.returncode == 2, stderr
    assert "--label" in stderr and "not valid UTF-8" in stderr and "0xff" in stderr
    assert "Traceback" not in stderr
    assert _rows(db) == 0
    assert list(target.iterdir()) == []


def test_a_target_under_a_directory_whose_name_is_not_utf8_is_refused(
    refused, db_path, tmp_path, monkeypatch
):
    """The command line is UTF-8, the working directory is not: the target's
    full path could not be written to fio's job file (a traceback on main)."""
    here = tmp_path / "w\udcfe"  # byte 0xfe, as Python names it
    here.mkdir()
    monkeypatch.chdir(here)
    done = refused(*ADHOC, "--target", "./d/")
    assert done.returncode == 2, done.stdout + done.stderr
    message = " ".join(done.stderr.split())
    assert "not valid UTF-8" in message and "0xfe" in message, message
    assert "Traceback" not in done.stderr
    assert _rows(db_path) == 0
    assert list(here.iterdir()) == []
