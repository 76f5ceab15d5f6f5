"""The hosts of a multi-host run: parsing ``--hosts`` entries into fio
servers' addresses (``host:port``, an ``iorig agent`` without
authentication), hosts reached over SSH (``ssh://[user@]host[:port]``) or
authenticated agents reached over TLS (``tls://host[:port]``), and the
forms fio, ssh and iorig's results use for them."""

from __future__ import annotations

import ipaddress
import re
import socket
from dataclasses import dataclass

from iorig.errors import UserError

DEFAULT_PORT = 8765
LOCAL_HOST = "local"  # reserved: this machine, never a server address

_HOSTNAME_LABEL = re.compile(r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$")
ANY_ADDRESSES = ("", "0.0.0.0", "::")  # how fio spells "listen on every address"


IpAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


def _bare(host: str) -> str:
    """``host`` without spaces and IPv6 brackets."""
    text = host.strip()
    if text.startswith("[") and text.endswith("]"):
        text = text[1:-1].strip()
    return text


def _unmapped(address: IpAddress) -> IpAddress:
    """An IPv4-mapped IPv6 address as the IPv4 address it carries."""
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


def is_any_address(host: str) -> bool:
    """True for every spelling of "all interfaces": empty, 0.0.0.0, 0, 0x0,
    ::, [::], 0:0:0:0:0:0:0:0, ::ffff:0.0.0.0 (IPv4 through an IPv6 socket)…"""
    text = _bare(host)
    if not text:
        return True
    try:
        address: IpAddress = ipaddress.ip_address(text)
    except ValueError:
        try:  # what the C library takes as IPv4 too: 0, 0x0, 0.0, 00.0.0.0
            address = ipaddress.IPv4Address(socket.inet_aton(text))
        except OSError:
            return False
    return _unmapped(address).is_unspecified


def is_loopback(host: str) -> bool:
    """True for an address only this machine reaches: 127.0.0.0/8, ::1, an
    IPv4-mapped loopback, or the name ``localhost``. Any other name is not:
    it may resolve to an address other machines reach."""
    text = _bare(host)
    if text.lower() == "localhost":
        return True
    try:
        return _unmapped(ipaddress.ip_address(text)).is_loopback
    except ValueError:
        return False


@dataclass(frozen=True)
class HostAddress:
    """A fio server: a host name or IP address (IPv6 without brackets) and a port."""

    host: str
    port: int = DEFAULT_PORT

    @property
    def is_ipv6(self) -> bool:
        return ":" in self.host

    @property
    def aliases(self) -> tuple[str, ...]:
        """The names ``--target HOST=PATH`` and events may use for it."""
        return (self.label, self.host)

    @property
    def label(self) -> str:
        """How results name this host: ``127.0.0.2:8765``, ``[::1]:8765``."""
        host = f"[{self.host}]" if self.is_ipv6 else self.host
        return f"{host}:{self.port}"

    def fio_client_arg(self) -> str:
        """The value of ``fio --client=`` (and ``--server=``) for this host."""
        return f"{'ip6' if self.is_ipv6 else 'ip'}:{self.host},{self.port}"

    def __str__(self) -> str:
        return self.label


SSH_SCHEME = "ssh://"
# a login name as ssh passes it on: never an option (no leading '-'), no spaces
_USER = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,31}$")


@dataclass(frozen=True)
class SshHost:
    """A host iorig reaches over SSH: a host name or IP address (IPv6 without
    brackets), an optional login name and an optional SSH port (None: the
    user's ssh configuration decides both)."""

    host: str
    user: str | None = None
    port: int | None = None

    @property
    def label(self) -> str:
        """How results name this host: ``ssh://db1``, ``ssh://root@[::1]:2222``."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        user = f"{self.user}@" if self.user else ""
        port = f":{self.port}" if self.port else ""
        return f"{SSH_SCHEME}{user}{host}{port}"

    @property
    def aliases(self) -> tuple[str, ...]:
        """The names ``--target HOST=PATH`` and events may use for it."""
        return (self.label, self.label.removeprefix(SSH_SCHEME), self.host)

    def __str__(self) -> str:
        return self.label


TLS_SCHEME = "tls://"


@dataclass(frozen=True)
class TlsHost:
    """An ``iorig agent`` with authentication (a token or certificates),
    reached over TLS at a host name or IP address (IPv6 without brackets)."""

    host: str
    port: int = DEFAULT_PORT

    @property
    def address(self) -> HostAddress:
        return HostAddress(self.host, self.port)

    @property
    def label(self) -> str:
        """How results name this host: ``tls://db1:8765``, ``tls://[::1]:8765``."""
        return f"{TLS_SCHEME}{self.address.label}"

    @property
    def aliases(self) -> tuple[str, ...]:
        """The names ``--target HOST=PATH`` and events may use for it."""
        return (self.label, self.address.label, self.host)

    def __str__(self) -> str:
        return self.label


HostSpec = HostAddress | SshHost | TlsHost


@dataclass(frozen=True)
class SocketEndpoint:
    """A fio server reached through a Unix socket on this machine, in a
    directory only iorig's user can enter: a host's SSH forwarding or an
    authenticated agent's relay. fio names it by the path alone."""

    path: str

    @property
    def label(self) -> str:
        return self.path

    def fio_client_arg(self) -> str:
        return f"sock:{self.path}"

    def __str__(self) -> str:
        return self.label


Endpoint = HostAddress | SocketEndpoint  # where fio's client connects


def _bad_host(text: str, why: str) -> UserError:
    return UserError(
        f"{text!r:.120} is not a host: {why}",
        hint="write hosts as ssh://[USER@]NAME[:PORT], an authenticated agent's "
        "tls://NAME[:PORT], or a loopback agent's NAME, NAME:PORT, 1.2.3.4:PORT or "
        "[IPv6]:PORT, separated by commas",
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


def _parse_ssh(raw: str, text: str) -> SshHost:
    """``ssh://[user@]host[:port]``: every part checked, so nothing in it can
    reach ssh as an option (``-oProxyCommand=…``) or as a second argument."""
    rest = text[len(SSH_SCHEME) :]
    if not rest:
        raise _bad_host(raw, "no host after ssh://")
    if any(c in rest for c in "/?#,;'\"$`\\"):
        raise _bad_host(raw, "an ssh:// host is [USER@]HOST[:PORT], without a path or quotes")
    user = None
    if "@" in rest:
        user, _, rest = rest.rpartition("@")
        if not _USER.match(user):
            raise _bad_host(
                raw, "a user name has letters, digits, '_', '.' and '-' and does not start with '-'"
            )
    address = parse_host(rest, default_port=0)
    return SshHost(address.host, user, address.port or None)


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


def parse_entry(text: str, default_port: int = DEFAULT_PORT) -> HostSpec:
    """One ``--hosts`` entry: ``ssh://[user@]host[:port]``,
    ``tls://host[:port]`` or an unauthenticated agent's address."""
    stripped = text.strip()
    if any(c.isspace() or not c.isprintable() for c in stripped):
        raise _bad_host(text, "it contains spaces or control characters")
    if stripped.lower().startswith(SSH_SCHEME):
        return _parse_ssh(text, SSH_SCHEME + stripped[len(SSH_SCHEME) :])
    if stripped.lower().startswith(TLS_SCHEME):
        rest = stripped[len(TLS_SCHEME) :]
        if not rest or any(c in rest for c in "@/?#"):
            raise _bad_host(text, "an authenticated agent is tls://HOST[:PORT]")
        address = parse_host(rest, default_port)
        return TlsHost(address.host, address.port)
    if "://" in stripped:
        raise _bad_host(text, "the schemes are ssh:// and tls://")
    return parse_host(stripped, default_port)


# One fio client drives every host over its own connection: far past the
# largest rig a run is meant for, and small enough that a list cannot exhaust
# the machine (a 100,000-line hosts file ran for minutes before this limit).
MAX_HOSTS = 256


def too_many_hosts(where: str) -> UserError:
    return UserError(
        f"{where} lists more than {MAX_HOSTS} hosts",
        hint=f"one run drives at most {MAX_HOSTS} hosts; split the hosts over several runs",
    )


def parse_hosts(text: str, default_port: int = DEFAULT_PORT) -> list[HostSpec]:
    """A comma-separated ``--hosts`` list; every host once."""
    if not text.strip():
        raise _bad_host(text, "it names no host (leave --hosts out to run on this machine)")
    parts = text.split(",")
    if len(parts) > MAX_HOSTS:
        raise too_many_hosts("--hosts")
    hosts: list[HostSpec] = []
    for part in parts:
        if not part.strip():
            raise _bad_host(text, "an empty entry between commas")
        host = parse_entry(part, default_port)
        if host in hosts:
            raise UserError(f"host {host.label} is listed twice in {text!r}")
        hosts.append(host)
    return hosts
