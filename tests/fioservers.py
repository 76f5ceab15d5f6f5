"""Start several real fio servers for a test, on 127.0.0.2, 127.0.0.3, …
each in its own working directory and on its own port, and stop all of them
(with every process they forked) whatever happens in the test.

    with fio_servers(3, tmp_path) as hosts:      # list[HostAddress]
        workdir = server_dir(tmp_path, hosts[0])  # where its relative files land
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import subprocess
from collections.abc import Iterable, Iterator
from pathlib import Path

from iorig.fio.hosts import HostAddress
from iorig.fio.server import FioServer, port_available

# Ports reserved for these tests; each server takes the first free one.
# A range per pytest-xdist worker (gw0, gw1, …), clear of the fixed ports
# other tests use (187xx): servers of two workers never share a port number,
# which tests match listeners by.
_WORKER = int(os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw") or 0)
PORTS = range(20000 + 100 * _WORKER, 20100 + 100 * _WORKER)


def server_dir(base: Path, host: HostAddress) -> Path:
    """The working directory of the server at ``host`` started by ``fio_servers``."""
    return base / f"server-{host.host}-{host.port}"


def server_log(base: Path, host: HostAddress) -> Path:
    """fio's own output (stdout and stderr) of that server."""
    return base / f"server-{host.host}-{host.port}.log"


def free_address(
    index: int, taken: set[int], *, first_ip: int = 2, ports: range = PORTS
) -> HostAddress:
    """A free port on 127.0.0.{first_ip + index}, none of ``taken``."""
    ip = f"127.0.0.{first_ip + index}"
    for port in ports:
        candidate = HostAddress(ip, port)
        if port not in taken and port_available(candidate) is None:
            return candidate
    raise RuntimeError(f"no free port on {ip} in {ports}")


@contextlib.contextmanager
def fio_servers(count: int, base: Path, *, fio: str | None = None) -> Iterator[list[HostAddress]]:
    """``count`` running fio servers; all stopped on exit, even on failure."""
    fio = fio or shutil.which("fio") or "fio"
    with contextlib.ExitStack() as stack:
        hosts: list[HostAddress] = []
        for index in range(count):
            address = free_address(index, {h.port for h in hosts})
            server = FioServer(
                fio, address, server_dir(base, address), log_path=server_log(base, address)
            )
            stack.callback(server.stop)  # registered first: stopped even if start fails
            server.start()
            hosts.append(address)
        yield hosts


@contextlib.contextmanager
def fio_server(base: Path, *, index: int = 0, fio: str | None = None) -> Iterator[FioServer]:
    """One running fio server (the ``FioServer`` itself, for pid and stop)."""
    fio = fio or shutil.which("fio") or "fio"
    address = free_address(index, set())
    server = FioServer(fio, address, server_dir(base, address), log_path=server_log(base, address))
    try:
        server.start()
        yield server
    finally:
        server.stop()


def tcp_listeners(pids: Iterable[int]) -> list[tuple[str, str]]:
    """What the processes ``pids`` listen on over TCP: (address:port, ss's
    process column) per listening socket."""
    wanted = set(pids)
    done = subprocess.run(["ss", "-Hltnp"], capture_output=True, text=True, check=True)
    found = []
    for line in done.stdout.splitlines():
        fields = line.split()
        who = " ".join(fields[5:])
        if {int(pid) for pid in re.findall(r"pid=(\d+)", who)} & wanted:
            found.append((fields[3], who))
    return found


def paced_scenario(rate_iops: int, duration: str = "6s", iodepth: int = 4) -> str:
    """A scenario file's text: a prefill, then one measured phase
    (``random-read``) of 4 KiB random reads paced at ``rate_iops`` per host.
    Light on the machine, and its expected figure is known: hosts × rate."""
    return f"""\
name: paced-reads
title: paced random reads
targets:
  data: {{size: 16MiB}}
phases:
  - {{name: fill, kind: prefill, workloads: [{{rw: write, bs: 1MiB}}]}}
  - name: random-read
    kind: measure
    duration: {duration}
    workloads: [{{rw: randread, bs: 4k, iodepth: {iodepth}, rate_iops: {rate_iops}}}]
"""


# The band a stop-host's recovery is judged in by the end-to-end tests (the
# availability scenario's own is 15 %). Their paced hosts share a busy
# machine, so the baseline's seconds themselves vary by ±12 % and one second
# at +15.1 % hid a recovery; a host stopped on one of two falls to -50 %.
TOLERANCE_PCT = 25


def stopped_for_s(detail: str) -> float:
    """How long a stop-host held its host, from start-host's detail ("resumed
    after 2.9 s"): the events fire on the driver's clock, so a busy machine
    moves the figure by a tenth of a second or so."""
    found = re.search(r"resumed after ([\d.]+) s", detail)
    assert found is not None, detail
    return float(found[1])
