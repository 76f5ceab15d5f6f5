"""The ``iorig`` command line: the one place that prints and the one place
that catches UserError."""

from __future__ import annotations

import contextlib
import errno
import os
import signal
import sys
from typing import Any, TextIO

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
from iorig.cli.common import app, click_command, err_console, one_line_summaries
from iorig.errors import UserError
from iorig.untrusted import check_argv, visible

one_line_summaries(app)


def main() -> None:
    # A background job of a shell script inherits SIGINT ignored, and Python
    # then raises no KeyboardInterrupt: `kill -INT` would not stop iorig while
    # it prepares (a hung probe held it until its timeout), though the run's
    # own handlers take SIGINT. Honour it in every step.
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    given = sys.stdout
    sys.stdout = GuardedOutput(given)  # type: ignore[assignment]
    try:
        # before anything is read or made: an argument that is not UTF-8, or
        # that holds what a terminal would act on (typer's own errors quote it)
        check_argv(sys.argv[1:])
        click_command(app)()
    except UserError as exc:
        # messages quote user input: Text, never markup or highlighting, shown
        # visibly by the console
        message, hint = visible(exc.message, lines=True), exc.hint and visible(exc.hint, lines=True)
        err_console.print(Text.assemble(("error:", "bold red"), " ", message))
        if hint:
            err_console.print(Text.assemble("  ", ("hint:", "cyan"), " ", hint))
        sys.exit(2)
    except OutputLost as lost:
        with contextlib.suppress(OSError, ValueError):  # nothing more goes there
            null = os.open(os.devnull, os.O_WRONLY)
            os.dup2(null, sys.__stdout__.fileno())
            os.close(null)
        if lost.errno != errno.EPIPE:  # a reader that went away (| head) is told nothing
            with contextlib.suppress(OSError):
                err_console.print(
                    Text.assemble(
                        ("error:", "bold red"),
                        f" cannot write the output: {lost.strerror}",
                        "\n  ",
                        ("hint:", "cyan"),
                        " write it where there is room (or to a file with -o where the command "
                        "takes one)",
                    )
                )
        sys.exit(EXIT_OUTPUT_LOST)
    finally:
        sys.stdout = given


EXIT_OUTPUT_LOST = 1


class OutputLost(Exception):
    """Standard output could not be written (full, gone, too big): not an
    OSError, so no file-writing code takes it for its own file's."""

    def __init__(self, cause: OSError) -> None:
        super().__init__(cause.strerror or str(cause))
        self.errno = cause.errno
        self.strerror = cause.strerror or str(cause)


class GuardedOutput:
    """Standard output whose failures are OutputLost, wherever they happen
    (a print deep in a run's progress view, rich's console, json.dump)."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        try:
            return self._stream.write(text)
        except OSError as exc:
            raise OutputLost(exc) from None

    def flush(self) -> None:
        try:
            self._stream.flush()
        except OSError as exc:
            raise OutputLost(exc) from None

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)
