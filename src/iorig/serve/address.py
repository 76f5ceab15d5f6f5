"""Where iorig's own servers listen: ``serve`` and ``--metrics``."""

from __future__ import annotations

import ipaddress
import re
import socket
from dataclasses import dataclass

from iorig.errors import UserError
from iorig.fio.hosts import is_loopback

METRICS_PORT = 9464  # OpenTelemetry's Prometheus exporter's; free on most machines


@dataclass(frozen=True)
class Address:
    host: str
    port: int

    def __str__(self) -> str:
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"


def parse_address(
    text: str, *, what: str = "--metrics", default_port: int = METRICS_PORT, anywhere: bool = False
) -> Address:
    """``PORT``, ``HOST:PORT`` or ``[V6]:PORT`` (port 0: any free one). The
    host must be a loopback address unless ``anywhere`` (what listens there
    authenticates its clients)."""
    given = text.strip()
    host, _, port_text = given.rpartition(":") if ":" in given else ("127.0.0.1", "", given)
    host = host.strip("[]") or "127.0.0.1"
    if host == "localhost":
        host = "127.0.0.1"
    try:
        port = int(port_text)
        if not 0 <= port < 65536:
            raise ValueError
    except ValueError:
        raise UserError(
            f"{what} {text!r}: the port must be a number from 0 (any free one) to 65535",
            hint=f"e.g. {what} 127.0.0.1:{default_port}",
        ) from None
    try:
        ipaddress.ip_address(host)
    except ValueError:
        raise UserError(
            f"{what} {text!r}: {host!r} is not an IP address",
            hint=f"give a loopback address, e.g. {what} 127.0.0.1:{default_port}",
        ) from None
    if not is_loopback(host) and not anywhere:
        raise UserError(
            f"{what} {text!r}: it has no authentication, so it listens on loopback only",
            hint="reach it from this machine (a Prometheus here, or an SSH tunnel: "
            f"ssh -L {port}:127.0.0.1:{port} …)",
        )
    return Address(host, port)


def host_name(header: str) -> str:
    """The host of a Host or Origin header's value, without port or brackets."""
    text = header.strip().lower()
    text = text.split("://", 1)[-1].split("/", 1)[0]  # an Origin: scheme://host[:port]
    if text.startswith("["):
        return text[1 : text.find("]")] if "]" in text else text[1:]
    return text.rsplit(":", 1)[0] if text.count(":") == 1 else text


def host_allowed(header: str | None, names: frozenset[str] = frozenset()) -> bool:
    """Whether a request's Host (or Origin) names this server as a browser
    on this machine, a scraper or a user's own name for it would: an IP
    address, ``localhost`` or one of ``names``. A page that reached a
    loopback server by DNS rebinding names its own domain, and is refused
    (no header: not a browser's request, which always has one)."""
    if header is None:
        return True
    host = host_name(header).rstrip(".")
    try:
        ipaddress.ip_address(host)
        return True
    except ValueError:
        return host == "localhost" or host in names


_NAME = re.compile(r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?(\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)*$")


def allowed_names(given: list[str]) -> frozenset[str]:
    """``--allow-host`` names, checked, and this machine's own names."""
    names = set()
    for name in given:
        text = name.strip().lower().rstrip(".")
        if not _NAME.match(text) or len(text) > 253:
            raise UserError(
                f"--allow-host {name!r}: not a host name",
                hint="give a name as browsers use it, e.g. --allow-host lab-1.example.com",
            )
        names.add(text)
    for own in (socket.gethostname(), socket.getfqdn()):
        if own and _NAME.match(own.lower()):
            names.add(own.lower())
    return frozenset(names)
