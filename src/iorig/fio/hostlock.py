"""Locks on a remote host's targets, taken by iorig on that host: an
agent's control channel (``iorig agent``: fio.control), or the keeper of a
host reached over SSH (fio/sshkeeper.py, which speaks the same lines).

    LOCK <paths>   -> OK locked N
                   -> BUSY <i> <holder>   (target i is locked by another run)
                   -> ERR <why>
    RUN <id>       -> OK                  (the run's id, written into its locks)

``paths`` is the base64url of a JSON list of the targets' paths as the
host's fio server sees them (relative to its working directory, or
absolute); ``holder`` the base64url of JSON as the lock file holds it
(``runs``, ``owner.pid``, ``since``): untrusted, checked where it is shown.
The host holds the locks while the channel stays open: an agent's control
connection, the keeper's session; both end when the driver ends, however.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Sequence

MAX_PATHS = 64
MAX_PATH = 4096
LINE_MAX = 4 * (MAX_PATHS * (MAX_PATH + 8)) // 3 + 64  # a LOCK line, base64 and all


class LockBusy(Exception):
    """Target ``index`` is locked by another run; ``holder``: what its lock says."""

    def __init__(self, index: int, holder: dict) -> None:
        super().__init__(f"target {index} is in use")
        self.index = index
        self.holder = holder


class LockRefused(Exception):
    """The host could not lock (its reason), or does not know how."""


def _encode(data: object) -> str:
    return base64.urlsafe_b64encode(json.dumps(data).encode()).decode("ascii")


def _decode(word: str) -> object:
    try:
        return json.loads(base64.urlsafe_b64decode(word.encode("ascii")))
    except (ValueError, binascii.Error, UnicodeError) as exc:
        raise ValueError(f"not base64 of JSON: {exc}") from None


def lock_request(paths: Sequence[str]) -> str:
    return f"LOCK {_encode(list(paths))}"


def request_paths(word: str) -> list[str]:
    """The paths of a LOCK request; ValueError for anything else."""
    paths = _decode(word)
    if not isinstance(paths, list) or not 0 < len(paths) <= MAX_PATHS:
        raise ValueError(f"a LOCK names 1 to {MAX_PATHS} paths")
    for path in paths:
        if not isinstance(path, str) or not 0 < len(path) <= MAX_PATH or "\0" in path:
            raise ValueError("a path is text of 1 to 4096 characters without NUL")
    return paths


def busy_answer(index: int, holder: dict) -> str:
    return f"BUSY {index:d} {_encode(holder)}"


def read_answer(answer: str) -> None:
    """Nothing for ``OK``; LockBusy or LockRefused for the others."""
    word, _, rest = answer.partition(" ")
    if word == "OK":
        return
    if word == "BUSY":
        index, _, holder = rest.partition(" ")
        try:
            data = _decode(holder)
            if index.isdigit() and isinstance(data, dict):
                raise LockBusy(int(index), data)
        except ValueError:
            pass
        raise LockRefused(f"an unreadable answer: {answer[:80]!r}")
    raise LockRefused(rest.strip()[:200] or answer[:80] or "no answer")
