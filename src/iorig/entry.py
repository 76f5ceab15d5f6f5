"""The ``iorig`` command's entry point.

Ctrl-C at the edges of the process's life ends it like any other
interrupt, with exit code 130 (docs/guide/running.md, Interrupting a run): during the
second of imports and command-line building before a command runs (it
was a traceback, or an end by SIGINT), and during the interpreter's
shutdown after a run was stored and printed (a second Ctrl-C there ended
the process by SIGINT, -2 to a parent that is not a shell)."""

from __future__ import annotations

import gc
import signal
import sys

EXIT_INTERRUPTED = 130


def main() -> None:
    try:
        # importing makes some 200 dataclasses and pydantic models, none of
        # them garbage: the collector's passes over them took 0.2 s of a
        # 1.1 s start, and frozen they stay out of the run's own passes
        gc.disable()
        from iorig.cli import main as command_line

        gc.freeze()
        gc.enable()
        command_line()
    except KeyboardInterrupt:  # importing, or typer building the command line: before click's guard
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second one while this exits
        sys.exit(EXIT_INTERRUPTED)
    finally:
        # the command is over (stored, printed, refused or interrupted):
        # nothing is left for a late Ctrl-C to stop while Python shuts down
        signal.signal(signal.SIGINT, signal.SIG_IGN)
