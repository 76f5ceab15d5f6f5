"""Every command's help reads whole at 80 columns, in a terminal or a pipe
(issue 50): summaries not cut mid-sentence, no line past the width, words
for placeholders (N, PATH, the option's name) instead of typer's
``<bool>``, ``<list[str]>`` and ``<int range>``, long choices listed in
the help instead of one unbreakable ``a|b|c…`` word. Into a pipe, prose
is not wrapped at all: a command iorig suggests stays whole."""

from __future__ import annotations

import io
import re

import pytest

from iorig.cli import app
from iorig.cli.common import click_command
from iorig.report.writers.console import SafeConsole

WIDTH = 80


def _commands() -> list[tuple[str, ...]]:
    found: list[tuple[str, ...]] = [()]

    def walk(command, path: tuple[str, ...]) -> None:
        for name, sub in getattr(command, "commands", {}).items():
            found.append((*path, name))
            walk(sub, (*path, name))

    walk(click_command(app), ())
    return found


@pytest.mark.parametrize("path", _commands(), ids=lambda p: " ".join(p) or "iorig")
def test_help_reads_whole_at_80_columns(cli, db_path, path):
    shown = cli(db_path, *path, "--help", columns=WIDTH, check=True).stdout
    lines = shown.splitlines()
    assert max(map(len, lines)) <= WIDTH, [line for line in lines if len(line) > WIDTH]
    for placeholder in ("<bool>", "<str>", "<int", "<float", "<list[", "<path>"):
        options = [line for line in lines if line.lstrip().startswith("-")]
        assert not [line for line in options if placeholder in line], (placeholder, options)
    assert not re.search(r"--no-[a-z]", shown), "a flag is one option, not a pair"
    assert not [line for line in lines if line.endswith("...") and "Usage" not in line]


def test_a_summary_reads_as_one_sentence_in_the_command_list(cli, db_path):
    shown = cli(db_path, "--help", columns=WIDTH, check=True).stdout
    listed = " ".join(line.strip() for line in shown.split("Commands:")[1].splitlines())
    # ab's docstring broke after "then the"; the list joins it
    assert "then the measured phases of A and B" in listed
    assert "comparisons, and running runs live" in listed


def test_long_choices_are_named_and_listed_in_the_help(cli, db_path):
    shown = cli(db_path, "run", "--help", columns=WIDTH, check=True).stdout
    assert "--rw RW" in shown
    joined = " ".join(shown.split())
    assert "(one of: read, write, randread, randwrite, randrw, rw, trim" in joined


def test_into_a_pipe_a_suggested_command_stays_on_one_line():
    out = io.StringIO()
    console = SafeConsole(file=out, width=WIDTH, unwrapped_in_pipe=True)
    suggestion = "stored in results.sqlite; again with `iorig compare 8a2251c4fed9 f76d097d4ff9`"
    console.print(f"A/B 078af78c7906: 2 round(s) completed, order seed 376755387; {suggestion}")
    (line,) = out.getvalue().splitlines()
    assert len(line) > WIDTH and "`iorig compare 8a2251c4fed9 f76d097d4ff9`" in line


def test_scenarios_lists_every_scenarios_measured_phases_and_mixes(cli, db_path):
    # issue 50: train's and checkpoint's phases (from their own sections) were
    # blank, and a block-size mix was listed as its first size
    listed = cli(db_path, "scenarios", columns=200, check=True).stdout
    rows = {line.split("│")[1].strip(): line for line in listed.splitlines() if "│" in line}
    assert "│ train " in rows["train"], rows["train"]
    assert "write-1 … write-10, read-1 … read-10" in rows["checkpoint"], rows["checkpoint"]
    shown = cli(db_path, "scenarios", "show", "ai-image", columns=200, check=True).stdout
    assert "randread mix 256KiB 95% 64KiB 5%" in shown
