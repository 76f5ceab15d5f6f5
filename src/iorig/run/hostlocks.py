"""A multi-host run's targets locked by each host's own iorig (its agent,
or its SSH keeper: fio.hostlock), as runs on that host lock theirs
(machine/locks.py): before anything is laid out there, a target another
run uses refuses the run, naming that run and the host."""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence

from iorig.errors import UserError
from iorig.fio.control import AgentLock, ControlError
from iorig.fio.hostlock import LockBusy, LockRefused
from iorig.fio.hosts import HostSpec
from iorig.fio.ssh import SshLock
from iorig.machine import locks
from iorig.targets import Target

HostLock = AgentLock | SshLock


def lock_hosts(
    specs: Sequence[HostSpec],
    host_targets: Mapping[str, Mapping[str, Target]],
    lock_one: Callable[[HostSpec, list[str]], HostLock],
) -> tuple[list[HostLock], list[str]]:
    """Every host's targets locked at once (a thread each: a host that does
    not answer holds up only itself, for a connection's timeout). Returns
    the locks held and, for hosts that cannot lock (a plain fio server, an
    older agent), a note each; a target in use raises ``locks.Busy`` with
    nothing left locked."""
    found: dict[str, HostLock | Exception] = {}

    def one(spec: HostSpec) -> None:
        paths = [str(t.path) for t in host_targets[spec.label].values()]
        try:
            found[spec.label] = lock_one(spec, paths)
        except (LockBusy, LockRefused, ControlError, UserError) as exc:
            found[spec.label] = exc

    threads = [threading.Thread(target=one, args=(s,), daemon=True) for s in specs]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    held = [r for r in found.values() if not isinstance(r, Exception)]
    notes = []
    for spec in specs:
        result = found.get(spec.label)
        if isinstance(result, LockBusy):
            for lock in held:
                lock.release()
            targets = list(host_targets[spec.label].values())
            where = targets[result.index].path if result.index < len(targets) else "a target"
            raise locks.Busy(f"{where} on {spec.label}", result.holder)
        if isinstance(result, Exception):
            why = " ".join(str(result).split())[:200]
            notes.append(f"{spec.label}: its targets are not locked against other runs ({why})")
    return held, notes
