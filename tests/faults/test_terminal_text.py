"""Text from outside never acts on the terminal it is printed to.

A label, title, phase name, target path, SUT field, note, mark, finding or
job file is data, stored as given (or imported from someone's bundle): a
terminal control sequence in it (ESC/CSI/OSC, CR, backspace, the one-byte
C1 CSI) could clear the screen, hide or forge output or plant a link, a
bidirectional override could reorder what is shown, and a line separator
inside a job file's value could show one option line as two. Each command
that prints is run here in process, under a terminal (colours) and piped,
on runs stored directly and on the same runs imported from a bundle; no
such character may reach the output raw: each is shown as an escape.
"""

from __future__ import annotations

import ast
import contextlib
import csv
import io
import re
import sqlite3
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from tests import builders
from tests.conftest import cli_in_process

from iorig.model import Disclosure, EventAction, EventRecord, EventStatus, Finding, StoredRun
from iorig.model.sut import SutRecord
from iorig.store import Store

# what a hostile string carries: clear screen, an OSC 8 hyperlink, carriage
# return and backspace (overwrite), C1 CSI, bidi override / isolate / marks,
# NEL, vertical tab, form feed, line separator, a newline
P = (
    "\x1b[2J\x1b]8;;http://evil.example/\x07link\x1b]8;;\x07\r\x08\x9b2J"
    "\u202eevil\u2066\u200f\u061c\x85\x0b\x0c\u2028\nforged-line"
)
A, B = "aaaa00000001", "bbbb00000002"
# what must never reach the output (independent of iorig's own list): C0
# but newline, DEL, C1, the bidi controls, line/paragraph separators
RAW = re.compile(
    "[\x00-\x09\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\u2028\u2029]"
)
SGR = re.compile(r"\x1b\[[0-9;]*m")  # rich's own colours, under a terminal

JOB = (
    "[read]\nfilename=/data/a\u2028exec_prerun=touch /tmp/pwned\u2029rw=read\x0bdirect=0"
    "\x0cbs=4k\rsize=1m\x85iodepth=1\nruntime=1\n"
)


def _run(run_id: str, label: str, level: float, seq: int) -> StoredRun:
    at = 1_767_225_600.0 + seq * 100
    mark = EventRecord(
        1.0, EventAction.MARK, "mark" + P, EventStatus.DONE, at + 1, at + 1, detail="detail" + P
    )
    phase = builders.phase(
        "read" + P,
        np.full(10, level) + np.arange(10),
        job_text=JOB,
        events=(mark,),
        started_at=at,
        ended_at=at + 10,
    )
    return builders.stored(
        run_id,
        label,
        [phase],
        scenario="peak" + P,
        title="title" + P,
        fio_version="fio-3.33" + P,
        targets=[
            {
                "role": "data",
                "kind": "file",
                "given": "/d/" + P,
                "path": "/d/f" + P,
                "size_bytes": 1 << 30,
            }
        ],
        params={"size": {"value": 1, "text": "1GiB" + P, "origin": "--set"}},
        warnings=(Finding("busy", "message" + P, "advice" + P),),
        disclosure=Disclosure({"host": {"name" + P: "value" + P}}),
        sut=SutRecord(
            {"product": {"name": "product" + P, "description": "about" + P}}, ("note" + P,)
        ),
        command="iorig run" + P,
        hostname="host" + P,
        started_at=at,
        ended_at=at + 10,
    )


def _runs() -> list:
    return [_run(A, "lab" + P, 1000.0, 1), _run(B, "other" + P, 1200.0, 2)]


@pytest.fixture(scope="module")
def stored_db(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("stored") / "results.sqlite"
    with Store(path) as store:
        store.add_runs(_runs())
    return path


@pytest.fixture(scope="module")
def imported_db(tmp_path_factory) -> tuple[Path, str]:
    """The same runs, imported from a bundle: what `import` printed too."""
    where = tmp_path_factory.mktemp("imported")
    bundle = where / "bundle.sqlite"
    with Store(bundle) as store:
        store.add_runs(_runs())
    db = where / "results.sqlite"
    done = cli_in_process(db, "import", str(bundle))
    assert done.returncode == 0, done.stdout + done.stderr
    return db, done.stdout + done.stderr


def _raw(text: str, terminal: bool) -> list[str]:
    """The characters that reached ``text`` raw, as U+XXXX."""
    if terminal:
        text = SGR.sub("", text)
    return sorted({f"U+{ord(c):04X}" for c in RAW.findall(text)})


COMMANDS = [
    ("runs",),
    ("show", A),
    ("show", A, "--timeline"),
    ("show", A, "--disclosure"),
    ("show", A, "--jobs"),
    ("show", A, "--format", "md"),
    ("show", A, "--format", "csv"),
    ("show", A, "--json"),
    ("compare", A, B),
    ("compare", A, B, "--format", "md"),
    ("compare", A, B, "--format", "csv"),
    ("report", A, B, "--format", "md"),
]


@pytest.mark.parametrize("terminal", [False, True], ids=["piped", "terminal"])
@pytest.mark.parametrize("source", ["stored", "imported"])
@pytest.mark.parametrize("args", COMMANDS, ids=[" ".join(c) for c in COMMANDS])
def test_no_control_or_bidi_character_reaches_the_output_raw(request, args, source, terminal):
    db = (
        request.getfixturevalue("stored_db")
        if source == "stored"
        else (request.getfixturevalue("imported_db")[0])
    )
    done = cli_in_process(db, *args, columns=100, terminal=terminal)
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout + done.stderr
    if "csv" in args:
        out = out.replace("\r\n", "\n")  # CSV's own line ends (RFC 4180)
    assert _raw(out, terminal) == [], out
    if "--json" not in args:  # JSON escapes by itself (\u001b)
        assert "\\x1b[2J" in out or "\\\\x1b[2J" in out, out  # shown, as an escape
    # a newline in a label or name never starts a line of its own
    assert not any(line.lstrip("│ ").startswith("forged-line") for line in out.splitlines())


def test_what_import_prints_is_clean(imported_db):
    out = imported_db[1]
    assert "imported" in out and _raw(out, False) == []


def test_show_jobs_shows_a_line_separator_inside_a_value_as_an_escape(stored_db):
    """fio reads the job file line by line at \\n only: a U+2028, U+2029,
    NEL, VT, FF or CR inside a value is part of it. Shown raw, a terminal
    (or a viewer) would break the line there and show a forged
    ``exec_prerun=`` option line."""
    for terminal in (False, True):
        out = cli_in_process(stored_db, "show", A, "--jobs", terminal=terminal).stdout
        lines = [SGR.sub("", line).strip() for line in out.splitlines()]
        assert (
            "filename=/data/a\\u2028exec_prerun=touch /tmp/pwned\\u2029rw=read\\x0bdirect=0"
            "\\x0cbs=4k\\x0dsize=1m\\x85iodepth=1" in lines
        ), out
        assert not [line for line in lines if line.startswith(("exec_prerun", "rw=", "bs="))]


def test_markdown_and_csv_keep_user_text_in_its_cell(stored_db):
    """A newline in a title does not start a Markdown heading or row; a CSV
    cell a spreadsheet would take for a formula is quoted as text."""
    md = cli_in_process(stored_db, "show", A, "--format", "md").stdout
    assert not [line for line in md.splitlines() if line.startswith("forged-line")]
    with Store(stored_db) as store:
        store.add_runs(
            [
                builders.stored(
                    "cccc00000003",
                    '=HYPERLINK("http://x","a")',
                    [builders.phase("@SUM(1+1)", np.full(5, 10.0))],
                    started_at=5.0,
                )
            ]
        )
    csv_text = cli_in_process(stored_db, "show", "cccc00000003", "--format", "csv").stdout
    header, row = list(csv.reader(io.StringIO(csv_text)))
    cells = dict(zip(header, row, strict=True))
    assert cells["phase"] == "'@SUM(1+1)", csv_text
    assert cells["label"] == '\'=HYPERLINK("http://x","a")', csv_text


def test_the_live_progress_lines_show_user_text_as_escapes(monkeypatch):
    """``iorig run``'s progress: the scenario's title, the target and each
    phase's name and error, under a terminal and piped."""
    from iorig.cli import common
    from iorig.run.events import PhaseFinished, PhaseStarted, RunStarted

    plan = SimpleNamespace(
        resolved=SimpleNamespace(scenario=SimpleNamespace(title="title" + P), profile=None),
        targets={"data": SimpleNamespace(path=Path("/d/" + P), size_bytes=1 << 20)},
        fio_version="fio-3.33",
        engines=["psync"],
    )
    planned = SimpleNamespace(seq=1, name="read" + P, kind="measure", duration_s=1.0)
    result = builders.phase("read" + P, np.full(3, 100.0), error="error" + P)
    for terminal in (False, True):
        out = io.StringIO()
        console = common.console
        with contextlib.ExitStack() as stack:
            patch = stack.enter_context(pytest.MonkeyPatch.context())
            patch.setattr(console, "_force_terminal", terminal)
            patch.setattr(console, "_file", out)
            with common.ProgressView(console) as view:
                view.handle(RunStarted("abc123", plan))  # type: ignore[arg-type]
                view.handle(PhaseStarted(planned, 0, 0, 1))  # type: ignore[arg-type]
                view.handle(PhaseFinished(planned, result))  # type: ignore[arg-type]
        text = out.getvalue()
        # under a terminal rich moves the cursor itself (hide, erase line,
        # up): those are allowed, the payload's sequences are not
        own = re.compile(r"\x1b\[\?25[lh]|\x1b\[2K|\x1b\[1A|\r")
        left = own.sub("", SGR.sub("", text)) if terminal else text
        assert _raw(left, False) == [], repr(text)
        assert "\\x1b[2J" in text and "\\u202e" in text


# ------------------------------------------------------- refused at input


def _rows(db: Path) -> int:
    if not db.exists():
        return 0
    with sqlite3.connect(db) as con:
        return con.execute("select count(*) from runs").fetchone()[0]


@pytest.mark.parametrize(
    ("option", "value", "named"),
    [
        ("--label", "a\x1b[2Jb", "U+001B"),
        ("--label", "ab\u202ec", "U+202E"),
        ("--label", "one\ntwo", "U+000A"),
        ("--label", "x\x9b", "U+009B"),
        ("--note", "cache\x1b]8;;http://x\x07off", "U+001B"),
        ("--note", "cache \u2066off", "U+2066"),
        ("--note", "c\u2028d", "U+2028"),
    ],
)
def test_label_and_note_refuse_control_and_bidi_characters(
    refused, db_path, tmp_path, option, value, named
):
    target = tmp_path / "target"
    target.mkdir()
    done = refused(
        "run",
        "--rw",
        "randread",
        "--bs",
        "4k",
        "--duration",
        "1s",
        "--size",
        "1MiB",
        "--target",
        f"{target}/",
        option,
        value,
    )
    assert done.returncode == 2, done.stdout + done.stderr
    message = " ".join(done.stderr.split())
    assert option in message and named in message, message
    position = next(i for i, c in enumerate(value) if RAW.match(c) or c == "\n") + 1
    assert f"position {position}" in message, message
    assert "Traceback" not in done.stderr
    assert _raw(done.stderr, False) == []
    assert _rows(db_path) == 0
    assert list(target.iterdir()) == []


def test_ab_side_labels_are_one_line_of_plain_text(refused, db_path):
    done = refused("ab", "peak", "--a-label", "one\ntwo")
    assert done.returncode == 2, done.stdout + done.stderr
    assert "--a-label 'one\\x0atwo': U+000A (NEWLINE) at position 4" in done.stderr, done.stderr
    assert _rows(db_path) == 0


def test_every_console_is_the_one_that_shows_text_visibly():
    """Nothing prints around report/writers/console.py: no other rich Console is
    made, and nothing calls print(), typer.echo or click.echo."""
    src = Path(__file__).resolve().parents[2] / "src" / "iorig"
    found = []
    for path in sorted(src.rglob("*.py")):
        if path.name == "console.py" and path.parent.name == "writers":
            continue
        text = path.read_text()
        if not re.search(r"\bConsole\b|print\(|echo\(", text):
            continue  # parsed only where one may be
        for node in ast.walk(ast.parse(text, str(path))):
            if isinstance(node, ast.ImportFrom) and node.module == "rich.console":
                found += [
                    f"{path.name}: imports Console" for a in node.names if a.name == "Console"
                ]
            elif isinstance(node, ast.Call):
                name = ast.unparse(node.func)
                if name in ("print", "Console", "typer.echo", "click.echo", "rich.print"):
                    found.append(f"{path.name}:{node.lineno}: {name}()")
    assert found == []


def test_an_error_quoting_a_files_text_and_a_scenario_title_show_escapes(tmp_path):
    """YAML's double-quoted strings take \\e and \\u escapes: a field name
    of a --sut file quoted back by its error, a scenario's title shown."""
    sut = tmp_path / "sut.yaml"
    sut.write_text('product:\n  "x\\e]8;;http://evil.example/\\a\\u202ey": 1\n')
    scenario = tmp_path / "s.yaml"
    scenario.write_text(
        'iorig: 1\nname: s\ntitle: "t\\e[2J\\u202e"\ntargets:\n  data: {size: 16MiB}\n'
        "phases:\n  - name: m\n    kind: measure\n    duration: 1s\n"
        "    workloads:\n      - {rw: randread, bs: 4k, engine: psync}\n"
    )
    for terminal in (False, True):
        done = cli_in_process(tmp_path / "db.sqlite", "sut", "check", str(sut), terminal=terminal)
        assert done.returncode == 2, done.stdout + done.stderr
        assert "unknown field" in done.stderr
        assert _raw(done.stderr, terminal) == [], repr(done.stderr)
        assert "x\\x1b]8;;http://evil.example/" in done.stderr, done.stderr
        shown = cli_in_process(
            tmp_path / "db.sqlite", "scenarios", "show", str(scenario), terminal=terminal
        )
        assert shown.returncode == 0, shown.stderr
        assert _raw(shown.stdout, terminal) == [] and "t\\x1b[2J\\u202e" in shown.stdout, (
            shown.stdout
        )
