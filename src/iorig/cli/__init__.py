"""The ``iorig`` command line: the one place that prints and the one place
that catches UserError."""

from __future__ import annotations

import signal
import sys

from rich.text import Text

# isort: off
# each module registers its commands; `iorig --help` lists them in this order
from iorig.cli import run as _run  # noqa: F401
from iorig.cli import results as _results  # noqa: F401
from iorig.cli import portable as _portable  # noqa: F401
from iorig.cli import ab as _ab  # noqa: F401
from iorig.cli import doctor as _doctor  # noqa: F401
from iorig.cli import search as _search  # noqa: F401
from iorig.cli import scenarios as _scenarios  # noqa: F401
from iorig.cli import agent as _agent  # noqa: F401
from iorig.cli import sut as _sut  # noqa: F401
from iorig.cli import serve as _serve  # noqa: F401

# isort: on
from iorig.cli.common import app, err_console
from iorig.errors import UserError
from iorig.untrusted import check_argv, visible


def main() -> None:
    # A background job of a shell script inherits SIGINT ignored, and Python
    # then raises no KeyboardInterrupt: `kill -INT` would not stop iorig while
    # it prepares (a hung probe held it until its timeout), though the run's
    # own handlers take SIGINT. Honour it in every step.
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        # before anything is read or made: an argument that is not UTF-8, or
        # that holds what a terminal would act on (typer's own errors quote it)
        check_argv(sys.argv[1:])
        app()
    except UserError as exc:
        # messages quote user input: Text, never markup or highlighting, shown
        # visibly by the console
        message, hint = visible(exc.message, lines=True), exc.hint and visible(exc.hint, lines=True)
        err_console.print(Text.assemble(("error:", "bold red"), " ", message))
        if hint:
            err_console.print(Text.assemble("  ", ("hint:", "cyan"), " ", hint))
        sys.exit(2)
