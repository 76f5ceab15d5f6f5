"""Private directories for Unix sockets on this machine (SSH forwards,
agent relays, an agent's fio server).

A socket's whole path must fit the kernel's ``sun_path``: 107 bytes and a
NUL. A long ``$TMPDIR`` (a deep CI workspace, a test's ``tmp_path``) made
``bind`` fail with a traceback; so the first of ``$TMPDIR``, /tmp and
/var/tmp where the longest socket path fits is used. The keeper iorig runs
on SSH hosts (``sshkeeper.py``, a standalone script) applies the same rule
to its own socket.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from iorig.errors import UserError

SOCKET_PATH_MAX = 107  # bytes a Unix socket's path may hold (sun_path, less its NUL)
_RANDOM = 8  # the random part of mkdtemp's names
FALLBACKS = ("/tmp", "/var/tmp")


def fits(base: str, prefix: str, longest: str) -> bool:
    """Whether ``base/<prefix><random>/<longest>`` fits a socket's path."""
    length = len(os.fsencode(base)) + 1 + len(prefix) + _RANDOM + 1 + len(os.fsencode(longest))
    return length <= SOCKET_PATH_MAX


def socket_dir(prefix: str, longest: str) -> Path:
    """A new directory (mode 0700: only this user can reach what listens in
    it) for sockets whose paths inside it are at most ``longest``."""
    preferred = tempfile.gettempdir()
    for base in dict.fromkeys((preferred, *FALLBACKS)):
        if fits(base, prefix, longest) and os.access(base, os.W_OK | os.X_OK):
            return Path(tempfile.mkdtemp(prefix=prefix, dir=base))
    raise UserError(
        f"no directory for iorig's sockets: {preferred} and {', '.join(FALLBACKS)} are "
        f"too long for a socket's path ({SOCKET_PATH_MAX} bytes) or not writable",
        hint="set TMPDIR to a short directory you can write, such as /tmp",
    )
