"""Block-throttle caps a ``throttle`` event set, recorded so that a killed
run's are put back.

Before an event caps a device, a record (``throttle-MAJ-MIN.json`` in this
user's state directory) says what the device had before iorig's first cap
on it (its owner's caps, or none), what the event sets, and which process
set it. It is removed once the caps are put back. A record whose process
is dead is what a killed run left: the next run or ``iorig doctor`` puts the
caps back — each one still at what the event set returns to what was there
before; one that someone changed since is left as found — and says so.
"""

from __future__ import annotations

import contextlib
import os
import time
from pathlib import Path

from iorig.errors import UserError
from iorig.machine import throttle
from iorig.machine.statedir import Stamp, private, read_record, write_record

FILES = ("read_iops", "write_iops", "read_bps", "write_bps")
PREFIX = "throttle-"
SYS_DEV = Path("/sys/dev/block")


def _path(majmin: str) -> Path:
    return private() / f"{PREFIX}{majmin.replace(':', '-')}.json"


def _caps(data: object) -> dict[str, int] | None:
    """Caps as a record holds them; None when they are not caps."""
    if not isinstance(data, dict):
        return None
    out = {}
    for name in FILES:
        value = data.get(name, 0)
        if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value < 2**63:
            return None
        out[name] = value
    return out


def describe(caps: dict[str, int]) -> str:
    return ", ".join(f"{name} {value}" for name, value in caps.items() if value) or "no cap"


def begin(majmin: str, applied: dict[str, int]) -> None:
    """Before a throttle event caps ``majmin`` at ``applied``: record what to
    put back (the caps found before this process's first cap on it). A
    device another live iorig process is throttling is refused."""
    path = _path(majmin)
    data = read_record(path)
    before = None
    if data is not None:
        stamp = Stamp.of(data.get("owner"))
        if stamp is not None and stamp.is_me:
            before = _caps(data.get("before"))
        elif stamp is not None and stamp.alive:
            raise UserError(
                f"device {majmin} is being throttled by another iorig run (pid {stamp.pid})"
            )
        else:
            _put_back(path, data)  # what a killed run left, first
    if before is None:
        before = throttle.rules(majmin)
    write_record(
        path,
        {
            "version": 1,
            "owner": Stamp.mine().as_dict(),
            "device": majmin,
            "before": before,
            "applied": applied,
            "since": time.time(),
        },
    )


def end(majmin: str) -> None:
    """The device's caps are back: its record goes."""
    path = _path(majmin)
    data = read_record(path)
    stamp = Stamp.of(data.get("owner")) if data is not None else None
    if stamp is not None and stamp.is_me:
        path.unlink(missing_ok=True)


def _put_back(path: Path, data: dict) -> str | None:
    """Put back what a dead process's record says; what was done, or None
    when nothing needed doing. The record is removed in every case."""
    try:
        majmin = data.get("device")
        before, applied = _caps(data.get("before")), _caps(data.get("applied"))
        stamp = Stamp.of(data.get("owner"))
        if not isinstance(majmin, str) or before is None or applied is None or stamp is None:
            return f"removed {path}: not a throttle record iorig can read"
        who = f"a killed iorig run (pid {stamp.pid})"
        if not (SYS_DEV / majmin).exists():
            return f"device {majmin}, throttled by {who}, is gone: nothing to restore"
        try:
            current = throttle.rules(majmin)
            back = {n: before[n] for n in FILES if current[n] == applied[n] != before[n]}
            for name, value in back.items():
                throttle.set_rule(name, majmin, value)
        except OSError as exc:
            return f"could not restore the block throttle of device {majmin}: {exc}"
        changed = {n: current[n] for n in FILES if n not in back and current[n] != before[n]}
        if not back:
            return (
                None
                if not changed
                else (
                    f"device {majmin}: its block throttle was changed after {who} set it "
                    f"({describe(changed)}): left as it is"
                )
            )
        said = (
            f"restored the block throttle of device {majmin} that {who} had left capped: "
            f"back to {describe(before)}"
        )
        if changed:
            said += f" (left as found, changed since: {describe(changed)})"
        return said
    finally:
        with contextlib.suppress(OSError):
            os.unlink(path)


def recover() -> list[str]:
    """Put back the caps of every throttle record whose process is dead;
    what was done (a live run's records are left alone)."""
    try:
        directory = private()
    except (UserError, OSError):
        return []
    said = []
    for path in sorted(directory.glob(f"{PREFIX}*.json")):
        data = read_record(path)
        if data is None:
            continue
        stamp = Stamp.of(data.get("owner"))
        if stamp is not None and stamp.alive:
            continue
        if (text := _put_back(path, data)) is not None:
            said.append(text)
    return said
