"""The agent's control port: how iorig stops and resumes a host's fio server
(the ``stop-host`` / ``start-host`` events), the way a node fails and returns.

``iorig agent`` listens on its fio port + 1, on the same address as fio.
One line per request, one line per answer::

    IORIG-AGENT 1 PING          -> OK iorig-agent
    IORIG-AGENT 1 TIME          -> OK 1795555402.123456 (the host's clock)
    IORIG-AGENT 1 STOP <max_s>  -> OK stopped N processes
    IORIG-AGENT 1 CONT          -> OK resumed after 12.3 s
    IORIG-AGENT 1 JOBS          -> OK 0.84 (seconds since the newest fio job
                                   started) or OK none (no job running)
    IORIG-AGENT 1 IO            -> OK 1795555402.123456 R W NR NW: the host's
                                   clock, bytes the fio server's processes
                                   read and wrote so far, reads and writes
                                   (fio.hostio)
    IORIG-AGENT 1 LOCK <paths>  -> OK locked N, BUSY … or ERR … (fio.hostlock):
                                   the targets stay locked until the
                                   connection closes; RUN <id> on it names the run

STOP freezes the fio server and every process it forked (SIGSTOP): its jobs
stop doing I/O and it stops answering its client, as a failed node would.
It lasts until CONT on the same connection, the connection closes (iorig
ended, whatever the reason) or ``max_s`` passes: a host is never left
frozen. JOBS is how a run's events count from when the hosts' jobs began,
not from when iorig launched them; IO is the host's side of live per-host
figures. On this port there is no authentication, like fio's own, which
already runs any job sent to it; it is bound where fio is. An agent with
authentication has no such port: the same requests come through its TLS
channel (fio.tlsrelay) and reach ``ControlServer.handle``.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Protocol

from iorig.errors import UserError
from iorig.fio import hostlock
from iorig.fio.hostio import HostIo, TreeCounter, format_answer, parse_answer
from iorig.fio.hosts import HostAddress, SocketEndpoint

MAGIC = "IORIG-AGENT 1"
MAX_LINE = 128
MAX_STOP_S = 24 * 3600.0
CONNECT_S = 3.0
LAUNCH_SLACK_S = 0.5  # a job age's error (clock ticks, the round trip)


def control_port(fio_port: int) -> int:
    return fio_port + 1 if fio_port < 65535 else fio_port - 1


def _signal_all(pids: list[int], sig: signal.Signals) -> int:
    done = 0
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, sig)
            done += 1
    return done


def _state(pid: int) -> str | None:
    try:
        # the name between the parentheses may be any bytes: only the state is read
        stat = Path(f"/proc/{pid}/stat").read_bytes().decode(errors="replace")
    except OSError:
        return None  # gone (or not Linux): nothing left to wait for
    return stat[stat.rindex(")") + 2 :][:1]


def _wait_stopped(pids: list[int], limit_s: float = 2.0) -> None:
    """SIGSTOP takes effect when each process is next scheduled, later on a
    busy host: wait (bounded) until every one is in state T."""
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        if all(_state(pid) in (None, "T", "t", "Z", "X") for pid in pids):
            return
        time.sleep(0.005)


class HeldLocks(Protocol):
    """What a ``locker`` took: the run's name goes into it, and it is freed."""

    def name_run(self, run_id: str) -> None: ...

    def release(self) -> None: ...


class ControlServer:
    """Serves the control port of one fio server; ``processes()`` gives the
    server's process tree at the moment of a STOP. Without ``address`` it
    listens nowhere and serves the connections given to ``handle``.
    ``locker(paths)`` locks targets for a LOCK request (LockBusy, LockRefused)."""

    def __init__(
        self,
        address: HostAddress | None,
        processes: Callable[[], list[int]],
        on_connection: Callable[[str], None] | None = None,
        *,
        jobs: Callable[[], float | None] = lambda: None,
        locker: Callable[[list[str]], HeldLocks] | None = None,
    ) -> None:
        self.address = address
        self.processes = processes
        self.jobs = jobs  # seconds since the newest job started, None when none runs
        self.locker = locker
        self.on_connection = on_connection  # told each peer's address
        self._io = TreeCounter()  # what the server's processes read and wrote (IO)
        self._sock: socket.socket | None = None
        self._stopped = threading.Lock()  # held while the fio server is frozen
        self._running = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Listen; OSError when the port cannot be bound."""
        assert self.address is not None, "a control server without an address only handles"
        family = socket.AF_INET6 if self.address.is_ipv6 else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((self.address.host, control_port(self.address.port)))
            sock.listen(4)
        except OSError:
            sock.close()
            raise
        sock.settimeout(0.5)
        self._sock = sock
        self._running.set()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def close(self) -> None:
        """Stop listening, for good: the port is free again on return (a
        socket closed while its thread waits in accept() kept listening, and
        a new server on the same port then had its connections reset)."""
        self._running.clear()
        if self._sock is not None:
            with contextlib.suppress(OSError):
                self._sock.shutdown(socket.SHUT_RDWR)  # wakes the accept()
            if self._thread is not None:
                self._thread.join(2.0)
            self._sock.close()

    def _serve(self) -> None:
        assert self._sock is not None
        while self._running.is_set():
            try:
                conn, peer = self._sock.accept()
            except (TimeoutError, OSError):
                continue
            if self.on_connection is not None:
                self.on_connection(str(peer[0]))
            threading.Thread(target=self.handle, args=(conn,), daemon=True).start()

    def handle(self, conn: socket.socket) -> None:
        """One request on ``conn`` (and CONT after STOP), then close it."""
        with conn:
            conn.settimeout(5.0)
            reader = conn.makefile("rb")
            line = _read_line(reader, hostlock.LINE_MAX)
            words = line.removeprefix(MAGIC).split() if line.startswith(MAGIC) else []
            if words == ["PING"]:
                conn.sendall(b"OK iorig-agent\n")
            elif words == ["TIME"]:
                conn.sendall(f"OK {time.time():.6f}\n".encode())
            elif words == ["JOBS"]:
                age = self.jobs()
                conn.sendall(f"OK {'none' if age is None else f'{age:.3f}'}\n".encode())
            elif words == ["IO"]:
                conn.sendall(f"OK {format_answer(self._io.read(self.processes()))}\n".encode())
            elif len(words) == 2 and words[0] == "STOP":
                self._stop(conn, reader, words[1])
            elif len(words) == 2 and words[0] == "LOCK":
                self._lock(conn, reader, words[1])
            else:
                conn.sendall(b"ERR unknown request\n")

    def _stop(self, conn: socket.socket, reader: object, max_text: str) -> None:
        try:
            max_s = min(float(max_text), MAX_STOP_S)
        except ValueError:
            conn.sendall(b"ERR STOP needs a number of seconds\n")
            return
        if not max_s > 0 or not self._stopped.acquire(blocking=False):
            conn.sendall(b"ERR already stopped or bad duration\n")
            return
        began = time.monotonic()
        frozen: list[int] = []
        try:
            frozen = self.processes()
            count = _signal_all(frozen, signal.SIGSTOP)
            _wait_stopped(frozen)  # "stopped" means no I/O is issued from here on
            conn.sendall(f"OK stopped {count} processes\n".encode())
            conn.settimeout(max_s)
            with contextlib.suppress(OSError, TimeoutError):
                _read_line(reader)  # CONT, or the connection closed, or max_s passed
        finally:
            # what was frozen and anything forked since (nothing runs while stopped)
            _signal_all(list(dict.fromkeys([*frozen, *self.processes()])), signal.SIGCONT)
            self._stopped.release()
        with contextlib.suppress(OSError):
            conn.sendall(f"OK resumed after {time.monotonic() - began:.1f} s\n".encode())

    def _lock(self, conn: socket.socket, reader: object, word: str) -> None:
        """Lock the targets of a LOCK request until the connection closes."""
        if self.locker is None:
            conn.sendall(b"ERR this fio server locks no targets\n")
            return
        try:
            held = self.locker(hostlock.request_paths(word))
        except hostlock.LockBusy as busy:
            conn.sendall(f"{hostlock.busy_answer(busy.index, busy.holder)}\n".encode())
            return
        except (hostlock.LockRefused, ValueError) as exc:
            conn.sendall(f"ERR {' '.join(str(exc).split())[:200]}\n".encode())
            return
        try:
            conn.sendall(b"OK locked\n")
            conn.settimeout(None)  # held while the driver's connection lives
            if conn.family in (socket.AF_INET, socket.AF_INET6):  # a driver gone silently
                conn.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
                for option, value in (
                    ("TCP_KEEPIDLE", 30),
                    ("TCP_KEEPINTVL", 10),
                    ("TCP_KEEPCNT", 3),
                ):
                    if hasattr(socket, option):
                        conn.setsockopt(socket.IPPROTO_TCP, getattr(socket, option), value)
            while line := _read_line(reader):
                words = line.removeprefix(MAGIC).split() if line.startswith(MAGIC) else []
                if len(words) == 2 and words[0] == "RUN":
                    try:
                        held.name_run(words[1])
                        conn.sendall(b"OK\n")
                    except ValueError:
                        conn.sendall(b"ERR not a run id\n")
                else:
                    conn.sendall(b"ERR unknown request\n")
        except OSError:
            pass  # the connection is gone: so are the locks
        finally:
            held.release()


def _read_line(reader: object, limit: int = MAX_LINE) -> str:
    data = reader.readline(limit)  # type: ignore[attr-defined]
    return data.decode("ascii", "replace").strip()


def read_clock(ask_time: Callable[[], str]) -> tuple[float, float]:
    """A host's clock minus this one's, in seconds, from ``ask_time()`` (the
    host's answer to TIME) taken at the middle of its round trip, and the
    error of that figure: half the round trip. ValueError for an answer
    that is not a time."""
    sent = time.time()
    answer = ask_time()
    came = time.time()
    return float(answer) - (sent + came) / 2, (came - sent) / 2


def jobs_started(ask_jobs: Callable[[], str], where: str) -> float | None:
    """When a host's newest job started, on this machine's clock, from
    ``ask_jobs()`` (the host's answer to JOBS: an age in seconds, or none),
    taking the age at the middle of the round trip."""
    sent = time.time()
    answer = ask_jobs()
    came = time.time()
    if answer == "none":
        return None
    try:
        age = float(answer)
    except ValueError:
        raise ControlError(f"the agent at {where} sent no job age: {answer[:40]!r}") from None
    if not 0 <= age < MAX_STOP_S:
        raise ControlError(f"the agent at {where} sent an impossible job age: {answer[:40]!r}")
    return (sent + came) / 2 - age


def read_io(answer: str, where: str) -> HostIo:
    """The figures of a host's answer to IO; ControlError when it sent none."""
    try:
        return parse_answer(answer, where)
    except ValueError as exc:
        raise ControlError(str(exc)) from None


def no_control_port(fio_port: int, exc: OSError) -> str:
    """Why a host cannot be stopped and resumed: its control port failed."""
    return (
        f"no control port {control_port(fio_port)} ({exc.strerror or exc}): "
        "runs cannot stop and resume this host (stop-host/start-host events)"
    )


class ControlError(Exception):
    """The agent could not be reached or refused (the message says which)."""


class HostControl:
    """iorig's side: stop a host, later resume it (one STOP at a time)."""

    def __init__(self, address: HostAddress | SocketEndpoint, name: str | None = None) -> None:
        """``address``: an agent's fio address (its control port is next to
        it) or a socket reaching its control channel; ``name``: the host's
        name in messages (by default the control port's address)."""
        self.address = address
        self.name = name
        self._conn: socket.socket | None = None

    @property
    def where(self) -> str:
        if self.name is not None:
            return self.name
        if isinstance(self.address, SocketEndpoint):
            return self.address.label
        return HostAddress(self.address.host, control_port(self.address.port)).label

    def _connect(self) -> socket.socket:
        try:
            if isinstance(self.address, SocketEndpoint):
                sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                sock.settimeout(CONNECT_S)
                try:
                    sock.connect(self.address.path)
                except OSError:
                    sock.close()
                    raise
                return sock
            return socket.create_connection(
                (self.address.host, control_port(self.address.port)), timeout=CONNECT_S
            )
        except OSError as exc:
            raise ControlError(
                f"no iorig agent control port at {self.where} ({exc.strerror or exc}): "
                "stop-host and start-host need the host's fio server started by `iorig agent`"
            ) from None

    def _ask(self, conn: socket.socket, request: str) -> str:
        try:
            conn.sendall(f"{MAGIC} {request}\n".encode())
            answer = _read_line(conn.makefile("rb"))
        except OSError as exc:
            raise _no_answer(self.where, exc) from None
        if not answer.startswith("OK"):
            raise ControlError(f"the agent at {self.where} refused: {answer or 'no answer'}")
        return answer.removeprefix("OK").strip()

    def ping(self) -> None:
        with self._connect() as conn:
            self._ask(conn, "PING")

    def clock(self) -> tuple[float, float]:
        """The host's clock against this one's and its error (``read_clock``)."""
        with self._connect() as conn:
            try:
                return read_clock(lambda: self._ask(conn, "TIME"))
            except ValueError:
                raise ControlError(f"the agent at {self.where} sent no time") from None

    def jobs_started(self) -> float | None:
        """When (on this machine's clock) the host's newest fio job started;
        None while it runs none."""
        with self._connect() as conn:
            return jobs_started(lambda: self._ask(conn, "JOBS"), self.where)

    def io(self) -> HostIo:
        """What the host's fio processes read and wrote so far (fio.hostio)."""
        with self._connect() as conn:
            return read_io(self._ask(conn, "IO"), self.where)

    def stop(self, max_s: float) -> str:
        conn = self._connect()
        try:
            answer = self._ask(conn, f"STOP {max_s:.1f}")
        except ControlError:
            conn.close()
            raise
        conn.settimeout(CONNECT_S)
        self._conn = conn
        return answer

    def resume(self) -> str:
        conn, self._conn = self._conn, None
        if conn is None:
            return "not stopped"
        with conn:
            return self._ask(conn, "CONT")

    @property
    def stopped(self) -> bool:
        return self._conn is not None

    def lock(self, paths: Sequence[str]) -> AgentLock:
        """Have the agent lock the targets at ``paths`` (as its fio server sees
        them) for as long as the returned connection stays open; LockBusy,
        LockRefused (an agent that cannot lock), ControlError (none reached)."""
        conn = self._connect()
        reader = conn.makefile("rb")
        try:
            conn.sendall(f"{MAGIC} {hostlock.lock_request(paths)}\n".encode())
            hostlock.read_answer(_read_line(reader, LOCK_ANSWER_MAX))
        except OSError as exc:
            reader.close()
            conn.close()
            raise _no_answer(self.where, exc) from None
        except BaseException:
            reader.close()
            conn.close()
            raise
        return AgentLock(self.where, conn, reader)


LOCK_ANSWER_MAX = 4096


def _no_answer(where: str, exc: OSError) -> ControlError:
    """What an agent's silence is: a timeout (a stopped or swamped agent) is
    said as such, not confused with a refusal."""
    if isinstance(exc, TimeoutError):
        return ControlError(f"the agent at {where} did not answer in time")
    return ControlError(f"the agent at {where} did not answer: {exc.strerror or exc}")


class AgentLock:
    """Targets an agent holds locked for this run, while this connection is open."""

    def __init__(self, where: str, conn: socket.socket, reader: object) -> None:
        self.where = where
        self._conn: socket.socket | None = conn
        self._reader = reader

    def name_run(self, run_id: str) -> None:
        if self._conn is None:
            return
        try:
            self._conn.sendall(f"{MAGIC} RUN {run_id}\n".encode())
            answer = _read_line(self._reader)
        except OSError as exc:
            raise _no_answer(self.where, exc) from None
        if answer != "OK":
            raise ControlError(f"the agent at {self.where} refused the run's id: {answer:.80}")

    def release(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:  # the agent frees the locks when the connection closes
            self._reader.close()  # type: ignore[attr-defined] - else the socket stays open
            conn.close()


class JobsWatch:
    """When every host's fio jobs have begun: each host is asked (its control
    channel's JOBS) every ``poll_s`` until it tells, from a thread of its
    own, so a hung host holds up only itself. A host that cannot tell (a fio
    server without iorig's agent, an agent older than JOBS, jobs run as
    threads: no job process for ``quiet_s``) is left out; when none can,
    the phase's launch stands in."""

    def __init__(
        self,
        asks: Sequence[Callable[[], float | None]],
        launched: float,
        poll_s: float = 0.1,
        quiet_s: float = 10.0,
    ) -> None:
        self.launched = launched
        self.poll_s = poll_s
        self.quiet_s = quiet_s
        self._told: dict[int, float | None] = {}
        self._closed = threading.Event()
        self._threads = [
            threading.Thread(target=self._watch, args=(i, ask), daemon=True)
            for i, ask in enumerate(asks)
        ]
        for thread in self._threads:
            thread.start()

    def _watch(self, i: int, ask: Callable[[], float | None]) -> None:
        while not self._closed.is_set():
            try:
                began = ask()
            except (ControlError, UserError, OSError):  # UserError: a host not connected
                self._told[i] = None  # cannot tell: not waited for
                return
            # a job older than the launch is the last phase's, still ending
            if began is not None and began >= self.launched - LAUNCH_SLACK_S:
                self._told[i] = began
                return
            if time.time() - self.launched > self.quiet_s:
                self._told[i] = None
                return
            self._closed.wait(self.poll_s)

    @property
    def started_at(self) -> float | None:
        """Unix seconds (this machine's clock) when the last host's jobs
        began; None until every host has told or is known unable to."""
        if len(self._told) < len(self._threads):
            return None
        told = [t for t in self._told.values() if t is not None]
        return max(told) if told else self.launched

    def close(self) -> None:
        self._closed.set()
