"""``iorig serve``: a read-only web view of a results database and of the
runs going into it (docs/guide/live.md).

    /                        runs, newest first, filtered by the query
    /runs/ID                 a stored run: its HTML report; a running one: the live page
    /runs/ID/live            the live figures as server-sent events
    /compare?run=A&run=B     the runs compared, as ``iorig compare`` compares them
    /static/…                the live page's script and style

aiohttp serves it: one asyncio process, server-sent events without another
server, TLS from the standard library's context. Every page is made here or
by the report writer; nothing is fetched from elsewhere (a strict
Content-Security-Policy on every answer). Database work runs in threads:
each request opens its own connection.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import functools
import hmac
import importlib.metadata
import json
import secrets
import tempfile
from collections.abc import Awaitable, Callable
from dataclasses import asdict
from pathlib import Path

import jinja2
from aiohttp import web

from iorig.analyze.analysis import analyse, compare
from iorig.analyze.compare import shared_limit
from iorig.errors import UserError
from iorig.model import Metric, RunStatus, series_stats
from iorig.model.live import LiveSecond
from iorig.report.exporters import render
from iorig.report.options import Limit, RenderOptions
from iorig.report.tables.metrics import metric
from iorig.report.writers.html import HtmlExporter
from iorig.serve.address import host_allowed
from iorig.store import Store, export_run
from iorig.store.live import LiveStore, LiveUnwritable

STATIC = Path(__file__).with_name("static")
TEMPLATES = Path(__file__).with_name("templates")
POLL_S = 0.5  # how often a live page's stream looks for new seconds
LIST_LIMIT = 200
COOKIE = "iorig_session"
# pages made here: their own script and style only, and the live stream
PAGE_CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
)
# the report writer's pages carry their own policy (their scripts by hash);
# what it leaves open is closed here
REPORT_CSP = "form-action 'self'; base-uri 'none'; frame-ancestors 'none'; connect-src 'none'"
THRESHOLD, CONFIDENCE = 0.02, 0.95  # iorig compare's defaults
RUN_ID_CHARS = frozenset("0123456789abcdefghijklmnopqrstuvwxyz-")

_env = jinja2.Environment(
    loader=jinja2.FileSystemLoader(TEMPLATES),
    autoescape=True,  # labels, scenario names and errors are user text
    undefined=jinja2.StrictUndefined,
)


def _when(ts: float | None) -> str:
    return dt.datetime.fromtimestamp(ts).strftime("%Y-%m-%d %H:%M:%S") if ts else "-"


def _day(text: str, name: str) -> float | None:
    if not text:
        return None
    try:
        return dt.datetime.strptime(text, "%Y-%m-%d").timestamp()
    except ValueError:
        raise web.HTTPBadRequest(text=f"{name}: a date as YYYY-MM-DD, not {text[:40]!r}") from None


def _is_run_id(text: str) -> bool:
    return 0 < len(text) <= 64 and set(text) <= RUN_ID_CHARS


def _run_id(request: web.Request) -> str:
    run_id = request.match_info["run_id"]
    if not _is_run_id(run_id):
        raise web.HTTPNotFound(text="no such run")
    return run_id


class Views:
    """The handlers, over the database at ``db``."""

    def __init__(self, db: Path) -> None:
        self.db = db

    def _store(self) -> Store:
        try:
            store = Store(self.db)
        except UserError as exc:
            raise web.HTTPServiceUnavailable(text=str(exc)) from None
        store.reap_stale()  # a killed run is not shown as running
        return store

    # ------------------------------------------------------------ pages

    async def runs(self, request: web.Request) -> web.Response:
        q = request.query
        chosen = {
            k: q.get(k, "")[:200]
            for k in ("label", "scenario", "target", "status", "since", "until")
        }
        # runs ticked for a comparison when the list opens (a run page's
        # "compare with other runs"); ids only, as the form sends them
        picked = {p for p in q.getall("pick", []) if _is_run_id(p)}
        if chosen["status"] and chosen["status"] not in {s.value for s in RunStatus}:
            raise web.HTTPBadRequest(text=f"status: one of {', '.join(RunStatus)}")
        since, until = _day(chosen["since"], "since"), _day(chosen["until"], "until")

        def work() -> list[dict]:
            with self._store() as store:
                found = store.find_runs(
                    label=chosen["label"] or None,
                    scenario=chosen["scenario"] or None,
                    target=chosen["target"] or None,
                    status=chosen["status"] or None,
                    since=since,
                    until=until + 86400 if until is not None else None,
                    limit=LIST_LIMIT,
                )
                headlines = {r.id: store.headline_series(r.id) for r in found}
            return [
                {
                    "id": r.id,
                    "label": r.label or "",
                    "scenario": r.scenario,
                    "title": r.title,
                    "status": str(r.status),
                    "started": _when(r.started_at),
                    "started_at": r.started_at or 0,
                    "hosts": ", ".join(r.hosts) or "this machine",
                    "target": ", ".join(t["given"] for t in r.targets),
                    # each measured phase's median second, as `iorig runs` shows
                    "figures": ", ".join(
                        f"{name} {metric(unit).with_unit(series_stats(values).median)}"
                        for name, unit, values in headlines[r.id]
                    ),
                }
                for r in found
            ]

        rows = await asyncio.to_thread(work)
        return _page(
            "runs.html.j2",
            rows=rows,
            chosen=chosen,
            picked=picked,
            statuses=[s.value for s in RunStatus],
            limit=LIST_LIMIT,
        )

    async def run(self, request: web.Request) -> web.Response:
        run_id = _run_id(request)

        def work() -> tuple[str, str]:
            with self._store() as store:
                if store.run_status(run_id) is None:
                    raise web.HTTPNotFound(text=f"no run {run_id} in {self.db}")
                stored = store.load_run(run_id)
            if stored.run.status is RunStatus.RUNNING:
                return "live", stored.run.title
            return "report", HtmlExporter().run(
                analyse(stored), RenderOptions(plotly_src=PLOTLY_SRC)
            )

        kind, body = await asyncio.to_thread(work)
        if kind == "live":
            return _page("live.html.j2", run_id=run_id, title=body)
        return _report(body, downloads=run_id)

    async def download(self, request: web.Request) -> web.Response:
        """A stored run as a file: what `iorig show --json`, `report --format
        csv|md|seconds|html` and `iorig export` write."""
        run_id = _run_id(request)
        fmt = request.match_info["fmt"]
        if fmt not in DOWNLOADS:
            raise web.HTTPNotFound(text=f"no download {fmt[:20]!r}: {', '.join(DOWNLOADS)}")
        extension, content_type = DOWNLOADS[fmt]

        def work() -> bytes:
            with self._store() as store:
                if store.run_status(run_id) is None:
                    raise web.HTTPNotFound(text=f"no run {run_id} in {self.db}")
                if fmt == "bundle":
                    with tempfile.TemporaryDirectory() as directory:
                        path = Path(directory) / "bundle.sqlite"
                        export_run(store, run_id, path)
                        return path.read_bytes()
                analysis = analyse(store.load_run(run_id))
            return render(fmt, analysis, RenderOptions()).encode()

        return web.Response(
            body=await asyncio.to_thread(work),
            content_type=content_type,
            headers={
                "Content-Disposition": f'attachment; filename="iorig-{run_id}.{extension}"',
                "Content-Security-Policy": "default-src 'none'",
                "Cache-Control": "no-store",
            },
        )

    async def compare(self, request: web.Request) -> web.Response:
        ids = request.query.getall("run", [])
        if len(ids) == 1 and _is_run_id(ids[0]):  # one ticked: that run's page, not an error
            raise web.HTTPFound(f"/runs/{ids[0]}")
        if not 2 <= len(ids) <= 12:
            raise web.HTTPBadRequest(text="choose from 2 to 12 runs to compare (run=ID&run=ID)")
        if not all(_is_run_id(run_id) for run_id in ids):
            raise web.HTTPBadRequest(text="run: a run id")

        def work() -> str:
            with self._store() as store:
                missing = [i for i in ids if store.run_status(i) is None]
                if missing:
                    raise web.HTTPNotFound(text=f"no run {', '.join(missing)}")
                analyses = [analyse(store.load_run(i)) for i in ids]
            cmp = compare(analyses, threshold=THRESHOLD, confidence=CONFIDENCE)
            found = shared_limit([a.stored for a in analyses])
            limit = Limit(found.bytes_per_s, Metric.BYTES_PER_S, found.source) if found else None
            return HtmlExporter().comparison(cmp, RenderOptions(limit=limit, plotly_src=PLOTLY_SRC))

        return _report(await asyncio.to_thread(work))

    # ------------------------------------------------------------ live

    async def live(self, request: web.Request) -> web.StreamResponse:
        """Server-sent events: ``phase`` (where the run is), ``seconds``
        (new live seconds), then ``end`` once the run is stored."""
        run_id = _run_id(request)
        response = web.StreamResponse(
            headers={
                "Content-Type": "text/event-stream",
                "Cache-Control": "no-store",
                "Content-Security-Policy": PAGE_CSP,
            }
        )
        await response.prepare(request)
        after = 0
        last_phase = None
        try:
            live = await asyncio.to_thread(LiveStore, self.db)
        except LiveUnwritable as exc:
            await _event(response, "problem", {"error": str(exc)})
            return response
        try:
            while True:
                phase, seconds, status = await asyncio.to_thread(self._poll, live, run_id, after)
                if phase is not None and phase != last_phase:
                    last_phase = phase
                    await _event(response, "phase", phase)
                if seconds:
                    after = seconds[-1][0]
                    await _event(response, "seconds", [_second_json(s) for _, s in seconds])
                if status != RunStatus.RUNNING.value:
                    await _event(response, "end", {"status": status})
                    return response
                await asyncio.sleep(POLL_S)
        except ConnectionResetError:  # the page went away
            return response
        finally:
            live.close()

    def _poll(
        self, live: LiveStore, run_id: str, after: int
    ) -> tuple[dict | None, list[tuple[int, LiveSecond]], str]:
        with self._store() as store:
            status = str(store.run_status(run_id))
        phase = live.phase(run_id)
        seconds = live.seconds_after(run_id, after)
        return (asdict(phase) if phase is not None else None), seconds, status


def _second_json(s: LiveSecond) -> dict:
    """A second for the page: the histogram since the phase began is the
    metrics endpoint's, not the page's."""
    shown = {k: v for k, v in asdict(s).items() if k not in ("lat_buckets", "lat_sum_ns")}
    return shown | {"source": str(s.source)}


async def _event(response: web.StreamResponse, name: str, data: object) -> None:
    await response.write(f"event: {name}\ndata: {json.dumps(data)}\n\n".encode())


def _page(template: str, **values: object) -> web.Response:
    text = _env.get_template(template).render(**values)
    return web.Response(
        text=text,
        content_type="text/html",
        headers={"Content-Security-Policy": PAGE_CSP, "Cache-Control": "no-store"},
    )


# plotly once for every page, cached by the browser: inlined, each run's or
# comparison's page was 4.9 MB. Its version in the address: a new plotly is
# a new address, never a stale cache
PLOTLY_SRC = f"/plotly-{importlib.metadata.version('plotly')}.min.js"


@functools.cache
def _plotly_bytes() -> bytes:
    from plotly.offline import get_plotlyjs

    return get_plotlyjs().encode()


async def _plotly(request: web.Request) -> web.Response:
    return web.Response(
        body=await asyncio.to_thread(_plotly_bytes),
        content_type="application/javascript",
        headers={"Cache-Control": "public, max-age=31536000, immutable"},
    )


# a stored run's files (format -> file extension, media type), as the
# command line writes them
DOWNLOADS = {
    "json": ("json", "application/json"),
    "csv": ("csv", "text/csv"),
    "seconds": ("seconds.csv", "text/csv"),
    "md": ("md", "text/markdown"),
    "html": ("html", "text/html"),
    "bundle": ("sqlite", "application/vnd.sqlite3"),
}
_DOWNLOAD_NAMES = {
    "json": "JSON",
    "csv": "CSV",
    "seconds": "every second (CSV)",
    "md": "Markdown",
    "html": "report (HTML)",
    "bundle": "bundle (iorig import)",
}


def _report(html: str, downloads: str | None = None) -> web.Response:
    """A served report with a way back to the run list (a report file stands
    alone) and, for one run, links to its files."""
    links = " · ".join(
        f'<a href="/runs/{downloads}/download/{fmt}" download>{name}</a>'
        for fmt, name in _DOWNLOAD_NAMES.items()
    )
    # a run's own page picks it for a comparison: the list opens with it ticked
    pick = f' · <a href="/?pick={downloads}">compare with other runs</a>' if downloads else ""
    nav = f'<nav class="served"><a href="/">&larr; all runs</a>{pick}' + (
        f" &nbsp; download: {links}</nav>" if downloads else "</nav>"
    )
    at = html.find(">", html.find("<body")) + 1 if "<body" in html else 0
    return web.Response(
        text=html[:at] + nav + html[at:],
        content_type="text/html",
        headers={"Content-Security-Policy": REPORT_CSP, "Cache-Control": "no-store"},
    )


@web.middleware
async def _hardened(
    request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
) -> web.StreamResponse:
    """Headers every answer carries; errors as a page of this site to a
    browser (its text escaped, a way back to the list), as plain text to
    anything else (an event stream, curl)."""
    try:
        response = await handler(request)
    except web.HTTPException as exc:
        if exc.status >= 400 and "text/html" in request.headers.get("Accept", ""):
            message = exc.text or ""
            prefix = f"{exc.status}: "
            response = _page(
                "error.html.j2",
                status=exc.status,
                reason=exc.reason,
                message=message.removeprefix(prefix),
            )
            response.set_status(exc.status, exc.reason)
        else:
            exc.headers["Content-Security-Policy"] = "default-src 'none'"
            exc.headers["X-Content-Type-Options"] = "nosniff"
            raise
    response.headers.setdefault("X-Content-Type-Options", "nosniff")
    response.headers.setdefault("Referrer-Policy", "no-referrer")
    return response


def origin_guard(names: frozenset[str]) -> Callable:
    """Requests for this server from this server's pages or a user: the Host
    must name it (an IP address, localhost, or a name allowed) — a page of
    another site that reached it by DNS rebinding names its own — and a
    request another site's page made is refused unless it is the user
    following a link (docs/guide/live.md)."""

    @web.middleware
    async def guard(
        request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
    ) -> web.StreamResponse:
        if not host_allowed(request.headers.get("Host"), names):
            raise web.HTTPMisdirectedRequest(
                text="this iorig serve answers requests for its own address only: open it as "
                "http(s)://ADDRESS/ or allow this name with --allow-host"
            )
        origin = request.headers.get("Origin")
        if origin is not None and (origin == "null" or not host_allowed(origin, names)):
            raise web.HTTPForbidden(text="a request from another site's page is refused")
        if request.headers.get("Sec-Fetch-Site") == "cross-site" and (
            request.headers.get("Sec-Fetch-Mode") != "navigate"
        ):
            raise web.HTTPForbidden(text="a request from another site's page is refused")
        return await handler(request)

    return guard


def token_guard(token: bytes) -> Callable:
    """Requests must show the token: ``Authorization: Bearer TOKEN``, or a
    session cookie set by opening any page once with ``?token=TOKEN``."""
    session = secrets.token_urlsafe(32)  # this server's, gone when it stops

    @web.middleware
    async def guard(
        request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
    ) -> web.StreamResponse:
        given = request.headers.get("Authorization", "").removeprefix("Bearer ").strip()
        if given and hmac.compare_digest(given.encode(), token):
            return await handler(request)
        cookie = request.cookies.get(COOKIE, "")
        if cookie and hmac.compare_digest(cookie.encode(), session.encode()):
            return await handler(request)
        offered = request.query.get("token", "")
        if offered and hmac.compare_digest(offered.encode(), token):
            kept = [(k, v) for k, v in request.query.items() if k != "token"]
            rest = str(request.rel_url.with_query(kept))
            # "//host/…" (or "/\\host/…") is another site's address to a browser
            found = web.HTTPSeeOther(location="/" + rest.lstrip("/\\"))
            found.set_cookie(COOKIE, session, httponly=True, secure=True, samesite="Strict")
            raise found
        raise web.HTTPUnauthorized(
            text="this iorig serve needs its token: open a page once with ?token=TOKEN"
        )

    return guard


def make_app(
    db: Path, *, token: bytes | None = None, names: frozenset[str] = frozenset()
) -> web.Application:
    """``names``: host names besides IP addresses and localhost that requests
    may use for this server."""
    middlewares = [_hardened, origin_guard(names)]
    middlewares += [token_guard(token)] if token is not None else []
    app = web.Application(middlewares=middlewares)
    views = Views(db)
    app.router.add_get("/", views.runs)
    app.router.add_get("/runs/{run_id}", views.run)
    app.router.add_get("/runs/{run_id}/live", views.live)
    app.router.add_get("/runs/{run_id}/download/{fmt}", views.download)
    app.router.add_get("/compare", views.compare)
    app.router.add_get(PLOTLY_SRC, _plotly)
    app.router.add_static("/static/", STATIC, show_index=False, follow_symlinks=False)
    return app
