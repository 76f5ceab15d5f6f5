"""Real OpenSSH servers for a test, on 127.0.0.20, 127.0.0.21, … each on its
own port, with a host key and a client key made for the test, and an ssh
configuration file that trusts exactly them (passed to iorig through
``IORIG_SSH_CONFIG``). Every sshd, and every session it forked, is stopped
when the test ends. The sessions' TMPDIR is the lab's own directory, where
iorig's keepers make theirs: what one leaves (``iorig.*``, fio under it) is
looked for there, so labs on pytest-xdist's workers run side by side (each
worker has its own ports).

    with ssh_hosts(2, tmp_path) as lab:      # lab.hosts: list[SshHost]
        env = lab.env                        # IORIG_SSH_CONFIG=…
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from tests.faults.watch import processes_with

from iorig.fio.hosts import SshHost
from iorig.fio.server import process_tree
from iorig.fio.ssh import CONFIG_ENV

SSHD = shutil.which("sshd") or "/usr/sbin/sshd"
_WORKER = int(os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw") or 0)
PORTS = range(22000 + 100 * _WORKER, 22100 + 100 * _WORKER)


def need_sshd() -> None:
    if not Path(SSHD).exists() or shutil.which("ssh") is None:
        pytest.fail("OpenSSH (openssh-server and -client) is missing: scripts/bootstrap.sh --test")
    if os.geteuid() != 0:
        pytest.skip("the test sshd logs in as root and needs root to start")


@dataclass
class SshLab:
    hosts: list[SshHost]
    config: Path
    base: Path
    sshd: list[subprocess.Popen]
    remote_tmp: Path  # the sessions' TMPDIR, where the hosts' keepers make their directories

    @property
    def env(self) -> dict[str, str]:
        return {**os.environ, CONFIG_ENV: str(self.config)}

    def ssh(self, index: int, command: str, timeout_s: float = 10.0) -> str:
        """Run ``command`` on host ``index`` as the test's own check (a
        connection of its own, not iorig's)."""
        host = self.hosts[index]
        done = subprocess.run(
            ["ssh", "-F", str(self.config), "-p", str(host.port), host.host, command],
            capture_output=True,
            text=True,
            timeout=timeout_s,
            stdin=subprocess.DEVNULL,
        )
        return done.stdout

    def sessions(self, index: int) -> list[int]:
        """The pids of the sessions sshd ``index`` forked (its children), and theirs."""
        pid = self.sshd[index].pid
        return [p for p in process_tree(pid) if p != pid]

    def ssh_clients(self) -> list[int]:
        """The ssh clients here that use this lab's configuration (iorig's)."""
        return processes_with(b"ssh\0", str(self.config).encode())

    def leftovers(self, wait_s: float = 10.0) -> list[str]:
        """What iorig left, waited for up to ``wait_s``: a keeper stops fio
        once sshd ends its input, which a lost connection does at once, but
        beside stress-ng and four other timing tests two fio processes were
        still there 3 s after iorig's end (a clean-up, not a hang: a hang
        is still there after 10 s). Sessions under the test's sshd,
        fio processes in a keeper's directory (orphans too: fio's job
        processes start sessions of their own, their command line names the
        directory), the keepers' directories, and ssh clients here."""
        deadline = time.monotonic() + wait_s
        while True:
            left = [f"sshd {i}: {pid}" for i in range(len(self.hosts)) for pid in self.sessions(i)]
            left += [
                f"fio {pid}" for pid in processes_with(b"fio", f"{self.remote_tmp}/iorig.".encode())
            ]
            left += [str(p) for p in self.remote_tmp.glob("iorig.*")]
            left += [f"ssh {pid}" for pid in self.ssh_clients()]
            if not left or time.monotonic() > deadline:
                return left
            time.sleep(0.1)


def _keygen(path: Path) -> None:
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(path)], check=True)


def _listening(address: str, port: int) -> bool:
    with contextlib.suppress(OSError), socket.create_connection((address, port), timeout=0.2):
        return True
    return False


def _free_port(address: str, taken: set[int]) -> int:
    for port in PORTS:
        if port in taken:
            continue
        with socket.socket() as sock:
            try:
                sock.bind((address, port))
            except OSError:
                continue
        return port
    raise RuntimeError(f"no free port for sshd on {address} in {PORTS}")


@contextlib.contextmanager
def ssh_hosts(count: int, base: Path, *, first: int = 20) -> Iterator[SshLab]:
    """``count`` running sshd on 127.0.0.<first>, … that accept the test's key as root."""
    need_sshd()
    yield from _lab(count, base, first)


def _lab(count: int, base: Path, first: int) -> Iterator[SshLab]:
    base = base / "sshlab"
    base.mkdir(mode=0o700)
    _keygen(base / "host_key")
    _keygen(base / "id")
    (base / "authorized_keys").write_text((base / "id.pub").read_text())
    # short: a keeper's fio socket goes under it, and a socket's path has
    # room for 107 bytes (the test's own directory is longer)
    remote_tmp = Path(tempfile.mkdtemp(prefix="iorig-lab-", dir="/tmp"))
    Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)  # sshd's privilege separation
    hosts, procs, known = [], [], []
    # the test's own directory of target locks (conftest.machine_state), on the hosts too
    chosen = os.environ.get("IORIG_STATE_DIR")
    state = f" IORIG_STATE_DIR={chosen}" if chosen else ""
    host_pub = (base / "host_key.pub").read_text().split()
    try:
        for i in range(count):
            address = f"127.0.0.{first + i}"
            port = _free_port(address, {h.port for h in hosts if h.port})
            config = base / f"sshd-{i}.conf"
            config.write_text(
                f"ListenAddress {address}:{port}\n"
                f"HostKey {base / 'host_key'}\n"
                f"AuthorizedKeysFile {base / 'authorized_keys'}\n"
                f"PidFile {base / f'sshd-{i}.pid'}\n"
                "UsePAM no\nStrictModes no\nPasswordAuthentication no\n"
                "KbdInteractiveAuthentication no\nPermitRootLogin prohibit-password\n"
                "AllowTcpForwarding yes\nAllowStreamLocalForwarding yes\n"
                "MaxSessions 64\nMaxStartups 100\nLogLevel ERROR\n"
                f"SetEnv TMPDIR={remote_tmp}{state}\n"
            )
            procs.append(
                subprocess.Popen(
                    [SSHD, "-D", "-e", "-f", str(config)],
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL,
                    stderr=open(base / f"sshd-{i}.log", "wb"),  # noqa: SIM115
                    start_new_session=True,
                )
            )
            hosts.append(SshHost(address, None, port))
            known.append(f"[{address}]:{port} {host_pub[0]} {host_pub[1]}")
        (base / "known_hosts").write_text("\n".join(known) + "\n")
        config = base / "ssh_config"
        config.write_text(
            "Host *\n"
            f"  IdentityFile {base / 'id'}\n  IdentitiesOnly yes\n  User root\n"
            f"  UserKnownHostsFile {base / 'known_hosts'}\n  StrictHostKeyChecking yes\n"
            "  GlobalKnownHostsFile /dev/null\n  LogLevel ERROR\n"
        )
        deadline = time.monotonic() + 10
        for host, proc in zip(hosts, procs, strict=True):
            while not _listening(host.host, host.port or 22):
                if proc.poll() is not None or time.monotonic() > deadline:
                    log = (base / f"sshd-{procs.index(proc)}.log").read_text()
                    raise RuntimeError(f"sshd on {host.label} did not start: {log[-500:]}")
                time.sleep(0.02)
        yield SshLab(hosts, config, base, procs, remote_tmp)
    finally:
        for proc in procs:
            pids = [p for p in process_tree(proc.pid) if p != proc.pid]
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
            for pid in pids:  # sessions run in process groups of their own
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(5)
        shutil.rmtree(remote_tmp, ignore_errors=True)
