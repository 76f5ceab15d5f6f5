"""Live figures as Prometheus/OpenMetrics metrics (``--metrics ADDRESS``),
made with the official client library: a collector over the latest live
second of each run, phase, host and direction (docs/guide/live.md).

    iorig_run_info{run,label,scenario,target,host}                          gauge 1
    iorig_io_operations_total{run,phase,phase_index,point,host,direction}  counter
    iorig_io_bytes_total{...}                                               counter
    iorig_io_latency_seconds_bucket{...,le}, _sum, _count                   histogram
    iorig_io_latency_mean_seconds{...}                                      gauge
    iorig_phase_elapsed_seconds{run,phase,phase_index,point}                gauge

Counters and the histogram count from the phase's start; a rate over them
is the phase's throughput or latency distribution, and the histogram's
buckets are the same on every host (``histogram.METRIC_BOUNDS_NS``), so
hosts add up. Every series of a phase the run knows of is there from the
run's start (or the phase's, where a search decides it), at 0: a scrape
before its I/O is the baseline a rate counts from, so a phase shorter than
the scrape interval still has two samples. When a phase ends its series
take the totals it stored (fio's final figures and histogram), so the last
value a scraper sees is the stored one. Label values are bounded: the
scenario's phase, not a sweep point's name (``MetricPhase``), and user text
(a label, a target's path) made visible and cut to ``MAX_LABEL_CHARS``. The
endpoint has no authentication, so it listens on loopback only.

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
from dataclasses import dataclass
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from prometheus_client import make_wsgi_app
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    InfoMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector, CollectorRegistry
from prometheus_client.utils import floatToGoString

from iorig.errors import UserError
from iorig.model.histogram import METRIC_BOUNDS_NS
from iorig.model.live import LivePhase, LiveRun, LiveSecond, MetricPhase, PhaseTotal
from iorig.serve.address import Address, host_allowed
from iorig.untrusted import visible

LABELS = ("run", "phase", "phase_index", "point", "host", "direction")
PHASE_LABELS = ("run", "phase", "phase_index", "point")
INFO_LABELS = ("run", "label", "scenario", "target", "host")
MAX_LABEL_CHARS = 120  # a label value from user text (a label, a path) is cut to this
# the histogram's bounds as Prometheus's own client writes them ("1e-06"):
# every host writes the same, so their buckets add up
LE = (*(floatToGoString(b / 1e9) for b in METRIC_BOUNDS_NS), "+Inf")
NO_LATENCY = (0,) * len(LE)

Key = tuple[str, int, str, str]  # run, phase index, host, direction


def label_value(text: str) -> str:
    """User text as a label value: what a terminal would act on shown as
    escapes (a label value is shown in dashboards and consoles), invalid
    UTF-8 too (a path's bytes: the exposition could not be written), cut to
    ``MAX_LABEL_CHARS``."""
    shown = visible(text)
    return shown if len(shown) <= MAX_LABEL_CHARS else shown[: MAX_LABEL_CHARS - 1] + "…"


@dataclass(frozen=True)
class SeriesValues:
    """What one series (a run's phase, host and direction) shows now."""

    ios: int | None
    io_bytes: int
    lat_sum_ns: float | None
    lat_buckets: tuple[int, ...] | None  # not cumulative (``histogram.metric_buckets``)


def final_values(
    known: Iterable[Key],
    seconds: Mapping[Key, LiveSecond],
    totals: Mapping[Key, PhaseTotal],
) -> dict[Key, SeriesValues]:
    """Each series' values: a finished phase's stored totals, else its latest
    live second, else 0 for a series the run knows of (``known``). A counter
    never goes back (a scraper would read a reset and count it twice), so
    where a live count was higher (a host's kernel counting a buffered
    phase's readahead) it stays, and so does a live bucket's count."""
    out = {key: SeriesValues(0, 0, 0.0, NO_LATENCY) for key in known}
    for key, s in seconds.items():
        zero = out.get(key)
        out[key] = SeriesValues(
            s.ios if s.ios is not None else (zero.ios if zero else None),
            s.io_bytes,
            s.lat_sum_ns if s.lat_sum_ns is not None else (zero.lat_sum_ns if zero else None),
            s.lat_buckets if s.lat_buckets is not None else (zero.lat_buckets if zero else None),
        )
    for key, t in totals.items():
        live = out.get(key, SeriesValues(None, 0, None, None))
        out[key] = SeriesValues(
            t.ios if live.ios is None else max(t.ios, live.ios),
            max(t.io_bytes, live.io_bytes),
            _larger(t.lat_sum_ns, live.lat_sum_ns),
            _each_larger(t.lat_buckets, live.lat_buckets),
        )
    return out


def _larger(a: float | None, b: float | None) -> float | None:
    return b if a is None else a if b is None else max(a, b)


def _each_larger(a: tuple[int, ...] | None, b: tuple[int, ...] | None) -> tuple[int, ...] | None:
    if a is None or b is None:
        return b if a is None else a
    return tuple(max(x, y) for x, y in zip(a, b, strict=True))


def cumulative(buckets: Sequence[int]) -> list[tuple[str, float]]:
    """Bucket counts as Prometheus's ``le`` buckets: each counts every
    completion below its bound, the last (``+Inf``) all of them."""
    out, total = [], 0
    for le, n in zip(LE, buckets, strict=True):
        total += n
        out.append((le, float(total)))
    return out


class LiveMetrics(Collector):
    """The latest counters and latencies of every run, phase, host and
    direction it was given; a ``LiveSink`` (``run/live.py``) and a collector."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._runs: dict[str, LiveRun] = {}
        self._seconds: dict[Key, LiveSecond] = {}
        self._totals: dict[Key, PhaseTotal] = {}
        self._phases: dict[tuple[str, int], LivePhase] = {}
        self._begun: set[tuple[str, int]] = set()  # phases that started, by run and index
        self.ended_at: float | None = None  # monotonic: when the run's figures were final
        self.aborted = False  # a phase ended by a signal: nobody waits for a scrape

    def put_run(self, run_id: str, run: LiveRun) -> None:
        with self._lock:
            self._runs[run_id] = run

    def put_seconds(self, run_id: str, seconds: Sequence[LiveSecond]) -> None:
        with self._lock:
            for s in seconds:
                key = (run_id, s.phase_index, s.host, s.direction)
                self._begun.add((run_id, s.phase_index))
                kept = self._seconds.get(key)
                if kept is None or kept.io_bytes <= s.io_bytes:  # counters never go back
                    self._seconds[key] = s

    def put_phase(self, run_id: str, phase: LivePhase) -> None:
        with self._lock:
            self._phases[(run_id, phase.phase_index)] = phase
            self._begun.add((run_id, phase.phase_index))

    def put_totals(self, run_id: str, totals: Sequence[PhaseTotal], *, aborted: bool) -> None:
        with self._lock:
            for t in totals:
                self._totals[(run_id, t.phase_index, t.host, t.direction)] = t
                self._begun.add((run_id, t.phase_index))
            self.aborted = self.aborted or aborted

    def drop_run(self, run_id: str) -> None:
        """Kept: a scrape after the run's end still sees its final counters;
        the phases it knew of but never began (a stopped run's) go."""
        with self._lock:
            run = self._runs.get(run_id)
            if run is not None:
                begun = [p for p in run.phases if (run_id, p.phase_index) in self._begun]
                self._runs[run_id] = LiveRun(run.label, run.scenario, run.hosts, tuple(begun))
        self.ended_at = time.monotonic()

    def forget(self, keep: set[str]) -> None:
        """Drop the runs not in ``keep`` (serve: runs that ended long ago)."""
        with self._lock:
            self._runs = {k: v for k, v in self._runs.items() if k in keep}
            self._seconds = {k: v for k, v in self._seconds.items() if k[0] in keep}
            self._totals = {k: v for k, v in self._totals.items() if k[0] in keep}
            self._phases = {k: v for k, v in self._phases.items() if k[0] in keep}
            self._begun = {k for k in self._begun if k[0] in keep}

    def collect(self) -> Iterator[Metric]:
        with self._lock:
            runs = dict(self._runs)
            seconds = dict(self._seconds)
            totals = dict(self._totals)
            phases = dict(self._phases)
        labelled = {(run_id, p.phase_index): p for run_id, run in runs.items() for p in run.phases}
        known = [
            (run_id, p.phase_index, host, d)
            for run_id, run in runs.items()
            for p in run.phases
            for host, _ in run.hosts
            for d in p.directions
        ]

        def phase_labels(run_id: str, index: int, name: str) -> tuple[str, ...]:
            p = labelled.get((run_id, index))
            if p is None:  # a phase the run did not say (no LiveRun): its name without a point
                p = MetricPhase(index, name.partition(":")[0], None, ())
            point = "" if p.point is None else str(p.point)
            return (run_id, label_value(p.phase), str(index), point)

        info = InfoMetricFamily(
            "iorig_run", "what each run is, on each of its hosts", labels=INFO_LABELS
        )
        for run_id, run in runs.items():
            for host, target in run.hosts:
                values = (run.label, run.scenario, target, host)
                info.add_metric((run_id, *map(label_value, values)), {})
        ops = CounterMetricFamily(
            "iorig_io_operations", "I/Os completed since the phase began", labels=LABELS
        )
        moved = CounterMetricFamily(
            "iorig_io_bytes", "bytes moved since the phase began", labels=LABELS
        )
        latency = HistogramMetricFamily(
            "iorig_io_latency_seconds",
            "completion latency of the I/Os since the phase began",
            labels=LABELS,
        )
        mean = GaugeMetricFamily(
            "iorig_io_latency_mean_seconds",
            "mean completion latency over the last live second",
            labels=LABELS,
        )
        names = {key: s.phase for key, s in seconds.items()} | {
            key: t.phase for key, t in totals.items()
        }
        for key, v in sorted(final_values(known, seconds, totals).items()):
            run_id, index, host, direction = key
            labels = (*phase_labels(run_id, index, names.get(key, "")), label_value(host),
                      direction)  # fmt: skip
            if v.ios is not None:
                ops.add_metric(labels, v.ios)
            moved.add_metric(labels, v.io_bytes)
            if v.lat_buckets is not None:
                latency.add_metric(labels, cumulative(v.lat_buckets), (v.lat_sum_ns or 0.0) / 1e9)
        for key, s in sorted(seconds.items()):
            if s.lat_mean_ns is not None:
                run_id, index, host, direction = key
                labels = (*phase_labels(run_id, index, s.phase), label_value(host), direction)
                mean.add_metric(labels, s.lat_mean_ns / 1e9)
        elapsed = GaugeMetricFamily(
            "iorig_phase_elapsed_seconds", "seconds into the phase", labels=PHASE_LABELS
        )
        for (run_id, index), phase in sorted(phases.items()):
            elapsed.add_metric(phase_labels(run_id, index, phase.phase), phase.elapsed_s)
        yield from (info, ops, moved, latency, mean, elapsed)


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

    def everyone_since(self, since: float) -> bool:
        """Whether every scraper has been answered a scrape asked at ``since`` or later."""
        with self._changed:
            return served_everyone(self._last, since)

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
            if not host_allowed(environ.get("HTTP_HOST")) or "HTTP_ORIGIN" in environ:
                # a page that reached it by DNS rebinding names its own domain;
                # a scraper sends no Origin
                start_response("403 Forbidden", [("Content-Type", "text/plain")])
                return [b"the metrics endpoint answers requests for its own address only\n"]
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
