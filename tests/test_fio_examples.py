"""fio's own example job files (tests/data/fio-examples/) as ``iorig run``
takes them, through scripts/fio_examples.py: the committed table in
docs/reference/fio-examples.md is what iorig does now, every example is
accepted or refused with its reasons (never a traceback), and each copy
names the commit it came from. No fio is run: the unit tier."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from tests.scripts import fio_examples

ROOT = Path(__file__).resolve().parent.parent
COPIES = sorted(fio_examples.EXAMPLES.glob("*.fio"))
# tests/test_fio_jobfiles_e2e.py runs these with fio
RUN_BY_E2E = ("fio-rand-read.fio", "fio-seq-write.fio", "fio-rand-RW.fio")
# what a reason names: a [section], or an option (name=value, or a bare flag
# shown in the line's own text)
NAMES_OPTION_OR_SECTION = re.compile(r"\[[^\]]+\]|\b\w+=|^line \d+ \(\w+\)")


@pytest.fixture(scope="module")
def outcomes():
    return {o.name: o for o in fio_examples.classify_all()}


def test_the_committed_table_is_what_iorig_does_now(outcomes):
    written = fio_examples.PAGE.read_text(encoding="utf-8")
    assert written == fio_examples.render(outcomes.values()), (
        "docs/reference/fio-examples.md is out of date: run `make docs` and commit it"
    )


def test_every_example_is_accepted_or_refused_with_its_reasons(outcomes):
    assert len(outcomes) == len(COPIES) == 107  # every examples/*.fio at the commit
    for name, outcome in outcomes.items():
        if outcome.accepted:
            assert outcome.engines, name
            continue
        assert outcome.lines, f"{name}: refused without a reason"
        assert any(NAMES_OPTION_OR_SECTION.search(line) for line in outcome.lines), (
            f"{name}: no reason names an option or section: {outcome.lines}"
        )
        fio_lines = fio_examples.fio_text(fio_examples.EXAMPLES / name).count("\n") + 1
        for line in outcome.lines:
            # a line of fio's file, or of the scenario iorig made of it
            located = re.match(r"(?:iorig's translation, )?line (\d+)\b", line)
            assert located, f"{name}: a reason without its line: {line}"
            if not line.startswith("iorig's"):
                assert 1 <= int(located.group(1)) <= fio_lines, f"{name}: {line}"


def test_the_examples_run_with_fio_elsewhere_are_accepted(outcomes):
    for name in RUN_BY_E2E:
        outcome = outcomes[name]
        assert outcome.accepted and outcome.runs_with_debian_fio, (name, outcome.lines)
        assert outcome.engines == ("libaio",) and outcome.device is None


def test_a_refusal_names_the_line_of_fios_file_and_no_path_of_this_machine(outcomes):
    """The copy's two header lines are not counted, and the page holds no
    path of the machine it was made on."""
    (reason,) = outcomes["backwards-read.fio"].lines
    assert reason.startswith("line 6: [backwards-read] rw=read:-8k: ")
    assert (
        fio_examples.fio_text(fio_examples.EXAMPLES / "backwards-read.fio")
        .split("\n")[5]
        .startswith("rw=read:-8k")
    )
    page = fio_examples.render(outcomes.values())
    assert str(ROOT) not in page and "fio-examples/backwards-read.fio" not in page
    note = outcomes["fio-rand-read.fio"].lines[0]
    assert note.startswith("name=fio-rand-read (line 4) is not passed to fio")


def test_an_engine_debians_fio_lacks_and_a_device_are_said(outcomes):
    plain = outcomes["zipf.fio"]
    odd = fio_examples.Outcome("x.fio", True, (), ("libaio", "spdk"), "/dev/nvme0n1")
    row = fio_examples.row(odd)
    assert "accepted; needs engine spdk, not in Debian's fio" in row
    assert "filename=/dev/nvme0n1 names a device" in row
    assert not odd.runs_with_debian_fio and plain.runs_with_debian_fio
    cell = fio_examples.row(fio_examples.Outcome("y.fio", False, ("a|b $x",), ()))
    assert r"a\|b \$x" in cell and cell.count(" | ") == 3


@pytest.mark.parametrize("path", COPIES, ids=lambda p: p.name)
def test_each_copy_names_fios_commit_above_the_file_unchanged(path):
    first, second, *_ = path.read_text(encoding="utf-8").split("\n", 2)
    assert first == (f"{fio_examples.HEADER_START}{path.name}, commit {fio_examples.FIO_COMMIT}"), (
        path.name
    )
    assert second.startswith("; (github.com/axboe/fio): a job file as fio users have them, ")
