"""The live test helpers on real parts: tests/prometheus.py's server scraping
a stdlib HTTP endpoint, and tests/browser.py's BrowserSession on two pages
served from loopback."""

from __future__ import annotations

import contextlib
import functools
import http.server
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.browser import BrowserSession
from tests.conftest import chromium_or_skip
from tests.prometheus import Prometheus, prometheus_server
from tests.waiting import wait_until

RATE_PER_S = 100


@contextlib.contextmanager
def _serving(handler: type[http.server.BaseHTTPRequestHandler]) -> Iterator[str]:
    """``handler`` on a free port of 127.0.0.1: its ``host:port``."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        host, port = server.server_address[:2]
        yield f"{host}:{port}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


def _seconds_of_samples(prom: Prometheus) -> float:
    """Seconds from demo_ops_total's first stored sample to now."""
    found = prom.query("demo_ops_total[1m]")  # the raw samples, with their times
    if not found or not found[0]["values"]:
        return 0.0
    return time.time() - min(float(at) for at, _ in found[0]["values"])


@pytest.mark.system
def test_prometheus_scrapes_a_counter_and_rates_it(tmp_path: Path):
    ops = [0]
    stop = threading.Event()
    started = time.monotonic()

    def count() -> None:  # 100 a second, from the clock: no drift from late wake-ups
        while not stop.wait(0.01):
            ops[0] = int(RATE_PER_S * (time.monotonic() - started))

    class Exposition(_Quiet):
        def do_GET(self) -> None:
            body = (
                "# HELP demo_ops_total Operations done.\n"
                "# TYPE demo_ops_total counter\n"
                f"demo_ops_total {ops[0]}\n"
            ).encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    counter = threading.Thread(target=count, daemon=True)
    counter.start()
    try:
        with _serving(Exposition) as target, prometheus_server(tmp_path, [target]) as prom:
            # the first scrape comes ~5 s after ready (the scrape manager's reload tick)
            prom.wait_for_scrape(timeout_s=10)
            assert prom.series("demo_ops_total") == [
                {"__name__": "demo_ops_total", "instance": target, "job": "iorig"}
            ]
            # rate() over 5 s needs 5 s of samples: before, it extrapolates short
            wait_until(
                lambda: _seconds_of_samples(prom) >= 5.5,
                30,
                "5.5 s of demo_ops_total's samples in prometheus",
                detail=lambda: f"{_seconds_of_samples(prom):.1f} s",
            )
            (rate,) = prom.query("rate(demo_ops_total[5s])")
            assert rate["metric"] == {"instance": target, "job": "iorig"}
            assert abs(float(rate["value"][1]) - RATE_PER_S) <= 0.1 * RATE_PER_S, rate
            now = time.time()
            (samples,) = prom.query_range("demo_ops_total", now - 4, now, 1)
            values = [float(v) for _, v in samples["values"]]
            assert len(values) == 5 and values == sorted(values), values
    finally:
        stop.set()
        counter.join()


ONE = """<!doctype html>
<html><head><title>one</title><link rel="icon" href="data:,"></head>
<body><h1>One</h1><a id="next" href="/two.html">two</a>
<script>console.error("boom from page one");</script>
</body></html>
"""
TWO = """<!doctype html>
<html><head><title>two</title><link rel="icon" href="data:,"></head>
<body><h1>Two</h1><img src="http://example.invalid/x.png" alt="">
</body></html>
"""


@pytest.mark.system
@pytest.mark.browser
def test_browser_session_navigates_and_records(tmp_path: Path):
    browser = chromium_or_skip()
    site = tmp_path / "site"
    site.mkdir()
    (site / "one.html").write_text(ONE)
    (site / "two.html").write_text(TWO)
    handler = functools.partial(_Quiet, directory=str(site))
    with _serving(handler) as host, BrowserSession(browser, tmp_path / "profile") as page:
        one, two = f"http://{host}/one.html", f"http://{host}/two.html"
        page.goto(one)
        assert page.current_url() == one
        assert page.evaluate("document.title") == "one"
        assert page.console_errors == ["console.error: boom from page one"]
        page.evaluate("document.getElementById('next').click()")
        # right after the click the old page still answers: wait for the new one
        loaded = "location.pathname === '/two.html' && document.readyState === 'complete'"
        assert page.wait_for(f"{loaded} && document.title", 10) == "two"
        assert page.current_url() == two
        # the outside request was made (and failed, before the load event: no
        # name resolves but loopback's)
        assert page.requests == [one, two, "http://example.invalid/x.png"]
        assert any("example.invalid/x.png" in e for e in page.console_errors), page.console_errors
        page.back()
        assert page.current_url() == one
        assert page.evaluate("document.title") == "one"
        shot = page.screenshot(tmp_path / "one.png")
        assert shot.read_bytes().startswith(b"\x89PNG\r\n\x1a\n")
