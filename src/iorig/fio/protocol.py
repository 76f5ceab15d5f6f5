"""fio's client/server protocol, as far as iorig speaks it: the version
check before any I/O.

client/server needs the same fio on both sides: every message starts with a
24-byte header carrying the protocol version (97 in fio 3.33) and both sides
refuse other versions. A server answering a foreign version sends one TEXT
message (with its own version in the header) and closes; so a probe learns
the server's protocol even on a mismatch, and a second probe in that
protocol yields its fio version string.
"""

from __future__ import annotations

import signal
import socket
import struct
import tempfile
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal, TypeVar

from iorig.bounded import within
from iorig.errors import UserError
from iorig.fio.hosts import Endpoint, HostAddress, HostSpec, SocketEndpoint
from iorig.fio.process import spawn, stop_group

T = TypeVar("T")


_HEADER = struct.Struct("<HHIQIHH")  # struct fio_net_cmd, little endian
_PROBE_PDU = struct.Struct("<Q128s")  # struct cmd_client_probe_pdu
_PROBE_REPLY = struct.Struct("<64sB32sBBBIQ")  # struct cmd_probe_reply_pdu
_CMD_TEXT = 5
_CMD_PROBE = 10
_MAX_PDU = 1 << 16  # fio fragments at 1 KiB; anything larger is not fio
_PROBE_TAG = 0x696F726967  # echoed back by the server
# fio's os/arch enums (os/os.h, arch/arch.h); arch codes above 12 differ by version.
_OS_NAMES = ("", "Linux", "AIX", "FreeBSD", "HP-UX", "OSX", "NetBSD", "OpenBSD")
_OS_NAMES += ("Solaris", "Windows", "Android", "DragonFly")
_ARCH_NAMES = ("", "x86-64", "x86", "ppc", "ia64", "s390", "alpha", "sparc", "sparc64")
_ARCH_NAMES += ("arm", "sh", "hppa", "mips")


def crc16(data: bytes, crc: int = 0) -> int:
    """fio's crc16 (reflected polynomial 0xA001, initial value 0)."""
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ 0xA001 if crc & 1 else crc >> 1
    return crc


def encode_command(opcode: int, pdu: bytes, *, version: int, tag: int = 0) -> bytes:
    """One fio network command: header (with both checksums) and payload."""
    head = _HEADER.pack(version, opcode, 0, tag, len(pdu), 0, 0)[:20]
    return head + struct.pack("<HH", crc16(head), crc16(pdu)) + pdu


@dataclass(frozen=True)
class NetCommand:
    version: int
    opcode: int
    flags: int
    tag: int
    pdu: bytes


class _NotFio(Exception):
    pass


def decode_header(head: bytes) -> tuple[int, int, int, int, int, int]:
    """version, opcode, flags, tag, payload length and payload checksum of a
    24-byte header whose own checksum is right."""
    version, opcode, flags, tag, pdu_len, cmd_crc, pdu_crc = _HEADER.unpack(head)
    if crc16(head[:20]) != cmd_crc or pdu_len > _MAX_PDU:
        raise _NotFio("the reply is not fio's protocol")
    return version, opcode, flags, tag, pdu_len, pdu_crc


def _recv_exact(sock: socket.socket, size: int, deadline: float) -> bytes:
    data = b""
    while len(data) < size:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError
        sock.settimeout(remaining)
        chunk = sock.recv(size - len(data))
        if not chunk:
            raise ConnectionAbortedError("closed")
        data += chunk
    return data


def read_command(sock: socket.socket, deadline: float) -> NetCommand:
    """The next command on ``sock`` (probe replies and texts are never fragmented)."""
    head = _recv_exact(sock, _HEADER.size, deadline)
    version, opcode, flags, tag, pdu_len, pdu_crc = decode_header(head)
    pdu = _recv_exact(sock, pdu_len, deadline) if pdu_len else b""
    if crc16(pdu) != pdu_crc:
        raise _NotFio("bad payload checksum")
    return NetCommand(version, opcode, flags, tag, pdu)


def probe_command(server_name: str, *, version: int) -> bytes:
    """FIO_NET_CMD_PROBE as fio's client sends it (without asking for zlib)."""
    pdu = _PROBE_PDU.pack(0, server_name.encode()[:127])
    return encode_command(_CMD_PROBE, pdu, version=version, tag=_PROBE_TAG)


def _cstr(raw: bytes) -> str:
    return raw.split(b"\0", 1)[0].decode(errors="replace")


@dataclass(frozen=True)
class ServerInfo:
    """What a fio server says about itself when probed."""

    fio_version: str  # e.g. "fio-3.33", as `fio --version` prints it there
    protocol: int  # client/server protocol version in its messages
    hostname: str  # the server's own host name (loopback servers all share one)
    os: str
    arch: str
    bits: int
    cpus: int
    big_endian: bool


ProbeReason = Literal["refused", "timeout", "unreachable", "closed", "protocol", "not_fio"]


@dataclass(frozen=True)
class ProbeFailure:
    """Why a host could not be probed; ``server_protocol`` when the server told us."""

    reason: ProbeReason
    detail: str
    server_protocol: int | None = None


def decode_probe_reply(cmd: NetCommand) -> ServerInfo:
    if len(cmd.pdu) < _PROBE_REPLY.size:
        raise _NotFio("the probe reply is too short")
    host, big_endian, version, os_code, arch, bpp, cpus, _ = _PROBE_REPLY.unpack_from(cmd.pdu)
    os_name = _OS_NAMES[os_code] if 0 < os_code < len(_OS_NAMES) else f"os {os_code}"
    arch_name = _ARCH_NAMES[arch] if 0 < arch < len(_ARCH_NAMES) else f"arch {arch}"
    return ServerInfo(
        fio_version=_cstr(version),
        protocol=cmd.version,
        hostname=_cstr(host),
        os=os_name,
        arch=arch_name,
        bits=bpp * 8,
        cpus=cpus,
        big_endian=bool(big_endian),
    )


def _bounded(call: Callable[[], T], deadline: float) -> T:
    """``call()`` waited for until ``deadline`` (name resolution has no
    timeout of its own); TimeoutError when it is late."""
    returned = within(call, deadline - time.monotonic())
    if returned is None:
        raise TimeoutError
    if returned.error is not None:
        raise returned.error
    return returned.value  # type: ignore[return-value]


def _where(host: Endpoint, deadline: float) -> tuple[int, object] | ProbeFailure:
    """The socket family and address to connect to ``host``."""
    if isinstance(host, SocketEndpoint):
        return socket.AF_UNIX, host.path
    family = socket.AF_INET6 if host.is_ipv6 else socket.AF_INET  # as fio resolves it
    try:
        infos = _bounded(
            lambda: socket.getaddrinfo(host.host, host.port, family, socket.SOCK_STREAM), deadline
        )
    except TimeoutError:
        return ProbeFailure("timeout", f"resolving {host.host} took too long")
    except OSError as exc:
        return ProbeFailure("unreachable", f"cannot resolve {host.host} ({exc.strerror or exc})")
    return family, infos[0][4]


def _probe_once(host: Endpoint, version: int, deadline: float) -> ServerInfo | ProbeFailure:  # noqa: PLR0911
    where = _where(host, deadline)
    if isinstance(where, ProbeFailure):
        return where
    family, address = where
    name = host.host if isinstance(host, HostAddress) else "localhost"
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.settimeout(max(0.001, deadline - time.monotonic()))
        try:
            sock.connect(address)
        except TimeoutError:
            return ProbeFailure("timeout", "no answer to the connection attempt")
        except (ConnectionRefusedError, FileNotFoundError):
            return ProbeFailure("refused", "connection refused (nothing listens on that port)")
        except OSError as exc:
            return ProbeFailure("unreachable", exc.strerror or str(exc))
        sock.sendall(probe_command(name, version=version))
        while True:
            cmd = read_command(sock, deadline)
            if cmd.version != version:
                # A real server answers a foreign version with a TEXT in its own.
                return ProbeFailure(
                    "protocol", "it speaks another fio protocol", server_protocol=cmd.version
                )
            if cmd.opcode == _CMD_PROBE:
                return decode_probe_reply(cmd)
            if cmd.opcode != _CMD_TEXT:
                raise _NotFio(f"unexpected fio command {cmd.opcode}")
    except TimeoutError:
        return ProbeFailure("timeout", "connected, but it never answered the probe")
    except (ConnectionAbortedError, ConnectionResetError, BrokenPipeError):
        return ProbeFailure(
            "closed", "it closed the connection without answering (not fio, or a fio too old)"
        )
    except _NotFio as exc:
        return ProbeFailure("not_fio", f"it is not a fio server: {exc}")
    except OSError as exc:
        return ProbeFailure("unreachable", exc.strerror or str(exc))
    finally:
        sock.close()


def probe_server(host: Endpoint, *, protocol: int, timeout_s: float) -> ServerInfo | ProbeFailure:
    """Ask one fio server for its version, never waiting longer than ``timeout_s``.

    Probes in ``protocol`` (the local fio's); when the server answers in
    another one, probes once more in that one to learn its fio version.
    """
    deadline = time.monotonic() + timeout_s
    result = _probe_once(host, protocol, deadline)
    if isinstance(result, ProbeFailure) and result.server_protocol is not None:
        again = _probe_once(host, result.server_protocol, deadline)
        return again if isinstance(again, ServerInfo) else result
    return result


def local_protocol_version(fio: str, *, timeout_s: float = 5.0, port: int = 0) -> int:
    """The client/server protocol of the local fio: let it connect to a
    listener on 127.0.0.1 and read the version from its first message."""
    deadline = time.monotonic() + timeout_s
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as listener:
        try:
            listener.bind(("127.0.0.1", port))
        except OSError as exc:
            raise UserError(f"cannot listen on 127.0.0.1:{port} ({exc.strerror})") from None
        listener.listen(1)
        port = listener.getsockname()[1]
        with tempfile.TemporaryDirectory(prefix="iorig-fio-proto-") as tmp:
            proc = spawn([fio, f"--client=ip:127.0.0.1,{port}", "--eta=never"], tmp)
            try:
                listener.settimeout(max(0.001, deadline - time.monotonic()))
                conn, _ = listener.accept()
                with conn:
                    head = _recv_exact(conn, _HEADER.size, deadline)
                    return decode_header(head)[0]
            except (OSError, _NotFio) as exc:
                raise UserError(
                    f"could not learn the client/server protocol of {fio} ({exc or 'timed out'})",
                    hint="check that fio runs and can connect to 127.0.0.1",
                ) from None
            finally:
                stop_group(proc, ((signal.SIGKILL, 5.0),))


_FALLBACK_PROTOCOL = 97  # fio 3.33's; only a first guess when the local one is unknown


def server_versions(
    fio: str,
    hosts: Sequence[Endpoint],
    timeout_s: float,
    *,
    local_protocol: int | None = None,
) -> dict[Endpoint, ServerInfo | ProbeFailure]:
    """Probe every host at once: the probes take at most ``timeout_s`` together
    (learning the local protocol first, unless given, takes ~50 ms and at most
    another ``timeout_s``). Keep ``timeout_s`` above 1 s: a fio server may
    take up to a second to read a new connection."""
    if local_protocol is None:
        try:
            local_protocol = local_protocol_version(fio, timeout_s=timeout_s)
        except UserError:
            local_protocol = _FALLBACK_PROTOCOL  # servers tell us theirs on a mismatch
    protocol = local_protocol
    results: dict[Endpoint, ServerInfo | ProbeFailure] = {}

    def probe(host: Endpoint) -> None:
        results[host] = probe_server(host, protocol=protocol, timeout_s=timeout_s)

    threads = [threading.Thread(target=probe, args=(h,), daemon=True) for h in hosts]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + timeout_s + 0.5
    for thread in threads:
        thread.join(max(0.0, deadline - time.monotonic()))
    late = ProbeFailure("timeout", f"no answer within {timeout_s:g} s")
    return {h: results.get(h, late) for h in hosts}


def check_versions(
    local_version: str,
    results: Mapping[HostSpec, ServerInfo | ProbeFailure],
    *,
    local_protocol: int | None = None,
) -> None:
    """Refuse unless every host runs exactly ``local_version`` (``fio --version``)."""
    local = local_version + (f" (protocol {local_protocol})" if local_protocol else "")
    mismatched, unreachable = [], []
    for host, result in results.items():
        if isinstance(result, ServerInfo):
            if result.fio_version != local_version or (
                local_protocol is not None and result.protocol != local_protocol
            ):
                mismatched.append(
                    f"{host.label} runs {result.fio_version} (protocol {result.protocol})"
                )
        elif result.reason == "protocol":
            mismatched.append(
                f"{host.label} speaks fio protocol {result.server_protocol}, not the local "
                f"fio's; its fio version is unknown"
            )
        else:
            unreachable.append(f"{host.label}: {result.detail}")
    if not mismatched and not unreachable:
        return
    lines = []
    if mismatched:
        lines.append(f"fio on these hosts differs from the local {local}:")
        lines += [f"  - {m}" for m in mismatched]
    if unreachable:
        lines.append("these hosts did not answer as fio servers:")
        lines += [f"  - {u}" for u in unreachable]
    hints = []
    if mismatched:
        hints.append(
            f"fio's client/server mode needs the same fio build everywhere: install "
            f"{local_version} on every host (the same package as here) or install theirs here"
        )
    if unreachable:
        hints.append("start `iorig agent --bind ADDRESS` on each host and check the address/port")
    raise UserError("\n".join(lines), hint="; ".join(hints))
