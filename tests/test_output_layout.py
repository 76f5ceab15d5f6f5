"""`runs`, `show` and `compare` as people read them: in an 80- and a
200-column terminal and piped. Each output is compared with its golden in
tests/data/output (IORIG_UPDATE_GOLDENS=1 writes them) and checked for what
a golden could silently bless: a line wider than the terminal, a word
broken inside a table cell, a run on more than one line. They are rendered
in process as rich writes to a terminal, and checked once per width through
a real pseudo-terminal. The runs are fixed figures from tests/layoutdb.py."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
from rich.cells import cell_len
from tests.conftest import cli_in_process
from tests.layoutdb import build

pytestmark = pytest.mark.system  # real processes and pseudo-terminals
REPO = Path(__file__).resolve().parent.parent
GOLDENS = Path(__file__).resolve().parent / "data" / "output"
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
MODES = ("tty80", "tty200", "piped")
COMMANDS = {
    "runs": ("runs",),
    "show": ("show", "18c0ffee0018"),
    "compare": ("compare", "01c0ffee0001", "05c0ffee0005"),
    "compare4": ("compare", "01c0ffee0001", "05c0ffee0005", "09c0ffee0009", "13c0ffee0013"),
}


def _env(db: Path, columns: int) -> dict[str, str]:
    return dict(
        os.environ,
        IORIG_DB=str(db),
        COLUMNS=str(columns),
        NO_COLOR="1",
        TZ="UTC",
        PYTHONPATH=os.pathsep.join([str(REPO / "src"), os.environ.get("PYTHONPATH", "")]),
        TERM="xterm",
    )


def _in_terminal(db: Path, columns: int, args: tuple[str, ...]) -> str:
    """stdout on a pseudo-terminal ``columns`` wide, as a person sees it."""
    import fcntl
    import struct
    import termios

    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 50, columns, 0, 0))
    command = [sys.executable, "-m", "iorig", *args]
    proc = subprocess.Popen(
        command, cwd=REPO, env=_env(db, columns), stdout=slave, stderr=subprocess.PIPE
    )
    os.close(slave)
    chunks = []
    while True:
        try:
            data = os.read(master, 65536)
        except OSError:  # the other end closed
            break
        if not data:
            break
        chunks.append(data)
    os.close(master)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err.decode()
    text = b"".join(chunks).decode().replace("\r\n", "\n")
    return ANSI.sub("", text)  # NO_COLOR leaves bold in


def _piped(db: Path, args: tuple[str, ...]) -> str:
    """stdout piped, 80 columns: through ``iorig.cli.main`` in this process,
    as a pipe gets it (no terminal: nothing to start a process for)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("TZ", "UTC")
        time.tzset()
        try:
            return cli_in_process(db, *args, columns=80, check=True).stdout
        finally:
            patch.undo()
            time.tzset()


def _as_terminal(db: Path, columns: int, args: tuple[str, ...]) -> str:
    """stdout as rich writes it to a terminal ``columns`` wide, in this
    process; the same as a pseudo-terminal's (test_a_real_terminal_…)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("TZ", "UTC")
        time.tzset()
        try:
            out = cli_in_process(db, *args, columns=columns, check=True, terminal=True).stdout
        finally:
            patch.undo()
            time.tzset()
    return ANSI.sub("", out)


@pytest.fixture(scope="module")
def database(tmp_path_factory) -> Path:
    db = tmp_path_factory.mktemp("layout") / "results.sqlite"
    build(db)
    return db


@pytest.fixture(scope="module")
def outputs(database: Path) -> dict[tuple[str, str], str]:
    out = {}
    for name, args in COMMANDS.items():
        out[(name, "tty80")] = _as_terminal(database, 80, args)
        out[(name, "tty200")] = _as_terminal(database, 200, args)
        out[(name, "piped")] = _piped(database, args)
    return out


@pytest.mark.parametrize("columns", [80, 200])
def test_a_real_terminal_shows_what_the_goldens_hold(database, outputs, columns):
    # every command and width through a real pseudo-terminal costs twelve
    # interpreter starts; one command per width shows the in-process terminal
    # output is what a person's terminal gets
    assert (
        _in_terminal(database, columns, COMMANDS["compare"])
        == outputs[("compare", f"tty{columns}")]
    )


def table_cells(text: str) -> list[list[str]]:
    """Each table line's cells (header and body lines of rich's boxed tables)."""
    return [
        [cell.strip() for cell in re.split(r"[│┃]", line)[1:-1]]
        for line in text.splitlines()
        if line.startswith(("│", "┃"))
    ]


def words(text: str) -> set[str]:
    return {word for cells in table_cells(text) for cell in cells for word in cell.split()}


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("name", COMMANDS)
def test_output_matches_its_golden(outputs, name, mode):
    golden = GOLDENS / f"{name}-{mode}.txt"
    text = outputs[(name, mode)]
    if os.environ.get("IORIG_UPDATE_GOLDENS"):
        golden.write_text(text, encoding="utf-8")
    assert text == golden.read_text(encoding="utf-8")


@pytest.mark.parametrize("width", [80, 200])
@pytest.mark.parametrize("name", COMMANDS)
def test_a_terminal_line_fits_and_no_cell_word_is_broken(outputs, name, width):
    text = outputs[(name, f"tty{width}")]
    assert max(cell_len(line) for line in text.splitlines()) <= width
    # the piped output wraps nothing: every word a cell holds, whole
    whole = words(outputs[(name, "piped")])
    for word in words(text):
        if word.endswith("…"):  # cut to fit: the start of a whole word
            assert any(w.startswith(word[:-1]) for w in whole), word
        else:
            assert word in whole, f"{word!r} is part of a word broken across lines"


def test_piped_output_wraps_nothing(outputs):
    for name in COMMANDS:
        text = outputs[(name, "piped")]
        assert not any(line != line.rstrip() for line in text.splitlines()), name
        assert "left out to fit" not in text, name


@pytest.mark.parametrize("mode", MODES)
def test_runs_prints_one_line_per_run(outputs, mode):
    text = outputs[("runs", mode)]
    body = [line for line in text.splitlines() if line.startswith("│")]
    assert len(body) == 20
    for index in range(20):
        run_id = f"{index:02d}c0ffee{index:04d}"
        assert sum(run_id in line for line in text.splitlines()) == 1, run_id


def test_a_narrow_terminal_says_which_columns_it_left_out(outputs):
    assert "left out to fit 80 columns: label, target" in outputs[("runs", "tty80")]
    assert "left out to fit" not in outputs[("runs", "tty200")]
    # the transactional scenario's name is whole at 80 columns
    assert "│ transactional │" in outputs[("runs", "tty80")]


def test_durations_read_as_people_write_them(outputs):
    assert "(1m 37s)" in outputs[("show", "piped")]  # 96.5088 s
