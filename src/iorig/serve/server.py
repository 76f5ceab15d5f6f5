"""Running ``iorig serve``: the web app on its address (TLS and the token
or client certificates beyond loopback), and its metrics endpoint fed from
the live file."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import errno
import resource
import sqlite3
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

from aiohttp import web

from iorig.errors import UserError
from iorig.fio import agentauth
from iorig.serve.address import Address
from iorig.serve.app import make_app
from iorig.serve.metrics import LiveMetrics, MetricsEndpoint, Scrapes
from iorig.store.live import LiveStore, LiveUnwritable

METRICS_POLL_S = 1.0
Middleware = Callable[..., Awaitable[web.StreamResponse]]


async def serve_forever(
    db: Path,
    where: Address,
    auth: agentauth.Auth | None,
    metrics_at: Address | None,
    listening: Callable[[str, str | None], None],
    metrics_linger_s: float = 30.0,
    *,
    names: frozenset[str] = frozenset(),
) -> None:
    """Serve until cancelled (Ctrl-C); ``listening`` is told the URLs;
    an ended run's metrics stay until scraped, at most ``metrics_linger_s``;
    ``names``: host names requests may use besides IP addresses and localhost."""
    context = agentauth.agent_context(auth)[0] if auth is not None else None
    token = None
    if isinstance(auth, agentauth.TokenAuth):  # as the token file writes it
        token = base64.urlsafe_b64encode(auth.token).rstrip(b"=")
    app = make_app(db, token=token, names=names)
    busy: set[asyncio.BaseTransport] = set()
    app.middlewares.append(_marking_busy(busy))
    runner = web.AppRunner(app, access_log=None)
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
    assert runner.server is not None
    asyncio.get_running_loop().set_exception_handler(_out_of_descriptors_is_shed)
    shedding = asyncio.create_task(_shed_idle(runner.server, busy, _connection_budget()))
    try:
        if metrics_at is not None:
            exported = LiveMetrics()
            endpoint = MetricsEndpoint(metrics_at, exported)
            feeding = asyncio.create_task(
                _feed_metrics(db, exported, endpoint.scrapes, metrics_linger_s)
            )
        listening(url, f"http://{endpoint.address}/metrics" if endpoint else None)
        await asyncio.Event().wait()  # until cancelled
    finally:
        shedding.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await shedding
        if feeding is not None:
            feeding.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await feeding
        if endpoint is not None:
            endpoint.close()
        await runner.cleanup()


# Connections that hold a descriptor and ask nothing must not starve the rest
# (issue 48): past the budget, the oldest idle ones are closed.
FD_RESERVE = 64  # descriptors kept for the database, the live file, metrics, TLS
SHED_EVERY_S = 0.25


def _connection_budget() -> int:
    """How many connections serve keeps open: its descriptor limit less a
    reserve for everything else it opens."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    limit = 1 << 16 if soft == resource.RLIM_INFINITY else soft
    return max(limit - FD_RESERVE, 16)


def _marking_busy(busy: set[asyncio.BaseTransport]) -> Middleware:
    """A middleware noting the connections a request is being answered on."""

    @web.middleware
    async def middleware(
        request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
    ) -> web.StreamResponse:
        transport = request.transport
        if transport is None:
            return await handler(request)
        busy.add(transport)
        try:
            return await handler(request)
        finally:
            busy.discard(transport)

    return middleware


def _out_of_descriptors_is_shed(loop: asyncio.AbstractEventLoop, context: dict) -> None:
    """asyncio's accept loop out of descriptors waits a second and accepts
    again, by when ``_shed_idle`` has made room: nothing to print."""
    problem = context.get("exception")
    if isinstance(problem, OSError) and problem.errno in (errno.EMFILE, errno.ENFILE):
        return
    loop.default_exception_handler(context)


async def _shed_idle(server: web.Server, busy: set[asyncio.BaseTransport], budget: int) -> None:
    """Close the oldest idle connections whenever more than ``budget`` are
    open, down to nine tenths of it (an event stream being answered is not
    idle and is kept)."""
    while True:
        await asyncio.sleep(SHED_EVERY_S)
        open_now = server.connections  # oldest first
        if len(open_now) <= budget:
            continue
        excess = len(open_now) - budget * 9 // 10
        for handler in open_now:
            if excess <= 0:
                break
            transport = handler.transport
            if transport is not None and transport not in busy:
                transport.abort()
                excess -= 1


async def _feed_metrics(db: Path, exported: LiveMetrics, scrapes: Scrapes, linger_s: float) -> None:
    """The live file's runs, once a second, into ``exported``: each ended
    run's final figures until every scraper has scraped them, at most
    ``linger_s`` (``MetricFeed``)."""
    feed = MetricFeed(exported, scrapes, linger_s)
    live = None
    try:
        while True:
            try:
                if live is None:
                    live = await asyncio.to_thread(LiveStore, db)
                await asyncio.to_thread(feed.poll, live)
            except LiveUnwritable:
                live = None
            except sqlite3.Error:  # a run's write held the file past the wait: next time
                pass
            await asyncio.sleep(METRICS_POLL_S)
    finally:
        if live is not None:
            live.close()


class MetricFeed:
    """What ``serve --metrics`` exports of the runs in the live file: their
    live seconds, phases and finished phases' totals; a run that ended
    stays, on its final figures, until every scraper has been answered
    after serve saw it end (and at least one), at most ``linger_s``."""

    def __init__(self, exported: LiveMetrics, scrapes: Scrapes, linger_s: float) -> None:
        self.exported = exported
        self.scrapes = scrapes
        self.linger_s = linger_s
        self._after: dict[str, int] = {}  # each run's last live second read
        self._ended: dict[str, float] = {}  # monotonic: when the run's end was seen
        self._done: set[str] = set()  # ended and scraped: no longer exported

    def poll(self, live: LiveStore) -> None:
        runs = live.metric_runs()
        for run_id, (info, ended_at) in runs.items():
            if run_id in self._done:
                continue
            self.exported.put_run(run_id, info)
            seconds = live.seconds_after(run_id, self._after.get(run_id, 0))
            if seconds:
                self._after[run_id] = seconds[-1][0]
                self.exported.put_seconds(run_id, [s for _, s in seconds])
            if (phase := live.phase(run_id)) is not None:
                self.exported.put_phase(run_id, phase)
            # read after the seconds: a phase that ended in between has them
            self.exported.put_totals(run_id, live.totals(run_id), aborted=False)
            if ended_at is not None and run_id not in self._ended:
                self.exported.drop_run(run_id)
                self._ended[run_id] = time.monotonic()
        now = time.monotonic()
        for run_id, seen in list(self._ended.items()):
            if self.scrapes.everyone_since(seen) or now - seen >= self.linger_s:
                self._done.add(run_id)
                del self._ended[run_id]
        # a run the file no longer holds (ended long ago) needs no memory
        self._done &= set(runs)
        self._after = {r: n for r, n in self._after.items() if r in runs}
        self.exported.forget(set(runs) - self._done)
