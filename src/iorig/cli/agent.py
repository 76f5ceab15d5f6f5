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
from iorig.fio.hosts import DEFAULT_PORT, is_any_address, parse_host
from iorig.fio.server import FioServer


@app.command()
def agent(
    bind: Annotated[
        str,
        typer.Option(
            help="address to listen on; 0.0.0.0 only explicitly (fio's server has no "
            "authentication)"
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
) -> None:
    """Serve fio jobs for `iorig run --hosts` on this machine until stopped."""
    fio_path = runner.find_fio(fio)
    version = runner.fio_version(fio_path)
    # every spelling of "all interfaces" (0, ::ffff:0.0.0.0, [::] …) is that,
    # named plainly and warned about like 0.0.0.0
    everywhere = is_any_address(bind)
    if everywhere:
        bind = "::" if ":" in bind else "0.0.0.0"
    text = f"[{bind}]:{port}" if ":" in bind else f"{bind}:{port}"
    address = parse_host(text)
    server = FioServer(fio_path, address, directory.resolve(), allow_any=everywhere)
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
        if everywhere:
            console.print(
                "[yellow]listening on every address: anyone who reaches this port can run fio "
                "jobs here (fio's server has no authentication)[/]"
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
