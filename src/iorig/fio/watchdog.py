"""What outlives a killed agent: its fio server's jobs, stopped here.

``iorig agent`` runs fio's server, whose job processes lead sessions of
their own. When the agent is killed outright (``kill -9``, the OOM killer)
nothing of it runs to stop them: the server gets SIGTERM by the parent-death
signal and ends, and its jobs go on doing I/O until their runtime ends. So
the agent starts this watchdog, a process of its own session without a
parent-death signal, which records the server's processes every
``WATCH_EVERY_S`` and, once the agent is gone, SIGKILLs every one still
alive (by pid and start time: a reused pid is not theirs), then ends. An
agent that stops its server kills the watchdog first.

    python -m iorig.fio.watchdog AGENT_PID SERVER_PID
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import sys
import time

from iorig.fio.process import Workers, start_time
from iorig.fio.server import process_tree

WATCH_EVERY_S = 0.25
KILL_FOR_S = 5.0


def guard(agent: int, server: int) -> None:
    """Until ``agent`` ends: record ``server``'s processes; then kill them."""
    server_started = start_time(server)
    try:
        agent_ended = os.pidfd_open(agent)
    except ProcessLookupError:
        agent_ended = None  # already gone
    workers = Workers()
    if server_started is not None:
        workers.known[server] = server_started
    while agent_ended is not None:
        # the server may end first (its parent-death signal): what was
        # recorded of it is killed all the same
        if start_time(server) == server_started:
            workers.record(server)
        if select.select([agent_ended], [], [], WATCH_EVERY_S)[0]:
            break
    deadline = time.monotonic() + KILL_FOR_S
    while time.monotonic() < deadline:
        if start_time(server) == server_started:
            workers.record(server, now=True)
            for pid in process_tree(server):  # its session's connection processes too
                if (started := start_time(pid)) is not None:
                    workers.known.setdefault(pid, started)
        left = workers.alive()
        if not left:
            return
        for pid in left:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.02)


def main(argv: list[str]) -> int:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the agent's Ctrl-C is the agent's
    agent, server = (int(a) for a in argv)
    guard(agent, server)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
