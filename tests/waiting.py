"""Waiting for what a test needs to have happened, not for a fixed time.

A sleep that stands for "by now the run is measuring" acts too early on a
loaded machine (an ``iorig`` process takes about 1.3 s of CPU to start) and
wastes time on a fast one. These wait for the thing itself, with a
deadline, and say what did not happen, with what the process printed:

    wait_until(lambda: not server.running, 10, "the server ended")
    wait_for_phase(db, "random-read", io_seconds=1, timeout_s=60, proc=proc)

A sleep that is a duration on purpose (a phase let run a while, a lock held
past a wait) stays, counted from the event and saying so.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sqlite3
import subprocess
import time
from collections.abc import Callable, Collection
from pathlib import Path
from typing import TypeVar

from iorig.model.live import LivePhase
from iorig.store.live import LiveStore, LiveUnwritable

T = TypeVar("T")
POLL_S = 0.05


def printed(proc: subprocess.Popen) -> str:
    """What ``proc`` printed on pipes: all of it once it has ended. A
    process still running is ended first, its test failing: Ctrl-C (a run
    stops its fio and says where it was), then SIGKILL, to its process group
    when it leads one. Files it wrote to are the caller's to show (``detail``)."""
    out, err = None, None
    for sig in (signal.SIGINT, signal.SIGKILL):
        with contextlib.suppress(ProcessLookupError):
            if proc.poll() is None and os.getpgid(proc.pid) == proc.pid:
                os.killpg(proc.pid, sig)
            elif proc.poll() is None:
                proc.send_signal(sig)
        try:
            out, err = proc.communicate(timeout=15)
            break
        except ValueError:  # read already
            break
        except subprocess.TimeoutExpired:
            continue
    parts = [p.decode(errors="replace") if isinstance(p, bytes) else p for p in (out, err)]
    text = "\n".join(p for p in parts if p)
    return f"(exit {proc.returncode})\n{text[-3000:]}"


def wait_until(
    predicate: Callable[[], T],
    timeout_s: float,
    what: str,
    *,
    detail: Callable[[], object] | None = None,
    proc: subprocess.Popen | None = None,
    every_s: float = POLL_S,
) -> T:
    """``predicate()``'s first true value, asked every ``every_s``; an
    AssertionError saying ``what`` did not happen within ``timeout_s``
    (with ``detail()``, and what ``proc`` printed), or at once when
    ``proc`` ended before it happened."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = predicate()
        if value:
            return value
        ended = proc is not None and proc.poll() is not None
        if ended or time.monotonic() > deadline:
            why = "the process ended first" if ended else f"not within {timeout_s:g} s"
            lines = [f"{what}: {why}"]
            if detail is not None:
                lines.append(f"seen: {detail()}")
            if proc is not None:
                lines.append(f"the process printed {printed(proc)}")
            raise AssertionError("\n".join(lines))
        time.sleep(every_s)


def _live(db: Path) -> LiveStore | None:
    """The live file beside ``db``, read-only (a test's write there could
    hold up a run's)."""
    try:
        return LiveStore.reading(db)
    except LiveUnwritable:
        return None


def live_phases(db: Path) -> dict[str, LivePhase]:
    """Each running run's place in the live file beside ``db`` (run id ->
    LivePhase); empty while there is none (or the file is being made)."""
    store = _live(db)
    if store is None:
        return {}
    with contextlib.suppress(sqlite3.Error), contextlib.closing(store.conn):
        return {run: phase for run in store.runs() if (phase := store.phase(run)) is not None}
    return {}


def seconds_moving(db: Path, run_id: str, phase: LivePhase) -> dict[str, int]:
    """Each host's (as results label it) live seconds of ``phase`` in which
    it moved bytes."""
    store = _live(db)
    if store is None:
        return {}
    counts: dict[str, int] = {}
    with contextlib.suppress(sqlite3.Error), contextlib.closing(store.conn):
        for _, second in store.seconds_after(run_id):
            if second.phase_index == phase.phase_index and second.bytes_per_s > 0:
                counts[second.host] = counts.get(second.host, 0) + 1
    return counts


def wait_for_phase(
    db: Path,
    phase: str,
    *,
    timeout_s: float,
    proc: subprocess.Popen | None = None,
    io_seconds: int = 0,
    hosts: Collection[str] = (),
    detail: Callable[[], object] | None = None,
) -> LivePhase:
    """The live place of the run writing ``db`` once it is in ``phase`` (by
    name) and, with ``io_seconds``, once fio has moved bytes in that many of
    its live seconds (on each of ``hosts``, when named; 1: it is doing I/O,
    2: a whole second of it). How long a phase has run is counted so, not
    by its ``elapsed_s``: on fio servers that counts from the clients'
    launch, a second or more before their jobs' I/O on a busy machine.
    Fails saying where the run was instead, and at once if ``proc`` ends
    first."""
    seen: list[object] = ["no live file yet"]

    def there() -> LivePhase | None:
        places = live_phases(db)
        if places:
            seen[0] = {
                run: f"phase {p.phase!r} (#{p.index}) at {p.elapsed_s:g} s"
                for run, p in places.items()
            }
        for run, place in places.items():
            if place.phase != phase:
                continue
            if not io_seconds:
                return place
            counts = seconds_moving(db, run, place)
            seen[0] = f"{seen[0]}; seconds with bytes moved, by host: {counts}"
            enough = {h for h, n in counts.items() if n >= io_seconds}
            if enough and set(hosts) <= enough:
                return place
        return None

    def where() -> str:
        more = f"; {detail()}" if detail is not None else ""
        return f"{seen[0]}{more}"

    wanted = f"phase {phase!r}"
    if io_seconds:
        on = f" on {', '.join(sorted(hosts))}" if hosts else ""
        wanted += f" moving bytes{on} in {io_seconds} of its live seconds"
    return wait_until(there, timeout_s, f"the run in {db} in {wanted}", detail=where, proc=proc)
