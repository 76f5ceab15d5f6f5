"""A managed ``fio --server`` process (what ``iorig agent`` runs).

A fio server shares its port with any later fio server (SO_REUSEPORT), exits
0 even when it cannot bind, and its job processes run in their own sessions;
``FioServer`` checks the port first and stops the whole process tree.
"""

from __future__ import annotations

import contextlib
import errno
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

from iorig.errors import UserError
from iorig.fio.control import ControlServer, no_control_port
from iorig.fio.hosts import Endpoint, HostAddress, SocketEndpoint, is_any_address, is_loopback
from iorig.fio.process import Workers, children_map, proc_table, spawn


def process_tree(pid: int, *, include_root: bool = True) -> list[int]:
    """``pid``, the processes of its session and all their descendants.

    A fio server started in its own session keeps its connection processes
    in that session even after the listener died; their job processes call
    setsid, so they are found as descendants. Pass ``include_root=False``
    when ``pid`` itself has exited (its number may belong to someone else).
    """
    if not os.path.isdir("/proc"):
        return [pid] if include_root else []
    table = proc_table()
    children = children_map(table)
    tree: dict[int, None] = {}  # ordered set
    todo = [p for p, (_, sid) in table.items() if sid == pid and p != pid]
    if include_root:
        todo.append(pid)
    while todo:
        current = todo.pop()
        if current not in tree:
            tree[current] = None
            todo += children.get(current, [])
    return list(tree)


def jobs_age_s(server_pid: int) -> float | None:
    """Seconds since the newest of the server's job processes started (fio
    forks them when its jobs begin, each leading a session of its own), or
    None while it runs no job. Ages, not clock times: the driver subtracts
    them from its own clock, whatever this host's says."""
    if not os.path.isdir("/proc"):
        return None
    starts = []
    for pid in process_tree(server_pid):
        try:
            with open(f"/proc/{pid}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue
        fields = stat[stat.rindex(b")") + 2 :].split()  # field 3 (state) is fields[0]
        if pid != server_pid and int(fields[3]) == pid:
            starts.append(int(fields[19]))  # field 22: start time, clock ticks after boot
    if not starts:
        return None
    with open("/proc/uptime", "rb") as f:
        uptime_s = float(f.read().split()[0])
    return max(0.0, uptime_s - max(starts) / os.sysconf("SC_CLK_TCK"))


def orphaned_jobs(server_pid: int) -> list[int]:
    """Processes of the server's session whose parent has left it: job
    processes whose connection (their client) is gone."""
    if not os.path.isdir("/proc"):
        return []
    table = proc_table()
    return [
        pid
        for pid, (parent, sid) in table.items()
        if sid == server_pid
        and pid != server_pid
        and parent != server_pid
        and table.get(parent, (0, 0))[1] != server_pid
    ]


def _descendants(pid: int) -> list[int]:
    children = children_map(proc_table())
    found, todo = [], [pid]
    while todo:
        current = todo.pop()
        found.append(current)
        todo += children.get(current, [])
    return found


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
        return stat[stat.rindex(b")") + 2 : stat.rindex(b")") + 3] != b"Z"
    except (OSError, ValueError):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True


def _listening_inodes(port: int) -> set[str]:
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(OSError), open(table) as f:
            for line in f.readlines()[1:]:
                fields = line.split()
                if fields[3] == "0A" and int(fields[1].rsplit(":", 1)[1], 16) == port:
                    inodes.add(fields[9])
    return inodes


def _listens(pid: int, port: int) -> bool | None:
    """Whether ``pid`` holds a listening socket on ``port``; None without /proc."""
    try:
        links = [os.readlink(f"/proc/{pid}/fd/{fd}") for fd in os.listdir(f"/proc/{pid}/fd")]
    except OSError:
        return None
    ours = {link[8:-1] for link in links if link.startswith("socket:[")}
    return bool(ours & _listening_inodes(port))


def refuse_unauthenticated(address: HostAddress, *, insecure_no_auth: bool) -> None:
    """UserError for a fio server beyond loopback unless asked for: fio's
    server runs any job for anyone who reaches it."""
    if is_loopback(address.host) or insecure_no_auth:
        return
    shown = "every address" if is_any_address(address.host) else address.host
    raise UserError(
        f"refusing to start a fio server listening on {shown}: fio's server has no "
        "authentication and runs any job it is sent (commands too, through exec_prerun) "
        "for anyone who can reach the port",
        hint="give it a token (`iorig agent token`, then --token-file; drivers use "
        "tls://HOST) or certificates (docs/guide/hosts.md), or keep it on 127.0.0.1 and reach it "
        "through an SSH tunnel; on an isolated test network only, pass --insecure-no-auth",
    )


def make_workdir(path: Path) -> None:
    """The server's working directory, made if missing; UserError naming
    what is in the way otherwise (a file, a missing permission)."""
    try:
        path.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        raise UserError(
            f"the working directory {path} is a file, not a directory",
            hint="name a directory with --dir (it is made if it does not exist)",
        ) from None
    except OSError as problem:
        raise UserError(
            f"cannot make the working directory {path}: {problem.strerror or problem}",
            hint="name a directory this user may write with --dir",
        ) from None


def port_available(address: HostAddress) -> OSError | None:
    """None if a server could listen at ``address``, else why not.

    fio's server sets SO_REUSEPORT, so a second fio server on a busy port
    starts without error and shares its connections; check before starting.
    """
    family = socket.AF_INET6 if address.is_ipv6 else socket.AF_INET
    host = address.host or ("::" if address.is_ipv6 else "0.0.0.0")
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # ignore TIME_WAIT
        try:
            sock.bind((host, address.port))
        except OSError as exc:
            return exc
    return None


def _start_watchdog(server_pid: int) -> subprocess.Popen:
    """fio.watchdog for ``server_pid``: its own session, and no parent-death
    signal (``spawn`` would give it one), so that it outlives this process."""
    return subprocess.Popen(
        [sys.executable, "-m", "iorig.fio.watchdog", str(os.getpid()), str(server_pid)],
        cwd="/",
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )


class FioServer:
    """A ``fio --server`` process bound to one address or Unix socket, in
    its own working directory (where relative job filenames land).

    Listens only on a loopback address or a socket (fio's server has no
    authentication) unless ``insecure_no_auth`` is set. ``log_path``: where
    fio's stdout/stderr go (None: inherited, e.g. for ``iorig agent`` in a
    terminal); ``control``: a control port next to a TCP address.
    """

    def __init__(
        self,
        fio: str,
        address: Endpoint,
        workdir: Path,
        *,
        insecure_no_auth: bool = False,
        log_path: Path | None = None,
        control: bool = True,
        watchdog: bool = False,
    ) -> None:
        if isinstance(address, HostAddress):
            refuse_unauthenticated(address, insecure_no_auth=insecure_no_auth)
        self.fio = fio
        self.address = address
        self.workdir = workdir
        self.log_path = log_path
        self._proc: subprocess.Popen | None = None
        # iorig agent's: a process that kills the jobs if this one is killed (fio.watchdog)
        self._guarded = watchdog
        self._watchdog: subprocess.Popen | None = None
        self._lock = threading.Lock()
        self._watching = threading.Event()
        # every process seen under the server, by pid and start time: a job
        # whose connection's process died has init for a parent and leads a
        # session of its own, so only this finds it when the server stops
        self._forked = Workers()
        # the control port (stop-host / start-host events), see fio.control
        self._control = (
            ControlServer(address, self.processes, jobs=self.jobs_age_s)
            if control and isinstance(address, HostAddress)
            else None
        )
        self.control_problem: str | None = None

    def processes(self) -> list[int]:
        """The server and every process it forked, now (what STOP freezes)."""
        pid = self.pid
        return process_tree(pid) if pid is not None and self.running else []

    def jobs_age_s(self) -> float | None:
        """Seconds since its newest job started; None while it runs none."""
        pid = self.pid
        return jobs_age_s(pid) if pid is not None and self.running else None

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else None

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def command(self) -> list[str]:
        address = self.address
        if isinstance(address, HostAddress) and address.host == "":  # fio's "any"
            address = HostAddress("0.0.0.0", address.port)
        return [self.fio, f"--server={address.fio_client_arg()}"]

    def _output(self) -> str:
        if self.log_path is None or not self.log_path.exists():
            return ""
        return " ".join(self.log_path.read_text(errors="replace").split())[-300:]

    def start(self, timeout_s: float = 10.0) -> None:
        """Start fio and return once it listens; UserError if it cannot."""
        if self.running:
            return
        where = self.address.label
        if isinstance(self.address, SocketEndpoint):
            Path(self.address.path).unlink(missing_ok=True)  # a server before us died
        problem = port_available(self.address) if isinstance(self.address, HostAddress) else None
        if problem is not None:
            if problem.errno == errno.EADDRINUSE:
                raise UserError(
                    f"cannot start a fio server on {where}: the port is already in use",
                    hint="another fio server (fio lets a second one share the port silently) "
                    "or another program listens there; stop it or choose another --port",
                )
            raise UserError(
                f"cannot start a fio server on {where}: {problem.strerror or problem}",
                hint="bind to an address of this machine",
            )
        make_workdir(self.workdir)
        log = open(self.log_path, "wb") if self.log_path else None  # noqa: SIM115
        try:
            self._proc = spawn(
                self.command(), self.workdir, stdout=log, stderr=subprocess.STDOUT if log else None
            )
        finally:
            if log:
                log.close()
        deadline = time.monotonic() + timeout_s
        while True:
            if self._proc.poll() is not None:
                # fio exits 0 even when it cannot bind; any exit here is a failure.
                output = self._output()
                raise UserError(
                    f"fio --server on {where} exited at start (exit code "
                    f"{self._proc.returncode})" + (f": {output}" if output else ""),
                    hint="see fio's message; is the address one of this machine's?",
                )
            if self._ready():
                self._start_control()
                if self._guarded:
                    self._watchdog = _start_watchdog(self._proc.pid)
                self._watching.set()
                threading.Thread(target=self._watch, args=(self._proc.pid,), daemon=True).start()
                return
            if time.monotonic() > deadline:
                self.stop()
                raise UserError(f"fio --server on {where} did not listen within {timeout_s:g} s")
            time.sleep(0.02)

    def _start_control(self) -> None:
        if self._control is None or not isinstance(self.address, HostAddress):
            return
        try:
            self._control.start()
        except OSError as exc:
            self._control = None
            self.control_problem = no_control_port(self.address.port, exc)

    def _ready(self) -> bool:
        assert self._proc is not None
        if isinstance(self.address, SocketEndpoint):
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
                try:
                    sock.connect(self.address.path)  # fio shrugs off an empty connection
                    return True
                except OSError:
                    return False
        listens = _listens(self._proc.pid, self.address.port)
        if listens is not None:
            return listens
        host = self.address.host  # no /proc: connect (fio shrugs off an empty connection)
        if is_any_address(host):
            host = "::1" if self.address.is_ipv6 else "127.0.0.1"
        try:
            socket.create_connection((host, self.address.port), timeout=0.2).close()
            return True
        except OSError:
            return False

    def _watch(self, server_pid: int, every_s: float = 0.5) -> None:
        """End the jobs of a client that is gone. fio's server runs a
        client's jobs in a process of its own under the connection's; when
        the client dies (killed, a lost network) the connection process ends
        and the jobs go on doing I/O, orphaned, until their runtime ends.
        Such a job process is seen twice, half a second apart, then killed
        with its workers."""
        seen: set[int] = set()
        while self._watching.is_set():
            self._forked.record(server_pid)
            orphans = set(orphaned_jobs(server_pid))
            for pid in orphans & seen:
                tree = [pid, *(p for p in _descendants(pid) if p != pid)]
                for victim in tree:
                    with contextlib.suppress(ProcessLookupError, PermissionError):
                        os.kill(victim, signal.SIGKILL)
            seen = orphans
            time.sleep(every_s)

    def stop(self, timeout_s: float = 5.0) -> None:
        """Stop the server and every process it forked (sessions and jobs):
        SIGTERM, then SIGKILL whatever is left after ``timeout_s``."""
        self._watching.clear()
        if self._watchdog is not None:  # nothing left to guard
            self._watchdog.kill()
            self._watchdog.wait()
            self._watchdog = None
        if self._control is not None:
            self._control.close()
        with self._lock:
            proc = self._proc
            if proc is None:
                return
            # Snapshot first: once the listener is gone its children look orphaned.
            others = [p for p in process_tree(proc.pid, include_root=False) if p != proc.pid]
            others += [p for p in self._forked.alive() if p not in others and p != proc.pid]
            for sig in (signal.SIGTERM, signal.SIGKILL):
                others = [p for p in others if _alive(p)]
                if proc.poll() is None:
                    with contextlib.suppress(ProcessLookupError):
                        proc.send_signal(sig)  # Popen never signals a reaped pid
                for pid in others:
                    with contextlib.suppress(ProcessLookupError, PermissionError):
                        os.kill(pid, sig)
                        os.kill(pid, signal.SIGCONT)  # a host stopped by a run ends too
                deadline = time.monotonic() + timeout_s
                while time.monotonic() < deadline:
                    with contextlib.suppress(subprocess.TimeoutExpired):
                        proc.wait(timeout=0.05)
                    if proc.poll() is not None and not any(_alive(p) for p in others):
                        return

    def __enter__(self) -> FioServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
