"""Real authenticated agents for tests: ``iorig agent`` processes (the CLI,
as a user starts it) on 127.0.0.30, 127.0.0.31, … with a token or with
certificates made by ``openssl`` the way docs/guide/hosts.md shows, stopped with
everything they started whatever happens in the test.

    with token_agents(2, tmp_path) as lab:     # lab.hosts: list[TlsHost]
        run_iorig(db, "run", ..., "--hosts", lab.hosts_arg, env=lab.env)
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from tests.conftest import REPO
from tests.fioservers import free_address

from iorig.fio.agentauth import CERT_ENV, TOKEN_ENV
from iorig.fio.hosts import HostAddress, TlsHost
from iorig.fio.server import process_tree

_WORKER = int(os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw") or 0)
PORTS = range(23000 + 100 * _WORKER, 23100 + 100 * _WORKER)
FIRST_IP = 30


@dataclass
class Agent:
    host: TlsHost
    proc: subprocess.Popen[bytes]
    log: Path
    workdir: Path

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def processes(self) -> list[int]:
        """The agent and everything it started (its fio server, fio's jobs)."""
        return process_tree(self.proc.pid) if self.proc.poll() is None else []


@dataclass
class AgentLab:
    agents: list[Agent]
    env: dict[str, str] = field(default_factory=dict)  # the driver's credentials

    @property
    def hosts(self) -> list[TlsHost]:
        return [a.host for a in self.agents]

    @property
    def hosts_arg(self) -> str:
        return ",".join(h.label for h in self.hosts)


def iorig(*args: str, env: dict[str, str] | None = None, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "iorig", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        env={**os.environ, "COLUMNS": "200", "NO_COLOR": "1", **(env or {})},
        **kwargs,
    )


def start_agent(base: Path, address: HostAddress, auth_args: list[str]) -> Agent:
    """``iorig agent`` on ``address``; returns once it serves."""
    workdir = base / f"agent-{address.host}-{address.port}"
    workdir.mkdir(parents=True, exist_ok=True)
    log = workdir.with_suffix(".log")
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "iorig",
                "agent",
                "--bind",
                address.host,
                "--port",
                str(address.port),
                "--dir",
                str(workdir),
                *auth_args,
            ],
            cwd=REPO,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env={**os.environ, "COLUMNS": "300", "NO_COLOR": "1"},
        )
    agent = Agent(TlsHost(address.host, address.port), proc, log, workdir)
    deadline = time.monotonic() + 20
    while "serving on" not in agent.output():
        if proc.poll() is not None or time.monotonic() > deadline:
            stop_agent(agent)
            raise RuntimeError(f"iorig agent did not start:\n{agent.output()}")
        time.sleep(0.05)
    return agent


def stop_agent(agent: Agent) -> None:
    """Ctrl-C, as its user would; then nothing it started may remain."""
    tree = agent.processes()
    if agent.proc.poll() is None:
        agent.proc.send_signal(signal.SIGINT)
        try:
            agent.proc.wait(15)
        except subprocess.TimeoutExpired:
            os.killpg(agent.proc.pid, signal.SIGKILL)
            agent.proc.wait(5)
    for pid in tree:  # a failed stop must not leave fio running for later tests
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)


@contextlib.contextmanager
def agents(base: Path, auth_args: list[list[str]], env: dict[str, str]) -> Iterator[AgentLab]:
    with contextlib.ExitStack() as stack:
        lab = AgentLab([], env)
        for index, args in enumerate(auth_args):
            taken = {a.host.port for a in lab.agents}
            address = free_address(index, taken, first_ip=FIRST_IP, ports=PORTS)
            agent = start_agent(base, address, args)
            stack.callback(stop_agent, agent)
            lab.agents.append(agent)
        yield lab


def make_token(path: Path) -> Path:
    done = iorig("agent", "token", "--out", str(path))
    assert done.returncode == 0, done.stdout + done.stderr
    return path


@contextlib.contextmanager
def token_agents(count: int, base: Path) -> Iterator[AgentLab]:
    """``count`` agents sharing one token, and the driver's env to use it."""
    token = make_token(base / "agent.token")
    with agents(base, [["--token-file", str(token)]] * count, {TOKEN_ENV: str(token)}) as lab:
        yield lab


def _openssl(*args: str) -> None:
    subprocess.run(["openssl", *args], check=True, capture_output=True)


def make_authority(base: Path, name: str = "ca") -> tuple[Path, Path]:
    """A certificate authority, as docs/guide/hosts.md makes one: (cert, key)."""
    cert, key = base / f"{name}.pem", base / f"{name}.key"
    _openssl(
        "req",
        "-x509",
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:P-256",
        "-nodes",
        "-keyout",
        str(key),
        "-out",
        str(cert),
        "-days",
        "2",
        "-subj",
        f"/CN=iorig test {name}",
    )
    return cert, key


def make_certificate(base: Path, ca: tuple[Path, Path], name: str, san: str) -> tuple[Path, Path]:
    """A certificate signed by ``ca`` for ``san`` (``IP:…`` or ``DNS:…``): (cert, key)."""
    cert, key, csr = base / f"{name}.pem", base / f"{name}.key", base / f"{name}.csr"
    ext = base / f"{name}.ext"
    ext.write_text(f"subjectAltName={san}\n")
    _openssl(
        "req",
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:P-256",
        "-nodes",
        "-keyout",
        str(key),
        "-out",
        str(csr),
        "-subj",
        f"/CN={name}",
    )
    _openssl(
        "x509",
        "-req",
        "-in",
        str(csr),
        "-CA",
        str(ca[0]),
        "-CAkey",
        str(ca[1]),
        "-CAcreateserial",
        "-out",
        str(cert),
        "-days",
        "2",
        "-extfile",
        str(ext),
    )
    return cert, key


@contextlib.contextmanager
def certificate_agents(count: int, base: Path) -> Iterator[AgentLab]:
    """``count`` agents with mutual TLS: each with a certificate for its
    address, all trusting one authority that signed the driver's too."""
    ca = make_authority(base)
    driver = make_certificate(base, ca, "driver", "DNS:driver")
    args = []
    for index in range(count):
        ip = f"127.0.0.{FIRST_IP + index}"
        cert, key = make_certificate(base, ca, f"agent{index}", f"IP:{ip}")
        args.append(["--cert", str(cert), "--key", str(key), "--client-ca", str(ca[0])])
    env = dict(zip(CERT_ENV, (str(driver[0]), str(driver[1]), str(ca[0])), strict=True))
    with agents(base, args, env) as lab:
        yield lab
