"""fio's client/server mode: host addresses, the version check before any I/O,
a managed ``fio --server`` process, and naming/aligning what hosts send back.

Facts this module relies on (fio 3.33, see the client/server investigation):

- One local ``fio --client=A job-a.fio --client=B job-b.fio`` runs every host;
  a job file must directly follow its ``--client=`` argument (options in
  between make every host get the same file). Job files are read locally and
  sent to the server; ``filename=`` is opened on the server, relative to the
  server's working directory.
- client/server needs the same fio on both sides: every message starts with
  a 24-byte header carrying the protocol version (97 in fio 3.33) and both
  sides refuse other versions. A server answering a foreign version sends one
  TEXT message (with its own version in the header) and closes; so a probe
  learns the server's protocol even on a mismatch, and a second probe in that
  protocol yields its fio version string.
- ``json+`` entries in ``client_stats`` and log-file suffixes name a host by
  the host part given to ``--client`` (without the port): two servers on one
  address write the same log names and overwrite each other's logs, so every
  host needs its own log prefix (``host_log_prefixes``).
- Log timestamps are relative to each host's own job start, and 3.33 reports
  no start time; ``log_unix_epoch=1`` makes them wall-clock milliseconds,
  which ``wallclock_offsets_ms`` turns into one shared per-second axis.
- A fio server shares its port with any later fio server (SO_REUSEPORT), exits
  0 even when it cannot bind, and its job processes run in their own sessions;
  ``FioServer`` checks the port first and stops the whole process tree.

Pure where possible; no printing and no exits. Problems the user can fix raise
``UserError``.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import ipaddress
import os
import re
import signal
import socket
import struct
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, TypeVar

from iorig.errors import UserError

DEFAULT_PORT = 8765
LOCAL_HOST = "local"  # reserved: this machine, never a server address

# ---------------------------------------------------------------- addresses

_HOSTNAME_LABEL = re.compile(r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$")
_ANY_ADDRESSES = ("", "0.0.0.0", "::")


@dataclass(frozen=True)
class HostAddress:
    """A fio server: a host name or IP address (IPv6 without brackets) and a port."""

    host: str
    port: int = DEFAULT_PORT

    @property
    def is_ipv6(self) -> bool:
        return ":" in self.host

    @property
    def label(self) -> str:
        """How results name this host: ``127.0.0.2:8765``, ``[::1]:8765``."""
        host = f"[{self.host}]" if self.is_ipv6 else self.host
        return f"{host}:{self.port}"

    def fio_client_arg(self) -> str:
        """The value of ``fio --client=`` (and ``--server=``) for this host."""
        return f"{'ip6' if self.is_ipv6 else 'ip'}:{self.host},{self.port}"

    def fio_key(self) -> tuple[str, int]:
        """How fio names this host: ``hostname`` and ``port`` of a ``client_stats``
        or ``disk_util`` entry; the log-file suffix is the host part alone."""
        return (self.host, self.port)

    def __str__(self) -> str:
        return self.label


def _bad_host(text: str, why: str) -> UserError:
    return UserError(
        f"{text!r} is not a host: {why}",
        hint="write hosts as NAME, NAME:PORT, 1.2.3.4:PORT or [IPv6]:PORT, separated by commas",
    )


def _check_port(text: str, port_text: str) -> int:
    if not port_text.isdigit() or not 1 <= int(port_text) <= 65535:
        raise _bad_host(text, f"port {port_text!r} is not a number from 1 to 65535")
    return int(port_text)


def _normal_host(text: str, host: str) -> str:
    """An IP address in canonical form, or a valid lower-case host name."""
    try:
        return ipaddress.ip_address(host).compressed
    except ValueError:
        pass
    name = host.lower().rstrip(".")
    labels = name.split(".")
    if not name or len(name) > 253 or not all(_HOSTNAME_LABEL.match(lb) for lb in labels):
        raise _bad_host(text, "a host name has letters, digits, '-' and '.' only")
    if labels[-1].isdigit():  # 300.1.1.1, 10.1: meant as an address, but invalid
        raise _bad_host(text, "not a valid IPv4 address")
    return name


def parse_host(text: str, default_port: int = DEFAULT_PORT) -> HostAddress:
    """``name``, ``name:port``, ``1.2.3.4:port``, ``::1`` or ``[::1]:port``.

    ``local`` (this machine, run without a server) is refused here: callers
    handle it before asking for a server address.
    """
    raw = text
    text = text.strip()
    if not text:
        raise _bad_host(raw, "it is empty")
    if text.lower() == LOCAL_HOST:
        raise UserError(
            "'local' means this machine and is not a fio server address",
            hint="to include this machine in a multi-host run, start `iorig agent --bind "
            "127.0.0.1` here and list 127.0.0.1 among the hosts",
        )
    if "/" in text or "," in text or text.startswith(("ip:", "ip4:", "ip6:", "sock:")):
        raise _bad_host(raw, "give the address as host:port, not in fio's syntax")
    if any(c.isspace() for c in text):
        raise _bad_host(raw, "it contains spaces")
    if "%" in text:
        raise _bad_host(raw, "scoped IPv6 addresses (with %) are not supported by fio")
    if text.startswith("["):
        end = text.find("]")
        if end < 0:
            raise _bad_host(raw, "'[' without ']'")
        host, rest = text[1:end], text[end + 1 :]
        if rest and not rest.startswith(":"):
            raise _bad_host(raw, f"unexpected {rest!r} after ']'")
        port = _check_port(raw, rest[1:]) if rest else default_port
        try:
            address = ipaddress.IPv6Address(host)
        except ValueError:
            raise _bad_host(raw, "brackets hold an IPv6 address") from None
        return HostAddress(address.compressed, port)
    if text.count(":") > 1:  # a bare IPv6 address: a port needs brackets
        try:
            return HostAddress(ipaddress.IPv6Address(text).compressed, default_port)
        except ValueError:
            raise _bad_host(raw, "an IPv6 address with a port is written [address]:port") from None
    host, sep, port_text = text.partition(":")
    port = _check_port(raw, port_text) if sep else default_port
    if not host:
        raise _bad_host(raw, "the host part is empty")
    return HostAddress(_normal_host(raw, host), port)


def parse_hosts(text: str, default_port: int = DEFAULT_PORT) -> list[HostAddress]:
    """A comma-separated ``--hosts`` list; every host once."""
    hosts: list[HostAddress] = []
    for part in text.split(","):
        if not part.strip():
            raise _bad_host(text, "an empty entry between commas")
        host = parse_host(part, default_port)
        if host in hosts:
            raise UserError(f"host {host.label} is listed twice in {text!r}")
        hosts.append(host)
    return hosts


def hosts_by_fio_key(hosts: Iterable[HostAddress]) -> dict[tuple[str, int], HostAddress]:
    """Find the host of a ``client_stats``/``disk_util`` entry:
    ``lookup[(entry["hostname"], entry["port"])]``."""
    return {h.fio_key(): h for h in hosts}


# ---------------------------------------------------------------- log names


def host_log_prefixes(prefix: str, hosts: Sequence[HostAddress]) -> dict[HostAddress, str]:
    """A distinct log prefix per host, for that host's job file.

    fio names client-mode logs ``<prefix>_<kind>.<job>.log.<host part>`` in
    the client's working directory; two servers on one address (different
    ports) would write the same files. ``parse.find_logs`` then reports the
    prefix, which ``host_of_log_prefix`` maps back.
    """
    return {h: f"{prefix}-h{i}" for i, h in enumerate(hosts)}


def host_of_log_prefix(
    prefix: str, hosts: Sequence[HostAddress], log_prefix: str, log_host: str | None
) -> HostAddress | None:
    """The host whose job file used ``log_prefix`` and whose logs carry the
    suffix ``log_host`` (both as ``parse.find_logs`` reports them)."""
    for host, name in host_log_prefixes(prefix, hosts).items():
        if name == log_prefix and log_host == host.host:
            return host
    return None


# ---------------------------------------------------------------- time axis

K = TypeVar("K")
T = TypeVar("T")


def host_start_ms(sample_times_ms: Sequence[int], interval_ms: int = 1000) -> int:
    """When a host's job started, from the timestamps of one of its averaged
    logs (``log_avg_msec=interval_ms``, ``log_unix_epoch=1``).

    fio writes window n (1, 2, …) at, or a few ms after, start + n × interval
    and may repeat the last window for a partial one; each sample's window
    is counted from the first sample, and the earliest bound wins.
    """
    if not sample_times_ms:
        raise ValueError("no samples")
    first = min(sample_times_ms)
    return min(t - (round((t - first) / interval_ms) + 1) * interval_ms for t in sample_times_ms)


def wallclock_offsets_ms(starts_ms: Mapping[K, int], interval_ms: int = 1000) -> dict[K, int]:
    """Per host, the milliseconds to subtract from its epoch timestamps so
    that all hosts share one per-second axis starting at the earliest start.

    A host's windows are whole seconds after its own start; a host that
    started 0.6 s after the first is shifted by one second (to the second its
    windows overlap most), one that started 0.3 s after by none. The error is
    at most half an interval, plus the hosts' clock offset (keep them in NTP
    sync).
    """
    if not starts_ms:
        return {}
    first = min(starts_ms.values())
    return {
        key: start - round((start - first) / interval_ms) * interval_ms
        for key, start in starts_ms.items()
    }


# ---------------------------------------------------------------- protocol

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
    """``call()`` in a daemon thread, waiting for it until ``deadline`` (name
    resolution has no timeout of its own); TimeoutError when it is late."""
    box: list[T] = []
    errors: list[BaseException] = []

    def run() -> None:
        try:
            box.append(call())
        except BaseException as exc:
            errors.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(max(0.0, deadline - time.monotonic()))
    if errors:
        raise errors[0]
    if not box:
        raise TimeoutError
    return box[0]


def _probe_once(host: HostAddress, version: int, deadline: float) -> ServerInfo | ProbeFailure:
    family = socket.AF_INET6 if host.is_ipv6 else socket.AF_INET  # as fio resolves it
    try:
        infos = _bounded(
            lambda: socket.getaddrinfo(host.host, host.port, family, socket.SOCK_STREAM), deadline
        )
    except TimeoutError:
        return ProbeFailure("timeout", f"resolving {host.host} took too long")
    except OSError as exc:
        return ProbeFailure("unreachable", f"cannot resolve {host.host} ({exc.strerror or exc})")
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.settimeout(max(0.001, deadline - time.monotonic()))
        try:
            sock.connect(infos[0][4])
        except TimeoutError:
            return ProbeFailure("timeout", "no answer to the connection attempt")
        except ConnectionRefusedError:
            return ProbeFailure("refused", "connection refused (nothing listens on that port)")
        except OSError as exc:
            return ProbeFailure("unreachable", exc.strerror or str(exc))
        sock.sendall(probe_command(host.host, version=version))
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


def probe_server(
    host: HostAddress, *, protocol: int, timeout_s: float
) -> ServerInfo | ProbeFailure:
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
            proc = subprocess.Popen(
                [fio, f"--client=ip:127.0.0.1,{port}", "--eta=never"],
                cwd=tmp,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,
            )
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
                if proc.poll() is None:
                    proc.kill()
                proc.wait()


_FALLBACK_PROTOCOL = 97  # fio 3.33's; only a first guess when the local one is unknown


def server_versions(
    fio: str,
    hosts: Sequence[HostAddress],
    timeout_s: float,
    *,
    local_protocol: int | None = None,
) -> dict[HostAddress, ServerInfo | ProbeFailure]:
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
    results: dict[HostAddress, ServerInfo | ProbeFailure] = {}

    def probe(host: HostAddress) -> None:
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
    results: Mapping[HostAddress, ServerInfo | ProbeFailure],
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


# ---------------------------------------------------------------- fio --server


def _die_with_parent() -> None:
    """Runs in the child between fork and exec: SIGTERM when the parent dies
    (Linux sends it when the *thread* that started the child exits)."""
    with contextlib.suppress(Exception):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def _proc_table() -> dict[int, tuple[int, int]]:
    """pid -> (parent pid, session id) of every process."""
    table: dict[int, tuple[int, int]] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue
        fields = stat[stat.rindex(b")") + 2 :].split()  # state, ppid, pgrp, session, …
        table[int(entry.name)] = (int(fields[1]), int(fields[3]))
    return table


def process_tree(pid: int, *, include_root: bool = True) -> list[int]:
    """``pid``, the processes of its session and all their descendants.

    A fio server started in its own session keeps its connection processes
    in that session even after the listener died; their job processes call
    setsid, so they are found as descendants. Pass ``include_root=False``
    when ``pid`` itself has exited (its number may belong to someone else).
    """
    if not os.path.isdir("/proc"):
        return [pid] if include_root else []
    table = _proc_table()
    children: dict[int, list[int]] = {}
    for child, (parent, _) in table.items():
        children.setdefault(parent, []).append(child)
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


class FioServer:
    """A ``fio --server`` process bound to one address, in its own working
    directory (where relative job filenames land).

    Never listens on all addresses (fio's server has no authentication)
    unless ``allow_any`` is set. ``log_path``: where fio's stdout/stderr go
    (None: inherited, e.g. for ``iorig agent`` in a terminal).
    """

    def __init__(
        self,
        fio: str,
        address: HostAddress,
        workdir: Path,
        *,
        allow_any: bool = False,
        log_path: Path | None = None,
    ) -> None:
        if address.host in _ANY_ADDRESSES and not allow_any:
            shown = address.host or "all addresses"
            raise UserError(
                f"refusing to start a fio server listening on {shown}: fio's server has no "
                "authentication and would accept jobs from anyone who can reach this machine",
                hint="bind it to the address of a trusted interface (--bind ADDRESS); "
                "pass --bind 0.0.0.0 explicitly only on an isolated network",
            )
        self.fio = fio
        self.address = address
        self.workdir = workdir
        self.log_path = log_path
        self._proc: subprocess.Popen | None = None
        self._lock = threading.Lock()

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else None

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def command(self) -> list[str]:
        address = self.address
        if address.host == "":  # fio's own spelling of "any"
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
        problem = port_available(self.address)
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
        self.workdir.mkdir(parents=True, exist_ok=True)
        log = open(self.log_path, "wb") if self.log_path else None  # noqa: SIM115
        try:
            self._proc = subprocess.Popen(
                self.command(),
                cwd=self.workdir,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT if log else None,
                start_new_session=True,  # a terminal's Ctrl-C reaches iorig, not fio
                preexec_fn=_die_with_parent,
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
                return
            if time.monotonic() > deadline:
                self.stop()
                raise UserError(f"fio --server on {where} did not listen within {timeout_s:g} s")
            time.sleep(0.02)

    def _ready(self) -> bool:
        assert self._proc is not None
        listens = _listens(self._proc.pid, self.address.port)
        if listens is not None:
            return listens
        host = self.address.host  # no /proc: connect (fio shrugs off an empty connection)
        if host in _ANY_ADDRESSES:
            host = "::1" if self.address.is_ipv6 else "127.0.0.1"
        try:
            socket.create_connection((host, self.address.port), timeout=0.2).close()
            return True
        except OSError:
            return False

    def stop(self, timeout_s: float = 5.0) -> None:
        """Stop the server and every process it forked (sessions and jobs):
        SIGTERM, then SIGKILL whatever is left after ``timeout_s``."""
        with self._lock:
            proc = self._proc
            if proc is None:
                return
            # Snapshot first: once the listener is gone its children look orphaned.
            others = [p for p in process_tree(proc.pid, include_root=False) if p != proc.pid]
            for sig in (signal.SIGTERM, signal.SIGKILL):
                others = [p for p in others if _alive(p)]
                if proc.poll() is None:
                    with contextlib.suppress(ProcessLookupError):
                        proc.send_signal(sig)  # Popen never signals a reaped pid
                for pid in others:
                    with contextlib.suppress(ProcessLookupError, PermissionError):
                        os.kill(pid, sig)
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
