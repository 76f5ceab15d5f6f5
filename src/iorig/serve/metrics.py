"""Live figures as Prometheus/OpenMetrics metrics (``--metrics ADDRESS``),
made with the official client library: a collector over the latest live
second of each run, phase, host and direction (docs/guide/live.md).

    iorig_io_operations_total{run,phase,phase_index,host,direction}   counter
    iorig_io_bytes_total{...}                                          counter
    iorig_io_latency_seconds{...,quantile="0.5"|"0.99"}                gauge
    iorig_io_latency_mean_seconds{...}                                 gauge
    iorig_phase_elapsed_seconds{run,phase,phase_index}                 gauge

Counters count from the phase's start; a rate over them is the phase's
throughput. Latency is the last live second's, where the source gives it.
The endpoint has no authentication, so it listens on loopback only.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence

from prometheus_client import start_http_server
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector, CollectorRegistry

from iorig.errors import UserError
from iorig.model.live import LivePhase, LiveSecond
from iorig.serve.address import Address

LABELS = ("run", "phase", "phase_index", "host", "direction")


class LiveMetrics(Collector):
    """The latest counters and latencies of every run, phase, host and
    direction it was given; a ``LiveSink`` (``run/live.py``) and a collector."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._seconds: dict[tuple[str, ...], LiveSecond] = {}
        self._phases: dict[tuple[str, ...], float] = {}

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

    def drop_run(self, run_id: str) -> None:
        """Kept: a scrape after the run's end still sees its final counters."""

    def forget(self, keep: set[str]) -> None:
        """Drop the runs not in ``keep`` (serve: runs that ended long ago)."""
        with self._lock:
            self._seconds = {k: v for k, v in self._seconds.items() if k[0] in keep}
            self._phases = {k: v for k, v in self._phases.items() if k[0] in keep}

    def collect(self) -> Iterator[CounterMetricFamily | GaugeMetricFamily]:
        with self._lock:
            seconds = dict(self._seconds)
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
        for key, s in seconds.items():
            if s.ios is not None:
                ops.add_metric(key, s.ios)
            moved.add_metric(key, s.io_bytes)
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


class MetricsEndpoint:
    """``metrics`` served at http://ADDRESS/metrics from a thread, until closed."""

    def __init__(self, address: Address, metrics: LiveMetrics) -> None:
        registry = CollectorRegistry(auto_describe=False)
        registry.register(metrics)
        try:
            self._server, self._thread = start_http_server(
                address.port, addr=address.host, registry=registry
            )
        except OSError as exc:
            raise UserError(
                f"--metrics {address}: cannot listen there ({exc.strerror or exc})",
                hint="choose another port, or 0 for any free one (iorig says which)",
            ) from None
        self.address = Address(address.host, self._server.server_address[1])

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)
