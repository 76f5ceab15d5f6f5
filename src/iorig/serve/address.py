"""Where iorig's own servers listen: ``serve`` and ``--metrics``."""

from __future__ import annotations

import ipaddress
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
