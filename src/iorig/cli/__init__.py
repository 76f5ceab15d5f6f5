"""The ``iorig`` command line: the one place that prints and the one place
that catches UserError."""

from __future__ import annotations

import sys

from rich.text import Text

from iorig.cli import ab as _ab  # noqa: F401
from iorig.cli import agent as _agent  # noqa: F401
from iorig.cli import commands as _commands  # noqa: F401 - registers the commands
from iorig.cli import search as _search  # noqa: F401
from iorig.cli.common import app, err_console
from iorig.errors import UserError


def main() -> None:
    try:
        app()
    except UserError as exc:
        # messages quote user input: Text, never markup or highlighting
        err_console.print(Text.assemble(("error:", "bold red"), " ", exc.message))
        if exc.hint:
            err_console.print(Text.assemble("  ", ("hint:", "cyan"), " ", exc.hint))
        sys.exit(2)
