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
    # While the command's modules import, a Ctrl-C is noted, not raised: a
    # KeyboardInterrupt raised inside importlib's own callbacks is printed
    # as "Exception ignored … Traceback" and the import goes on (a fresh
    # clone's `iorig runs` interrupted 0.8 s in printed one and exited 0)
    noted: list[int] = []
    ignored = signal.getsignal(signal.SIGINT) is signal.SIG_IGN
    signal.signal(signal.SIGINT, lambda signum, _frame: noted.append(signum))
    try:
        try:
            # importing makes some 200 dataclasses and pydantic models, none
            # of them garbage: the collector's passes over them took 0.2 s of
            # a 1.1 s start, and frozen they stay out of the run's own passes
            gc.disable()
            from iorig.cli import main as command_line

            gc.freeze()
            gc.enable()
        finally:
            # the command line honours SIGINT even where it came ignored (iorig.cli)
            signal.signal(signal.SIGINT, signal.SIG_IGN if ignored else signal.default_int_handler)
        if noted:
            raise KeyboardInterrupt
        command_line()
    except KeyboardInterrupt:  # importing, or typer building the command line: before click's guard
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second one while this exits
        sys.exit(EXIT_INTERRUPTED)
    finally:
        # the command is over (stored, printed, refused or interrupted):
        # nothing is left for a late Ctrl-C to stop while Python shuts down
        signal.signal(signal.SIGINT, signal.SIG_IGN)
