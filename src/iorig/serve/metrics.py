"""Live figures as Prometheus/OpenMetrics metrics (``--metrics ADDRESS``),
made with the official client library: a collector over the latest live
second of each run, phase, host and direction (docs/guide/live.md).

    iorig_io_operations_total{run,phase,phase_index,host,direction}   counter
    iorig_io_bytes_total{...}                                          counter
    iorig_io_latency_seconds{...,quantile="0.5"|"0.99"}                gauge
    iorig_io_latency_mean_seconds{...}                                 gauge
    iorig_phase_elapsed_seconds{run,phase,phase_index}                 gauge

Counters count from the phase's start; a rate over them is the phase's
throughput. When a phase ends they take the totals it stored (fio's final
figures), so the last value a scraper sees is the stored one. Latency is
the last live second's, where the source gives it. The endpoint has no
authentication, so it listens on loopback only.

A scraper polls: one every 15 s would miss a run's last seconds, or a
short run altogether, if the endpoint went away with the run. After a run
ends by itself the endpoint stays until every scraper it has seen (and at
least one) has scraped the final figures, or for at most the time the user
set (``Scrapes``, ``MetricsEndpoint.linger``).
"""

from __future__ import annotations

import socket
import socketserver
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from prometheus_client import make_wsgi_app
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector, CollectorRegistry

from iorig.errors import UserError
from iorig.model.live import LivePhase, LiveSecond, PhaseTotal
from iorig.serve.address import Address

LABELS = ("run", "phase", "phase_index", "host", "direction")


class LiveMetrics(Collector):
    """The latest counters and latencies of every run, phase, host and
    direction it was given; a ``LiveSink`` (``run/live.py``) and a collector."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._seconds: dict[tuple[str, ...], LiveSecond] = {}
        self._totals: dict[tuple[str, ...], PhaseTotal] = {}
        self._phases: dict[tuple[str, ...], float] = {}
        self.ended_at: float | None = None  # monotonic: when the run's figures were final
        self.aborted = False  # a phase ended by a signal: nobody waits for a scrape

    def put_seconds(self, run_id: str, seconds: Sequence[LiveSecond]) -> None:
        with self._lock:
            for s in seconds:
                key = (run_id, s.phase, str(s.phase_index), s.host, s.direction)
                kept = self._seconds.get(key)
                if kept is None or kept.io_bytes <= s.io_bytes:  # counters never go back
                    self._seconds[key] = s

    def put_phase(self, run_id: str, phase: LivePhase) -> None:
        with self._lock:
            self._phases[(run_id, phase.phase, str(phase.phase_index))] = phase.elapsed_s

    def put_totals(self, run_id: str, totals: Sequence[PhaseTotal], *, aborted: bool) -> None:
        with self._lock:
            for t in totals:
                self._totals[(run_id, t.phase, str(t.phase_index), t.host, t.direction)] = t
            self.aborted = self.aborted or aborted

    def drop_run(self, run_id: str) -> None:
        """Kept: a scrape after the run's end still sees its final counters."""
        self.ended_at = time.monotonic()

    def forget(self, keep: set[str]) -> None:
        """Drop the runs not in ``keep`` (serve: runs that ended long ago)."""
        with self._lock:
            self._seconds = {k: v for k, v in self._seconds.items() if k[0] in keep}
            self._totals = {k: v for k, v in self._totals.items() if k[0] in keep}
            self._phases = {k: v for k, v in self._phases.items() if k[0] in keep}

    def collect(self) -> Iterator[CounterMetricFamily | GaugeMetricFamily]:
        with self._lock:
            seconds = dict(self._seconds)
            totals = dict(self._totals)
            phases = dict(self._phases)
        ops = CounterMetricFamily(
            "iorig_io_operations", "I/Os completed since the phase began", labels=LABELS
        )
        moved = CounterMetricFamily(
            "iorig_io_bytes", "bytes moved since the phase began", labels=LABELS
        )
        quantiles = GaugeMetricFamily(
            "iorig_io_latency_seconds",
            "completion latency percentile over the last live second",
            labels=(*LABELS, "quantile"),
        )
        mean = GaugeMetricFamily(
            "iorig_io_latency_mean_seconds",
            "mean completion latency over the last live second",
            labels=LABELS,
        )
        for key, (ios, io_bytes) in final_counters(seconds, totals).items():
            if ios is not None:
                ops.add_metric(key, ios)
            moved.add_metric(key, io_bytes)
        for key, s in seconds.items():
            for q, value in (("0.5", s.lat_p50_ns), ("0.99", s.lat_p99_ns)):
                if value is not None:
                    quantiles.add_metric((*key, q), value / 1e9)
            if s.lat_mean_ns is not None:
                mean.add_metric(key, s.lat_mean_ns / 1e9)
        elapsed = GaugeMetricFamily(
            "iorig_phase_elapsed_seconds",
            "seconds into the phase",
            labels=("run", "phase", "phase_index"),
        )
        for key, value in phases.items():
            elapsed.add_metric(key, value)
        yield from (ops, moved, quantiles, mean, elapsed)


def final_counters(
    seconds: Mapping[tuple[str, ...], LiveSecond], totals: Mapping[tuple[str, ...], PhaseTotal]
) -> dict[tuple[str, ...], tuple[int | None, int]]:
    """Each series' counters: a finished phase's stored totals, else its
    latest live second. A counter never goes back (a scraper would read a
    reset and count it twice), so where a live count was higher (a host's
    kernel counting a buffered phase's readahead) it stays."""
    out: dict[tuple[str, ...], tuple[int | None, int]] = {
        key: (s.ios, s.io_bytes) for key, s in seconds.items()
    }
    for key, t in totals.items():
        live_ios, live_bytes = out.get(key, (None, 0))
        ios = t.ios if live_ios is None else max(t.ios, live_ios)
        out[key] = (ios, max(t.io_bytes, live_bytes))
    return out


def served_everyone(last_scrape: Mapping[str, float], since: float) -> bool:
    """Whether every scraper seen (and at least one) scraped at ``since`` or later."""
    return bool(last_scrape) and all(t >= since for t in last_scrape.values())


class Scrapes:
    """When each scraper (its address and user agent) last asked for the metrics."""

    def __init__(self) -> None:
        self._changed = threading.Condition()
        self._last: dict[str, float] = {}

    def served(self, scraper: str, asked_at: float) -> None:
        """A scrape asked at ``asked_at`` (monotonic) has had its answer."""
        with self._changed:
            self._last[scraper] = max(asked_at, self._last.get(scraper, asked_at))
            self._changed.notify_all()

    def wait_everyone(self, since: float, timeout_s: float) -> bool:
        """Until every scraper has been answered a scrape asked at ``since``
        or later, at most ``timeout_s``."""
        with self._changed:
            return self._changed.wait_for(
                lambda: served_everyone(self._last, since), timeout=max(timeout_s, 0.0)
            )


class _Quiet(WSGIRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        """Scrapes are not news: nothing on stderr."""


class _Asked(threading.local):
    """The scrape a request thread is answering: who, and when it asked."""

    scraper: str | None = None
    at: float = 0.0


def _server_class(host: str, scrapes: Scrapes, asked: _Asked) -> type[WSGIServer]:
    class Server(socketserver.ThreadingMixIn, WSGIServer):
        daemon_threads = True
        address_family = socket.AF_INET6 if ":" in host else socket.AF_INET

        def finish_request(self, request: Any, client_address: Any) -> None:
            asked.scraper = None
            super().finish_request(request, client_address)
            if asked.scraper is not None:  # answered in full: the scraper has these figures
                scrapes.served(asked.scraper, asked.at)

    return Server


class MetricsEndpoint:
    """``metrics`` served at http://ADDRESS/metrics from a thread, until closed;
    each scrape answered noted in ``scrapes``."""

    def __init__(self, address: Address, metrics: LiveMetrics) -> None:
        registry = CollectorRegistry(auto_describe=False)
        registry.register(metrics)
        self.metrics = metrics
        self.scrapes = Scrapes()
        app = make_wsgi_app(registry)
        asked = _Asked()

        def noted(environ: dict, start_response: Callable) -> Iterable[bytes]:
            if environ.get("PATH_INFO") != "/favicon.ico":
                # the time before the figures are collected: they are at least this new
                asked.at = time.monotonic()
                asked.scraper = f"{environ.get('REMOTE_ADDR')} {environ.get('HTTP_USER_AGENT', '')}"
            return app(environ, start_response)

        try:
            self._server = make_server(
                address.host,
                address.port,
                noted,
                _server_class(address.host, self.scrapes, asked),
                _Quiet,
            )
        except OSError as exc:
            raise UserError(
                f"--metrics {address}: cannot listen there ({exc.strerror or exc})",
                hint="choose another port, or 0 for any free one (iorig says which)",
            ) from None
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        self.address = Address(address.host, self._server.server_address[1])

    def linger(self, most_s: float) -> bool | None:
        """After a run that ended by itself, until every scraper has the final
        figures or ``most_s`` passed: True when they have, False when the time
        ran out, None when there was nothing to wait for (no time allowed, a
        run interrupted or never ended)."""
        ended_at = self.metrics.ended_at
        if most_s <= 0 or ended_at is None or self.metrics.aborted:
            return None
        return self.scrapes.wait_everyone(ended_at, ended_at + most_s - time.monotonic())

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)
