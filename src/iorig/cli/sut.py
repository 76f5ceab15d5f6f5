"""``iorig sut template|check`` and the full-disclosure page of ``iorig
report RUN --disclosure``."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from iorig.analyze.analysis import analyse
from iorig.cli.common import app, console, open_reaped, write_atomically
from iorig.cli.refs import resolve_run_id
from iorig.scenario.sut import check_sut_file, template

sut_app = typer.Typer(no_args_is_help=True)
app.add_typer(sut_app, name="sut", help="Describe the system under test for --sut.")


@sut_app.command("template")
def sut_template() -> None:
    """Print a commented --sut file with every field (all optional)."""
    sys.stdout.write(template())


@sut_app.command("check")
def sut_check(file: Annotated[Path, typer.Argument(help="a --sut YAML file")]) -> None:
    """Validate a --sut file without running anything."""
    check_sut_file(file)
    console.print(f"{escape(str(file))}: a valid system-under-test description")


def write_disclosure(db: Path, ref: str, output: Path) -> None:
    """The full-disclosure HTML page of one run (or load-point curve)."""
    from iorig.report.writers.disclosure import render_disclosure  # jinja2: when asked for

    with open_reaped(db) as store:
        run_id = resolve_run_id(store, ref)
        analysis = analyse(store.load_run(run_id), store.job_texts(run_id))
    text = render_disclosure(analysis)
    write_atomically(output, text)
    console.print(f"wrote {escape(str(output))} ({len(text.encode()) / 1e3:.0f} kB)")
