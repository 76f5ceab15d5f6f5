"""Which process owns a ``running`` run, and whether it still exists.

A run row records its owner's pid, the process's start time (field 22 of
``/proc/PID/stat``, clock ticks since boot), the boot id and the owner's PID
namespace: a pid reused by another process, or the same pid after a reboot,
is not the owner. A process in another PID namespace (a container, ``unshare
-p``) cannot see the owner at all, so it cannot judge: such a run counts as
alive there (never reaping a run that may still be going is the safe mistake).
"""

from __future__ import annotations

import os
from pathlib import Path

BOOT_ID = Path("/proc/sys/kernel/random/boot_id")


def boot_id() -> str | None:
    try:
        return BOOT_ID.read_text().strip() or None
    except OSError:
        return None


def pid_namespace(pid: int | str = "self") -> str | None:
    """The PID namespace ``pid`` (default: this process) is in, as the kernel
    names it (``pid:[4026531836]``); None where it cannot be read."""
    try:
        return os.readlink(f"/proc/{pid}/ns/pid")
    except OSError:
        return None


def start_time(pid: int) -> str | None:
    """The live process's start time (clock ticks since boot); None when it
    does not exist or is a zombie."""
    try:
        # the name in parentheses may be any bytes: only the fields after it are read
        stat = Path(f"/proc/{pid}/stat").read_bytes().decode(errors="replace")
        fields = stat.rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    # fields[0] is field 3 (state), so field 22 (starttime) is fields[19]
    return None if len(fields) < 20 or fields[0] in ("Z", "X") else fields[19]


def identity(pid: int) -> tuple[str | None, str | None]:
    """What ``alive`` compares: (start time, boot id) of the process ``pid``."""
    return start_time(pid), boot_id()


def alive(pid: int, started: str | None, boot: str | None, namespace: str | None = None) -> bool:
    """Whether the process that recorded (pid, started, boot) in the PID
    namespace ``namespace`` still runs; True when it was another namespace's,
    which this process cannot see.

    Rows written before the start time was recorded (schema < 4) have none:
    for them the rule of those versions holds, a live process whose command
    line names iorig or python counts as the owner (never reaping a run that
    may still be going is the safe mistake).
    """
    if started is None:
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            return False
        return b"iorig" in cmdline or b"python" in cmdline
    if boot is not None and boot != boot_id():
        return False
    if namespace is not None and namespace != pid_namespace():
        return True
    return start_time(pid) == started
