"""``iorig serve``: the results database and its running runs in a browser
(docs/guide/live.md)."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from iorig.cli.agent import server_auth
from iorig.cli.common import app, console
from iorig.cli.options import linger_duration

SERVE_PORT = 8642


@app.command()
def serve(
    ctx: typer.Context,
    address: Annotated[
        str,
        typer.Option(
            help="where to listen, HOST:PORT or PORT (0: any free port); beyond loopback "
            "only with --token-file or --cert/--key/--client-ca, as for `iorig agent`"
        ),
    ] = f"127.0.0.1:{SERVE_PORT}",
    token_file: Annotated[
        Path | None,
        typer.Option(
            help="the shared token (`iorig agent token`): HTTPS, and a browser opens a page "
            "once with ?token=TOKEN"
        ),
    ] = None,
    cert: Annotated[Path | None, typer.Option(help="mutual TLS: this server's certificate")] = None,
    key: Annotated[Path | None, typer.Option(help="mutual TLS: its key (PEM)")] = None,
    client_ca: Annotated[
        Path | None,
        typer.Option(help="mutual TLS: the authority whose certificates browsers must show"),
    ] = None,
    metrics: Annotated[
        str | None,
        typer.Option(
            "--metrics",
            metavar="ADDRESS",
            help="also serve the running runs' live figures to Prometheus at ADDRESS (loopback)",
        ),
    ] = None,
    metrics_linger: Annotated[
        str,
        typer.Option(
            "--metrics-linger",
            metavar="DURATION",
            help="keep serving an ended run's final figures until every scraper has them, at "
            "most this long (0: drop them at once)",
        ),
    ] = "30s",
    allow_host: Annotated[
        list[str] | None,
        typer.Option(
            "--allow-host",
            metavar="NAME",
            help="a host name browsers may use for this server besides its IP address, "
            "localhost and this machine's name (repeat for more); others are refused, so no "
            "other site's page can read it through DNS rebinding",
        ),
    ] = None,
) -> None:
    """A read-only web view of the results database: runs, reports, comparisons,
    and running runs live."""
    import asyncio

    from iorig.serve.address import allowed_names, parse_address  # aiohttp: when asked for
    from iorig.serve.server import serve_forever

    auth = server_auth(token_file, cert, key, client_ca)
    where = parse_address(address, what="--address", default_port=SERVE_PORT, anywhere=bool(auth))
    metrics_at = parse_address(metrics) if metrics is not None else None
    linger_s = linger_duration(metrics_linger)
    names = allowed_names(allow_host or [])
    db: Path = ctx.obj

    def listening(url: str, metrics_url: str | None) -> None:
        console.print(f"iorig serve: {escape(url)} (Ctrl-C stops it)")
        if metrics_url:
            console.print(f"metrics at {escape(metrics_url)}")

    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(serve_forever(db, where, auth, metrics_at, listening, linger_s, names=names))
