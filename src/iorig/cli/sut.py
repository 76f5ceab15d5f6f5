"""``iorig sut template|check``: describe the system under test for
``--sut``."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from iorig.cli.common import app, console

sut_app = typer.Typer(no_args_is_help=True)
app.add_typer(sut_app, name="sut", help="Describe the system under test for --sut.")


@sut_app.command("template")
def sut_template() -> None:
    """Print a commented --sut file with every field (all optional)."""
    from iorig.scenario.sut import template

    sys.stdout.write(template())


@sut_app.command("check")
def sut_check(file: Annotated[Path, typer.Argument(help="a --sut YAML file")]) -> None:
    """Validate a --sut file without running anything."""
    from iorig.scenario.sut import check_sut_file

    check_sut_file(file)
    console.print(f"{escape(str(file))}: a valid system-under-test description")
