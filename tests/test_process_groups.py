"""What counts as a process group still running: its live members, not the
zombies another parent has yet to reap. In a container whose init reaps
slowly (here pid 1 took 1.2 s, longer beside a load), a fio worker killed
with its group stayed a zombie in it, and iorig's stop waited for it:
Ctrl-C during a hung probe took 2.9 s here, 6.2 s in a stressed soak."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from tests.waiting import wait_until

from iorig.fio.process import group_alive

pytestmark = pytest.mark.system

# a parent that forks a child into a group of its own and never reaps it
UNREAPED = """
import os, time
pid = os.fork()
if pid == 0:
    os.setpgid(0, 0)
    time.sleep(0.2)
    os._exit(0)
os.setpgid(pid, pid)  # as the child does: whichever runs first
print(pid, flush=True)
time.sleep(60)
"""


def _state(pid: int) -> str:
    stat = Path(f"/proc/{pid}/stat").read_text()
    return stat[stat.rindex(")") + 2]


def test_a_group_of_zombies_another_parent_holds_is_not_running():
    parent = subprocess.Popen([sys.executable, "-c", UNREAPED], stdout=subprocess.PIPE, text=True)
    try:
        assert parent.stdout is not None
        child = int(parent.stdout.readline())
        assert group_alive(child)  # asleep in its group: running
        wait_until(lambda: _state(child) == "Z", 10, f"{child} a zombie")
        assert not group_alive(child)
    finally:
        parent.kill()
        parent.wait()
    assert not group_alive(child)
