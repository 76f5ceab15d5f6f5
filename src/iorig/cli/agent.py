"""``iorig agent``: a fio server for iorig's multi-host runs, in the foreground."""

from __future__ import annotations

import signal
import threading
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from iorig.cli.common import FioOpt, app, console
from iorig.errors import UserError
from iorig.fio import runner
from iorig.fio.control import control_port
from iorig.fio.hosts import DEFAULT_PORT, is_any_address, is_loopback, parse_host
from iorig.fio.server import FioServer, refuse_unauthenticated


def _warn_connection(peer: str) -> None:
    """An agent beyond loopback says who reached its control port, every time."""
    console.print(f"[yellow]warning: unauthenticated control connection from {escape(peer)}[/]")


@app.command()
def agent(
    bind: Annotated[
        str,
        typer.Option(
            help="address to listen on: loopback (reach it through an SSH tunnel); any "
            "other only with --insecure-no-auth (fio's server has no authentication)"
        ),
    ] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=1, max=65535, help="TCP port")] = DEFAULT_PORT,
    directory: Annotated[
        Path,
        typer.Option(
            "--dir", help="working directory: where relative targets (the default) are written"
        ),
    ] = Path("."),
    fio: FioOpt = None,
    insecure_no_auth: Annotated[
        bool,
        typer.Option(
            "--insecure-no-auth",
            help="listen beyond loopback without authentication: anyone who reaches the "
            "ports can run fio jobs, and commands, as this user (an isolated test network only)",
        ),
    ] = False,
) -> None:
    """Serve fio jobs for `iorig run --hosts` on this machine until stopped."""
    # every spelling of "all interfaces" (0, ::ffff:0.0.0.0, [::] …) is that,
    # named plainly
    if is_any_address(bind):
        bind = "::" if ":" in bind else "0.0.0.0"
    text = f"[{bind}]:{port}" if ":" in bind else f"{bind}:{port}"
    address = parse_host(text)
    refuse_unauthenticated(address, insecure_no_auth=insecure_no_auth)  # before fio runs
    fio_path = runner.find_fio(fio)
    version = runner.fio_version(fio_path)
    exposed = not is_loopback(address.host)  # allowed by --insecure-no-auth: warn
    watch = _warn_connection if exposed else None
    server = FioServer(fio_path, address, directory.resolve(), insecure_no_auth=insecure_no_auth,
                       on_control=watch)  # fmt: skip
    stop = threading.Event()
    previous = {s: signal.signal(s, lambda *_: stop.set()) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        server.start()
        console.print(
            f"iorig agent: {escape(version)} serving on {escape(address.label)}, working "
            f"directory {escape(str(directory.resolve()))}"
        )
        if server.control_problem:
            console.print(f"[yellow]{escape(server.control_problem)}[/]")
        if exposed:
            console.print(
                f"[yellow]warning: no authentication on {escape(address.label)} "
                "(--insecure-no-auth): anyone who reaches this port or its control port "
                f"{control_port(address.port)} can run fio jobs and commands here as this "
                "user, and freeze this host's fio; use it on an isolated test network only[/]"
            )
        console.print(f"use it with: iorig run … --hosts {escape(address.label)}; stop with Ctrl-C")
        while not stop.wait(0.5):
            if not server.running:
                raise UserError("the fio server exited unexpectedly")
    finally:
        server.stop()
        for s, handler in previous.items():
            signal.signal(s, handler)
    console.print("iorig agent: stopped")
