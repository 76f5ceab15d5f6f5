"""Running plans: the backend interface, this machine and fio servers as
backends, the one collection step, and the session that drives a run."""

from __future__ import annotations

from collections.abc import Sequence

from iorig.fio import runner
from iorig.fio.hosts import HostSpec
from iorig.run.backend import PhaseBackend
from iorig.run.local import LocalBackend
from iorig.run.servers import ServerBackend


def make_backend(hosts: Sequence[HostSpec], fio_path: str | None = None) -> PhaseBackend:
    """This machine, or the hosts of ``--hosts``; fio found and checked."""
    fio = runner.find_fio(fio_path)
    version = runner.fio_version(fio)
    if hosts:
        return ServerBackend(fio, version, hosts)
    return LocalBackend(fio, version)
