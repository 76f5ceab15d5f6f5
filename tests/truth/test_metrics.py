"""Truth 16: what Prometheus computes from `--metrics` is the run's figure.

A real Prometheus (Debian's) scrapes `iorig run --metrics` once a second
while a sequential read runs on a device capped at 40 MB/s; the rate it
computes from `iorig_io_bytes_total` over the phase's seconds has the
median the run stored per second (fio's logs), within 5 %, and that median
is the cap. The expected figure comes from the cap and from the stored run,
never from the metrics themselves.
"""

from __future__ import annotations

import json
import socket
import statistics
import time

import pytest
from tests.prometheus import prometheus_or_skip, prometheus_server

pytestmark = [pytest.mark.fio, pytest.mark.truth]

CAP_BPS = 40_000_000


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_prometheus_rate_of_the_byte_counter_is_the_stored_median(capped, truth_db, tmp_path):
    prometheus_or_skip()
    device = capped(read_bps=CAP_BPS)
    port = _free_port()
    with prometheus_server(tmp_path, [f"127.0.0.1:{port}"]) as prometheus:
        began = time.time()
        done = device.iorig(
            truth_db,
            "run",
            "--target",
            str(device.path),
            "--size",
            "64MiB",
            "--rw",
            "read",
            "--bs",
            "128k",
            "--iodepth",
            "8",
            "--duration",
            "12s",
            "--metrics",
            f"127.0.0.1:{port}",
        )
        assert done.returncode == 0, done.stdout + done.stderr
        ended = time.time()
        run = json.loads(device.iorig(truth_db, "show", "last", "--json").stdout)
        (phase,) = run["phases"]
        assert phase["metric"] == "bytes_per_s"
        stored = phase["per_second"]["median"]
        assert stored == pytest.approx(CAP_BPS, rel=0.03)  # the device's answer
        # Prometheus's per-second rate of the counter, each second of the run
        # (a 2 s window holds two or three 1 s scrapes)
        found = prometheus.query_range(
            f'rate(iorig_io_bytes_total{{run="{run["run"]["id"]}",direction="read"}}[2s])',
            began,
            ended,
            1.0,
        )
    assert len(found) == 1, found  # one host, one direction, one measured phase
    rates = [float(v) for _, v in found[0]["values"] if float(v) > 0]
    assert len(rates) >= 8, rates  # the phase's seconds, scraped
    # the first and last rates straddle the phase's start and end
    median = statistics.median(rates[1:-1])
    print(f"truth 16: stored median {stored / 1e6:.2f} MB/s, Prometheus {median / 1e6:.2f} MB/s")
    assert median == pytest.approx(stored, rel=0.05)
