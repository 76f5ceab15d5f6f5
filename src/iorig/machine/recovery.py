"""Putting back what dead runs left changed on this machine, at the start of
every run command and in ``iorig doctor``."""

from __future__ import annotations

from iorig.machine import leftovers, locks, throttles


def recover(*, clean: bool = True) -> list[str]:
    """Every block-throttle cap a killed run left, put back (always: a cap
    left in place distorts every later measurement); what dead runs left in
    TMPDIR and in their targets removed (``clean``) or only listed. One line
    per thing done or found; a live run's are never touched."""
    said = throttles.recover() + leftovers.clean(remove=clean)
    if clean:
        locks.sweep()  # a killed run's lock files: nothing to say about them
    return said
