"""Hosts reached over SSH (``--hosts ssh://[user@]host[:port]``).

One OpenSSH connection per host, with the user's own configuration, keys
and agent (``BatchMode``: a host that would ask for a password fails at
once, naming the host). The connection is the control master for
everything iorig does there:

* its session runs the keeper (fio/sshkeeper.py, sent through the session's
  input to the host's ``python3``): a private directory, ``fio --server`` on
  a Unix socket inside it, and the stop/resume requests of the
  ``stop-host``/``start-host`` events, one line each way;
* a forwarding (``ssh -O forward``) from a Unix socket in iorig's private
  directory on this machine to that socket is where iorig's fio client
  connects;
* ``ssh -O`` and commands for ``iorig hosts check`` share the connection.

Nothing on the host listens on a network address. When the session ends —
iorig closes it, exits or dies, or the connection is lost — the keeper
kills the fio server and every process it forked and removes its directory. See
docs/guide/hosts.md for the threat model.
"""

from __future__ import annotations

import contextlib
import os
import queue
import re
import shlex
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

from iorig.errors import UserError
from iorig.fio import hostlock
from iorig.fio.control import ControlError, jobs_started, read_io
from iorig.fio.hostio import HostIo
from iorig.fio.hosts import SocketEndpoint, SshHost
from iorig.fio.process import stop_group
from iorig.fio.sockdir import socket_dir

KEEPER = Path(__file__).with_name("sshkeeper.py")
MAGIC = "IORIG-SSH 1"
# read the keeper from the session's input: no script text on a command line
# the remote shell would interpret, and the same channel carries requests after
BOOTSTRAP = 'python3 -c "import sys;exec(sys.stdin.read(int(sys.stdin.readline())))"'
CONNECT_S = 10.0  # connect, authenticate, start the keeper and its fio server
ANSWER_S = 5.0
PING_S = 5.0  # the keeper gives up on a session silent for 30 s
CLOSE_S = 4.0  # the keeper stops fio within ~2 s of its input ending
KILL_STEPS = ((signal.SIGTERM, 1.0), (signal.SIGKILL, 1.0))  # an ssh that did not end
_REMOTE_DIR = re.compile(r"^/[A-Za-z0-9_.][A-Za-z0-9_./-]{0,90}$")
CONFIG_ENV = "IORIG_SSH_CONFIG"  # ssh -F: a configuration file instead of ~/.ssh/config


def ssh_command(host: SshHost, control_path: Path, *options: str) -> list[str]:
    """``ssh`` with iorig's fixed options for ``host``, ending with ``--
    HOST``: nothing from the host list can be read as an option."""
    args = [
        "ssh",
        "-o",
        "BatchMode=yes",
        "-o",
        f"ConnectTimeout={CONNECT_S:g}",
        "-o",
        "ServerAliveInterval=5",
        "-o",
        "ServerAliveCountMax=3",
        "-o",
        "ForwardAgent=no",  # a host under test gets no way into the user's keys
        "-o",
        "ForwardX11=no",
        "-o",
        f"ControlPath={control_path}",
    ]
    if config := os.environ.get(CONFIG_ENV):
        args += ["-F", config]
    if host.port is not None:
        args += ["-p", str(host.port)]
    if host.user is not None:
        args += ["-l", host.user]
    return [*args, *options, "--", host.host]


class SshConnection:
    """One host's SSH connection, keeper and forwarded fio server."""

    def __init__(self, host: SshHost, workdir: Path) -> None:
        self.host = host
        self.control_path = workdir / "cm"
        self._workdir = workdir
        self._proc: subprocess.Popen[bytes] | None = None
        self._errors = workdir / "ssh.err"
        self._answers: queue.Queue[str | None] = queue.Queue()
        self._lock = threading.Lock()
        self._closed = threading.Event()
        self.endpoint: SocketEndpoint | None = None
        self.remote_dir = ""

    @property
    def label(self) -> str:
        return self.host.label

    # ------------------------------------------------------------ open

    def open(self) -> None:
        """Connect, start the keeper and forward a local port to its fio
        server; UserError naming the host and why when any step fails."""
        command = ssh_command(
            self.host,
            self.control_path,
            "-o",
            "ControlMaster=yes",
            "-o",
            "ControlPersist=no",
            "-o",
            "ClearAllForwardings=yes",
            "-o",
            "ExitOnForwardFailure=yes",
            "-T",
        )
        with open(self._errors, "wb") as errors:
            self._proc = subprocess.Popen(
                [*command, BOOTSTRAP],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=errors,
                start_new_session=True,  # Ctrl-C is iorig's to handle
            )
        assert self._proc.stdin is not None
        script = KEEPER.read_text(encoding="utf-8")
        try:
            self._proc.stdin.write(f"{len(script)}\n{script}".encode())
            self._proc.stdin.flush()
        except OSError:
            pass  # ssh already ended: its error output says why
        threading.Thread(target=self._read, daemon=True).start()
        deadline = time.monotonic() + CONNECT_S + 5.0
        hello = self._next(CONNECT_S + 5.0)
        while hello is not None and not hello.startswith(MAGIC):  # a login script's chatter
            hello = self._next(max(0.0, deadline - time.monotonic()))
        if hello is None:
            raise self._failure(hello)
        words = hello.removeprefix(MAGIC).split()
        if words[:1] == ["ERROR"]:
            raise UserError(
                f"{self.label}: {hello.removeprefix(MAGIC).strip()[6:]}",
                hint="install fio (and python3) on the host",
            )
        # the directory reaches ssh's -L: a plain absolute path or nothing
        if words[:1] != ["READY"] or len(words) != 2 or not _REMOTE_DIR.match(words[1]):
            raise UserError(f"{self.label}: unexpected answer from iorig's keeper: {hello:.100}")
        self.remote_dir = words[1]
        self.endpoint = self._forward()
        threading.Thread(target=self._ping, daemon=True).start()

    def _read(self) -> None:
        assert self._proc is not None and self._proc.stdout is not None
        for raw in self._proc.stdout:
            self._answers.put(raw.decode("utf-8", "replace").strip())
        self._answers.put(None)

    def _next(self, timeout_s: float) -> str | None:
        try:
            return self._answers.get(timeout=timeout_s)
        except queue.Empty:
            return None

    def _failure(self, hello: str | None) -> UserError:
        """Why the connection or the keeper did not start, in ssh's words."""
        if self._proc is not None and self._proc.poll() is None:
            self._kill()
        text = self._errors.read_text(errors="replace") if self._errors.exists() else ""
        lines = [ln for ln in text.splitlines() if ln.strip() and "Warning:" not in ln]
        why = " ".join(lines)[-300:] or (hello or "no answer")
        hint = "check that `ssh -o BatchMode=yes HOST` logs in without a password"
        if "python3" in why and ("not found" in why or "No such file" in why):
            hint = "install python3 on the host (iorig runs a small keeper there)"
        return UserError(f"cannot reach {self.label} over SSH: {why}", hint=hint)

    def _forward(self) -> SocketEndpoint:
        """A Unix socket here, in iorig's private directory, forwarded to
        the keeper's fio socket: no other user of this machine can reach it
        (a port on 127.0.0.1 would let any of them run jobs on the host)."""
        local = self._workdir / "fio.sock"
        spec = f"{local}:{self.remote_dir}/fio.sock"
        try:
            done = subprocess.run(
                ssh_command(
                    self.host,
                    self.control_path,
                    "-o",
                    "ControlMaster=no",
                    "-O",
                    "forward",
                    "-L",
                    spec,
                ),
                stdin=subprocess.DEVNULL,
                capture_output=True,
                timeout=ANSWER_S,
            )
            problem = done.stderr.decode(errors="replace").strip()[-200:]
            if done.returncode == 0:
                return SocketEndpoint(str(local))
        except subprocess.TimeoutExpired:
            problem = "ssh -O forward did not answer"
        self.close()
        raise UserError(f"{self.label}: could not forward a socket to its fio server: {problem}")

    # ------------------------------------------------------------ requests

    def request(self, line: str) -> str:
        """One request to the keeper and its answer (after ``OK``)."""
        answer = self.exchange(line)
        if not answer.startswith("OK"):
            raise ControlError(f"{self.label} refused {line.split()[0]}: {answer:.100}")
        return answer.removeprefix("OK").strip()

    def exchange(self, line: str) -> str:
        """One request to the keeper and its whole answer, whatever it is."""
        with self._lock:
            proc = self._proc
            if proc is None or proc.stdin is None or self._closed.is_set():
                raise ControlError(f"the SSH connection to {self.label} is closed")
            try:
                proc.stdin.write(f"{line}\n".encode())
                proc.stdin.flush()
            except OSError:
                raise ControlError(f"the SSH connection to {self.label} is lost") from None
            answer = self._next(ANSWER_S)
        if answer is None:
            raise ControlError(f"{self.label} did not answer {line.split()[0]} over SSH")
        return answer

    def lock(self, paths: Sequence[str]) -> SshLock:
        """Have the keeper lock the targets at ``paths`` (relative to its fio
        server's directory, or absolute) until the session ends or the lock
        is released; LockBusy, LockRefused (the keeper could not lock)."""
        hostlock.read_answer(self.exchange(hostlock.lock_request(paths)))
        return SshLock(self)

    def run(self, argv: Sequence[str], timeout_s: float = ANSWER_S) -> str | None:
        """``argv`` on the host over the open connection (each word quoted
        for the remote shell: the one way a value reaches it); its output,
        None when it failed or took longer than ``timeout_s``."""
        command = ssh_command(self.host, self.control_path, "-o", "ControlMaster=no", "-T")
        try:
            done = subprocess.run(
                [*command, " ".join(shlex.quote(word) for word in argv)],
                stdin=subprocess.DEVNULL,
                capture_output=True,
                timeout=timeout_s,
            )
        except subprocess.TimeoutExpired:
            return None
        return done.stdout.decode(errors="replace") if done.returncode == 0 else None

    def _ping(self) -> None:
        while not self._closed.wait(PING_S):
            with contextlib.suppress(ControlError):
                self.request("PING")

    # ------------------------------------------------------------ close

    def close(self, *, keep_files: bool = False) -> str | None:
        """End the session: the keeper stops fio and removes its directory
        (kept, without the socket, with ``keep_files``: returned). Bounded
        to a few seconds, whatever the host does."""
        kept = None
        if keep_files and not self._closed.is_set():
            with contextlib.suppress(ControlError):
                self.request("KEEP")
                kept = self.remote_dir
        self._closed.set()
        proc = self._proc
        if proc is None:
            return kept
        with self._lock, contextlib.suppress(OSError):
            if proc.stdin is not None:
                proc.stdin.close()  # the keeper's input ends: it cleans up
        try:
            proc.wait(CLOSE_S)
        except subprocess.TimeoutExpired:
            self._kill()
        return kept

    def _kill(self) -> None:
        if self._proc is not None:
            stop_group(self._proc, KILL_STEPS)


class SshLock:
    """Targets a host's keeper holds locked for this run."""

    def __init__(self, connection: SshConnection) -> None:
        self.connection = connection
        self.where = connection.label

    def name_run(self, run_id: str) -> None:
        self.connection.request(f"RUN {run_id}")

    def release(self) -> None:
        with contextlib.suppress(ControlError):  # a session that ended freed them already
            self.connection.request("UNLOCK")


class SshControl:
    """``stop-host``/``start-host`` for a host reached over SSH: the keeper
    freezes its fio server and all it forked (SIGSTOP) until resumed, the
    session ends or ``max_s`` passes — a host is never left frozen."""

    def __init__(self, connection: SshConnection) -> None:
        self.connection = connection
        self.stopped = False

    @property
    def where(self) -> str:
        return self.connection.label

    def ping(self) -> None:
        self.connection.request("PING")

    def jobs_started(self) -> float | None:
        """When (on this machine's clock) the host's newest fio job started."""
        return jobs_started(lambda: self.connection.request("JOBS"), self.where)

    def io(self) -> HostIo:
        """What the host's fio processes read and wrote so far (fio.hostio)."""
        return read_io(self.connection.request("IO"), self.where)

    def stop(self, max_s: float) -> str:
        answer = self.connection.request(f"STOP {max_s:.1f}")
        self.stopped = True
        return answer

    def resume(self) -> str:
        if not self.stopped:
            return "not stopped"
        self.stopped = False
        return self.connection.request("CONT")


def _each(work: Callable[[SshConnection], None], connections: Iterable[SshConnection]) -> None:
    """``work`` on every connection at once (a thread each), until all are done."""
    threads = [threading.Thread(target=work, args=(c,), daemon=True) for c in connections]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


def connect_each(
    hosts: Sequence[SshHost],
) -> tuple[Path, dict[str, SshConnection], dict[str, UserError]]:
    """Open every host's connection at once. Returns the private directory
    of the control sockets (for ``close_all``), the connections that opened
    and, by label, why the others did not."""
    # ssh makes its control socket as ``cm.<16 random characters>`` first
    workdir = socket_dir("iorig-ssh-", f"h{len(hosts)}/cm.{'x' * 16}")
    connections = {}
    for i, host in enumerate(hosts):
        (workdir / f"h{i}").mkdir(mode=0o700)
        connections[host.label] = SshConnection(host, workdir / f"h{i}")
    failures: dict[str, UserError] = {}

    def open_one(connection: SshConnection) -> None:
        try:
            connection.open()
        except UserError as exc:
            failures[connection.label] = exc

    _each(open_one, connections.values())
    for label in failures:
        connections.pop(label).close()
    return workdir, connections, failures


def connect_all(hosts: Sequence[SshHost]) -> tuple[Path, dict[str, SshConnection]]:
    """Open every host's connection at once; all or none (an error names
    every host that failed). Returns the private directory of the control
    sockets (for ``close_all``) and the connections by label."""
    workdir, connections, failures = connect_each(hosts)
    if failures:
        close_all(workdir, connections)
        hints = list(dict.fromkeys(e.hint for e in failures.values() if e.hint))
        if len(failures) == 1:
            raise next(iter(failures.values()))
        raise UserError(
            "these hosts could not be reached over SSH:\n"
            + "\n".join(f"  - {e.message}" for e in failures.values()),
            hint="; ".join(hints) or None,
        )
    return workdir, connections


def close_all(
    workdir: Path, connections: dict[str, SshConnection], *, keep_files: bool = False
) -> dict[str, str]:
    """Close every connection at once (bounded); the directories kept on
    each host with ``keep_files`` (label -> path)."""
    kept: dict[str, str] = {}

    def close_one(connection: SshConnection) -> None:
        if (path := connection.close(keep_files=keep_files)) is not None:
            kept[connection.label] = path

    _each(close_one, connections.values())
    shutil.rmtree(workdir, ignore_errors=True)  # control sockets, ssh's error output
    return kept
