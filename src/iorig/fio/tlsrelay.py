"""The two ends of an authenticated agent's TLS connections (``tls://`` hosts).

The agent (``AgentListener``) listens on its address with TLS; its fio
server listens only on a Unix socket in a private directory. A connection
that passes the handshake (fio.agentauth) is joined to that socket
(channel ``FIO``) or to the control handler (``CONTROL``); any other gets
nothing and is reported with its address. (An agent without authentication
has the same listener without TLS: every connection goes to fio, and is
reported.) On the driver, ``AgentRelays``
gives each agent two Unix sockets in iorig's private directory — one for
fio's client, one for stop-host/start-host — and turns every connection to
them into an authenticated TLS connection to the agent.

Both run on an asyncio loop in a thread of their own: one TLS stream is
read and written from one thread, as OpenSSL requires.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import socket
import ssl
import threading
from collections.abc import Callable, Coroutine, Sequence
from pathlib import Path
from typing import Any, TypeVar

from iorig.errors import UserError
from iorig.fio import agentauth
from iorig.fio.agentauth import Auth, AuthRefused, CertAuth
from iorig.fio.control import ControlError, ControlServer, HostControl
from iorig.fio.hosts import HostAddress, SocketEndpoint, TlsHost
from iorig.fio.sockdir import socket_dir

HANDSHAKE_S = 5.0  # TLS and the token's lines, from the connection's first byte
# Handshakes fairly (issue 48): a flood of connections that say nothing must
# not lock out a driver that has the token. A driver's TLS hello comes at
# once, so a connection silent for FIRST_BYTE_S is closed; at most
# MAX_HANDSHAKES at once, MAX_PER_SOURCE of them from one address, and when
# either is full a newcomer takes the place of the oldest silent connection
# (of its address, or of any) rather than being turned away.
FIRST_BYTE_S = 1.0
MAX_HANDSHAKES = 32
MAX_PER_SOURCE = 8
CHUNK = 1 << 16
T = TypeVar("T")


class _Loop:
    """An asyncio loop in a daemon thread."""

    def __init__(self, name: str) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name=name, daemon=True)
        self._thread.start()

    def run(self, coro: Coroutine[Any, Any, T], timeout_s: float | None = None) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout_s)

    def stop(self) -> None:
        if self.loop.is_closed():
            return

        async def cancel_all() -> None:
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

        with contextlib.suppress(Exception):
            self.run(cancel_all(), timeout_s=5.0)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(5.0)
        if not self._thread.is_alive():
            self.loop.close()


async def _line(reader: asyncio.StreamReader) -> str:
    data = await reader.readline()
    if len(data) > agentauth.MAX_LINE:
        raise AuthRefused("a handshake line too long")
    return data.decode("ascii", "replace").strip()


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    with contextlib.suppress(OSError, ssl.SSLError, ConnectionError):
        while data := await reader.read(CHUNK):
            writer.write(data)
            await writer.drain()


async def _close(writer: asyncio.StreamWriter) -> None:
    writer.close()
    with contextlib.suppress(Exception):
        await asyncio.wait_for(writer.wait_closed(), 2.0)


async def _splice(
    a: tuple[asyncio.StreamReader, asyncio.StreamWriter],
    b: tuple[asyncio.StreamReader, asyncio.StreamWriter],
) -> None:
    """Bytes both ways until either side ends; then both are closed (the
    fio server's connection ends with its client's: its jobs stop)."""
    tasks = [asyncio.create_task(_pipe(a[0], b[1])), asyncio.create_task(_pipe(b[0], a[1]))]
    try:
        await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await asyncio.gather(_close(a[1]), _close(b[1]))


# ------------------------------------------------------------ the agent


class AgentListener:
    """An agent's listener. With ``auth``: TLS and the handshake, and
    ``on_refused(peer, why)`` is told of every connection that failed it.
    Without (loopback, or ``--insecure-no-auth``): every connection goes
    straight to fio, and ``on_connection(peer)`` is told of each."""

    def __init__(
        self,
        address: HostAddress,
        auth: Auth | None,
        fio_socket: str,
        control: ControlServer,
        on_refused: Callable[[str, str], None],
        on_connection: Callable[[str], None] | None = None,
    ) -> None:
        self.address = address
        self.auth = auth
        self.fio_socket = fio_socket
        self.control = control
        self.on_refused = on_refused
        self.on_connection = on_connection
        self._context, self._binding = agentauth.agent_context(auth) if auth else (None, b"")
        self._loop: _Loop | None = None
        self._server: asyncio.Server | None = None
        # connections in their handshake -> their address (oldest first), and
        # those that have sent nothing yet -> what their first byte resolves
        self._handshaking: dict[asyncio.StreamWriter, str] = {}
        self._silent: dict[asyncio.StreamWriter, asyncio.Future[None]] = {}

    def start(self) -> None:
        """Listen; OSError when the address cannot be bound."""
        self._loop = _Loop("iorig-agent-tls")
        try:
            self._server = self._loop.run(
                asyncio.start_server(
                    self._serve, self.address.host or None, self.address.port, reuse_address=True
                ),
                timeout_s=10.0,
            )
        except BaseException:
            self._loop.stop()
            self._loop = None
            raise

    def close(self) -> None:
        if self._loop is None:
            return
        if self._server is not None:
            server = self._server
            with contextlib.suppress(Exception):
                self._loop.run(_stop_server(server), timeout_s=5.0)
        self._loop.stop()
        self._loop = None

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        peer = writer.get_extra_info("peername")
        where = str(peer[0]) if isinstance(peer, tuple) else str(peer)
        if self.auth is None:
            if self.on_connection is not None:
                self.on_connection(where)
            await self._join(where, "FIO", (reader, writer))
            return
        if not self._admit(where, writer):
            self.on_refused(
                where,
                f"more handshakes at once than the agent takes ({MAX_HANDSHAKES}, "
                f"{MAX_PER_SOURCE} from one address), none of them silent",
            )
            await _close(writer)
            return
        arrived = self._silent[writer]  # resolved by its first byte, failed if closed for another
        try:
            async with asyncio.timeout(HANDSHAKE_S):
                await self._first_byte(writer, arrived)
                channel = await self._handshake(reader, writer)
        except (
            AuthRefused,
            TimeoutError,
            ssl.SSLError,
            OSError,
            ConnectionError,
            ValueError,
            asyncio.IncompleteReadError,
            Silent,
        ) as exc:
            if writer in self._handshaking:  # not closed for a newcomer (said then)
                self.on_refused(where, _why(exc))
            await _close(writer)
            return
        finally:
            self._handshaking.pop(writer, None)
            self._silent.pop(writer, None)
        await self._join(where, channel, (reader, writer))

    def _admit(self, where: str, writer: asyncio.StreamWriter) -> bool:
        """Room for ``writer``'s handshake, made by closing the oldest silent
        connection of its address (when that address has its share) or of
        any (when the agent is full); False when every one has spoken."""
        while True:
            same = [w for w, source in self._handshaking.items() if source == where]
            crowded = len(same) >= MAX_PER_SOURCE
            if not crowded and len(self._handshaking) < MAX_HANDSHAKES:
                self._handshaking[writer] = where
                self._silent[writer] = asyncio.get_running_loop().create_future()
                return True
            oldest = next(
                (w for w in (same if crowded else self._handshaking) if w in self._silent), None
            )
            if oldest is None:
                return False
            source = self._handshaking.pop(oldest)
            self.on_refused(source, "silent while others waited: closed for a newer connection")
            self._silent.pop(oldest).set_exception(ConnectionAbortedError("closed for a newer one"))
            oldest.transport.abort()

    async def _first_byte(
        self, writer: asyncio.StreamWriter, arrived: asyncio.Future[None]
    ) -> None:
        """Wait, up to FIRST_BYTE_S, until the peer has sent something,
        leaving it unread for TLS: the transport stops reading, and a
        duplicate of the socket is watched (asyncio watches no descriptor
        of a transport twice)."""
        if arrived.done():  # closed for a newcomer before its turn came
            arrived.result()
        writer.transport.pause_reading()  # start_tls resumes it
        loop = asyncio.get_running_loop()
        watched = os.dup(writer.get_extra_info("socket").fileno())
        try:
            loop.add_reader(watched, lambda: arrived.done() or arrived.set_result(None))
            try:
                async with asyncio.timeout(FIRST_BYTE_S):
                    await arrived
            except TimeoutError:
                raise Silent from None
        finally:
            loop.remove_reader(watched)
            os.close(watched)
            self._silent.pop(writer, None)

    async def _join(
        self, where: str, channel: str, peer: tuple[asyncio.StreamReader, asyncio.StreamWriter]
    ) -> None:
        try:
            other = await self._open(channel)
        except OSError as exc:
            self.on_refused(where, f"{channel} is not available: {exc}")
            await _close(peer[1])
            return
        await _splice(peer, other)

    async def _handshake(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> str:
        assert self._context is not None and self.auth is not None
        await writer.start_tls(self._context)
        mine = agentauth.nonce()
        writer.write(agentauth.agent_hello(self.auth, mine))
        await writer.drain()
        line = await _line(reader)
        channel, answer = agentauth.agent_check(self.auth, mine, line, self._binding)
        writer.write(answer)
        await writer.drain()
        return channel

    async def _open(self, channel: str) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        if channel == "FIO":
            return await asyncio.open_unix_connection(self.fio_socket)
        ours, theirs = socket.socketpair()
        threading.Thread(target=self.control.handle, args=(theirs,), daemon=True).start()
        return await asyncio.open_connection(sock=ours)


async def _stop_server(server: asyncio.Server) -> None:
    server.close()
    with contextlib.suppress(Exception):
        await asyncio.wait_for(server.wait_closed(), 2.0)


class Silent(Exception):
    """A connection that sent nothing within FIRST_BYTE_S."""


def _why(exc: BaseException) -> str:
    if isinstance(exc, AuthRefused):
        return str(exc)
    if isinstance(exc, Silent):
        return f"nothing sent within {FIRST_BYTE_S:g} s"
    if isinstance(exc, TimeoutError):
        return f"no complete handshake within {HANDSHAKE_S:g} s"
    if isinstance(exc, ssl.SSLError):
        return f"TLS failed: {exc.reason or exc}"
    return f"the connection failed during the handshake: {exc}"


# ------------------------------------------------------------ the driver


class AgentRelays:
    """Unix sockets on this machine, one pair per ``tls://`` host, in
    ``workdir`` (private to iorig's user): each connection to one becomes
    an authenticated TLS connection to the host's agent."""

    def __init__(self, auth: Auth, workdir: Path) -> None:
        self.auth = auth
        self.workdir = workdir
        self.problems: dict[str, str] = {}  # the last failure of each host
        self._context = agentauth.driver_context(auth)
        self._loop = _Loop("iorig-agent-relays")
        self._servers: list[asyncio.Server] = []

    def add(self, index: int, host: TlsHost) -> tuple[SocketEndpoint, SocketEndpoint]:
        """The host's fio and control sockets."""
        out = []
        for channel in agentauth.CHANNELS:
            path = self.workdir / f"t{index}.{channel.lower()}.sock"

            async def serve(
                reader: asyncio.StreamReader, writer: asyncio.StreamWriter, channel: str = channel
            ) -> None:
                # cancelled when the relays close (a lock's connection may still be
                # closing): an end, not an error for asyncio to print
                with contextlib.suppress(asyncio.CancelledError):
                    await self._relay(host, channel, (reader, writer))

            server = self._loop.run(asyncio.start_unix_server(serve, str(path)), timeout_s=10.0)
            self._servers.append(server)
            out.append(SocketEndpoint(str(path)))
        return out[0], out[1]

    async def _relay(
        self, host: TlsHost, channel: str, local: tuple[asyncio.StreamReader, asyncio.StreamWriter]
    ) -> None:
        try:
            async with asyncio.timeout(HANDSHAKE_S * 2):
                remote = await self._connect(host, channel)
        except (
            AuthRefused,
            TimeoutError,
            ssl.SSLError,
            OSError,
            ConnectionError,
            ValueError,
            asyncio.IncompleteReadError,
        ) as exc:
            self.problems[host.label] = _driver_why(exc)
            await _close(local[1])
            return
        self.problems.pop(host.label, None)
        await _splice(local, remote)

    async def _connect(
        self, host: TlsHost, channel: str
    ) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        name = host.host if isinstance(self.auth, CertAuth) else None
        reader, writer = await asyncio.open_connection(
            host.host,
            host.port,
            ssl=self._context,
            server_hostname=name,
            ssl_handshake_timeout=HANDSHAKE_S,
        )
        try:
            ssl_object = writer.get_extra_info("ssl_object")
            binding = agentauth.certificate_hash(ssl_object.getpeercert(binary_form=True))
            hello = await _line(reader)
            line, expected = agentauth.driver_answer(self.auth, hello, channel, binding)
            writer.write(line)
            await writer.drain()
            agentauth.driver_check(await _line(reader), expected)
        except BaseException:
            await _close(writer)
            raise
        return reader, writer

    def close(self) -> None:
        for server in self._servers:
            with contextlib.suppress(Exception):
                self._loop.run(_stop_server(server), timeout_s=5.0)
        self._loop.stop()


def _driver_why(exc: BaseException) -> str:
    if isinstance(exc, AuthRefused):
        return str(exc)
    if isinstance(exc, TimeoutError):
        return f"the agent did not answer in time (no handshake within {HANDSHAKE_S * 2:g} s)"
    if isinstance(exc, ssl.SSLCertVerificationError):
        return f"its certificate was not accepted: {exc.verify_message or exc}"
    if isinstance(exc, ssl.SSLError):
        return f"TLS failed: {exc.reason or exc}"
    if isinstance(exc, ConnectionRefusedError):
        return "connection refused (no agent listens there)"
    if isinstance(exc, asyncio.IncompleteReadError | ConnectionError):
        return agentauth.CLOSED
    return f"cannot connect: {getattr(exc, 'strerror', None) or exc}"


class RelayedControl(HostControl):
    """stop-host/start-host through a relay: a refusal names the relay's
    reason (a wrong token, an unreachable agent) rather than a closed socket."""

    def __init__(self, endpoint: SocketEndpoint, host: TlsHost, relays: AgentRelays) -> None:
        super().__init__(endpoint, host.label)
        self._relays = relays

    def _ask(self, conn: socket.socket, request: str) -> str:
        try:
            return super()._ask(conn, request)
        except ControlError:
            if problem := self._relays.problems.get(self.where):
                raise ControlError(f"{self.where}: {problem}") from None
            raise


class AgentLinks:
    """The relays of every ``tls://`` host of a run, in a private directory."""

    def __init__(self, hosts: Sequence[TlsHost]) -> None:
        auth = agentauth.driver_auth()
        longest = f"t{len(hosts)}.{max(agentauth.CHANNELS, key=len).lower()}.sock"
        self.workdir = socket_dir("iorig-tls-", longest)
        self.relays = AgentRelays(auth, self.workdir)
        self._links = {h.label: (h, *self.relays.add(i, h)) for i, h in enumerate(hosts)}

    def endpoint(self, host: TlsHost) -> SocketEndpoint:
        return self._links[host.label][1]

    def control(self, host: TlsHost) -> RelayedControl:
        return RelayedControl(self._links[host.label][2], host, self.relays)

    def check(self) -> dict[str, str]:
        """Reach and authenticate every agent at once: why each that
        failed did, by label."""
        failures: dict[str, str] = {}

        def ping(host: TlsHost) -> None:
            try:
                self.control(host).ping()
            except ControlError as exc:
                failures[host.label] = str(exc).removeprefix(f"{host.label}: ")

        threads = [
            threading.Thread(target=ping, args=(h,), daemon=True)
            for h, _, _ in self._links.values()
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        return failures

    def close(self) -> None:
        self.relays.close()
        shutil.rmtree(self.workdir, ignore_errors=True)


def connect_agents(hosts: Sequence[TlsHost]) -> AgentLinks:
    """Relays to every host, each reached and authenticated; all or none
    (the error names every host that failed and why)."""
    links = AgentLinks(hosts)
    failures = links.check()
    if failures:
        links.close()
        raise UserError(
            "these authenticated agents could not be used:\n"
            + "\n".join(f"  - {label}: {why}" for label, why in failures.items()),
            hint="start `iorig agent --bind ADDRESS --token-file FILE` there with the token "
            f"this machine reads ({agentauth.TOKEN_ENV}, default ~/.config/iorig/agent.token), "
            "or with certificates (docs/guide/hosts.md)",
        )
    return links
