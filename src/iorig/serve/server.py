"""Running ``iorig serve``: the web app on its address (TLS and the token
or client certificates beyond loopback), and its metrics endpoint fed from
the live file."""

from __future__ import annotations

import asyncio
import base64
import contextlib
from collections.abc import Callable
from pathlib import Path

from aiohttp import web

from iorig.errors import UserError
from iorig.fio import agentauth
from iorig.serve.address import Address
from iorig.serve.app import make_app
from iorig.serve.metrics import LiveMetrics, MetricsEndpoint
from iorig.store.live import LiveStore, LiveUnwritable

METRICS_POLL_S = 1.0


async def serve_forever(
    db: Path,
    where: Address,
    auth: agentauth.Auth | None,
    metrics_at: Address | None,
    listening: Callable[[str, str | None], None],
) -> None:
    """Serve until cancelled (Ctrl-C); ``listening`` is told the URLs."""
    context = agentauth.agent_context(auth)[0] if auth is not None else None
    token = None
    if isinstance(auth, agentauth.TokenAuth):  # as the token file writes it
        token = base64.urlsafe_b64encode(auth.token).rstrip(b"=")
    runner = web.AppRunner(make_app(db, token=token), access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, where.host, where.port, ssl_context=context)
    try:
        await site.start()
    except OSError as exc:
        await runner.cleanup()
        raise UserError(
            f"iorig serve: cannot listen on {where} ({exc.strerror or exc})",
            hint="choose another --address, or 0 as the port for any free one",
        ) from None
    host, port = runner.addresses[0][:2]
    scheme = "https" if context is not None else "http"
    url = f"{scheme}://{Address(host, port)}/"
    feeding = None
    endpoint = None
    try:
        if metrics_at is not None:
            exported = LiveMetrics()
            endpoint = MetricsEndpoint(metrics_at, exported)
            feeding = asyncio.create_task(_feed_metrics(db, exported))
        listening(url, f"http://{endpoint.address}/metrics" if endpoint else None)
        await asyncio.Event().wait()  # until cancelled
    finally:
        if feeding is not None:
            feeding.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await feeding
        if endpoint is not None:
            endpoint.close()
        await runner.cleanup()


async def _feed_metrics(db: Path, exported: LiveMetrics) -> None:
    """The live file's new seconds, once a second, into ``exported``."""
    after: dict[str, int] = {}

    def poll(live: LiveStore) -> None:
        runs = live.runs()
        for run_id in runs:
            seconds = live.seconds_after(run_id, after.get(run_id, 0))
            if seconds:
                after[run_id] = seconds[-1][0]
                exported.put_seconds(run_id, [s for _, s in seconds])
            if (phase := live.phase(run_id)) is not None:
                exported.put_phase(run_id, phase)
        exported.forget(set(runs))

    live = None
    try:
        while True:
            try:
                if live is None:
                    live = await asyncio.to_thread(LiveStore, db)
                await asyncio.to_thread(poll, live)
            except LiveUnwritable:
                live = None
            await asyncio.sleep(METRICS_POLL_S)
    finally:
        if live is not None:
            live.close()
