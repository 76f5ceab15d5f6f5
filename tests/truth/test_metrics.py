"""Truth 16: what Prometheus computes from `--metrics` is the run's figure.

A real Prometheus (Debian's) scrapes `iorig run --metrics` once a second
while a sequential read runs on a device capped at 40 MB/s. The expected
figures come from the cap and from the stored run (fio's logs and totals),
never from the metrics themselves:

* the last value Prometheus holds of `iorig_io_bytes_total` is the phase's
  stored total, exactly: the counter ends on it, and the endpoint stays
  after the run until Prometheus has scraped it (at a 1 s scrape, iorig
  exits about a second after the run, not after `--metrics-linger`);
* the median of `rate()` over the phase is the stored per-second median
  within a bound this test measures. A live counter is fio's status of up
  to a second before the scrape, so a rate over a window is off by the
  difference of its two ends' lags over their distance. Each sample's lag
  is measured against the stored cumulative bytes (when fio's logs say the
  count was reached); more than half of the windows inside the phase are
  off by at most their middle error m, so the median of the rates is within
  m of the stored rate, plus the stored seconds' own spread around their
  median and one logged second's resolution.
"""

from __future__ import annotations

import socket
import statistics
import time

import numpy as np
import pytest
from tests.prometheus import prometheus_or_skip, prometheus_server

from iorig.model import ALL
from iorig.store import Store

pytestmark = [pytest.mark.fio, pytest.mark.truth]

CAP_BPS = 40_000_000
SCRAPE_S = 1.0
WINDOW_S = 4.0  # rate()'s range: four scrapes, as Prometheus's docs advise
RESOLUTION = 0.001  # one logged second: fio logs whole KiB/s and times in ms


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _lag(t: float, value: float, origin: float, t_s, bytes_per_s) -> float:
    """How long after fio's logs reached ``value`` Prometheus sampled it at
    ``t`` (seconds): the stored seconds' cumulative bytes, interpolated."""
    ends = np.concatenate([[t_s[0] - 1.0], np.asarray(t_s, dtype=float)])
    done = np.concatenate([[0.0], np.cumsum(bytes_per_s)])
    return t - (origin + float(np.interp(value, done, ends)))


def _window_errors(steps, samples, first_s: float, last_s: float, lag) -> list[float]:
    """The relative error of each rate step whose window lies inside the
    logged seconds [first_s, last_s]: its first and last samples' lag
    difference over the time between them."""
    errors = []
    for at, _ in steps:
        inside = [(t, v) for t, v in samples if at - WINDOW_S < t <= at]
        if at - WINDOW_S < first_s or at > last_s or len(inside) < 2:
            continue
        (t0, v0), (t1, v1) = inside[0], inside[-1]
        errors.append(abs(lag(t1, v1) - lag(t0, v0)) / (t1 - t0))
    return errors


def test_prometheus_sees_the_stored_total_and_the_stored_median(capped, truth_db, tmp_path):
    prometheus_or_skip()
    device = capped(read_bps=CAP_BPS)
    port = _free_port()
    with prometheus_server(tmp_path, [f"127.0.0.1:{port}"], scrape_interval_s=SCRAPE_S) as prom:
        prom.wait_for_scrape(attempted=True)  # scraping already, so from the phase's start
        began = time.time()
        done = device.iorig(truth_db, "run", "--target", str(device.path), "--size", "64MiB",
                            "--rw", "read", "--bs", "128k", "--iodepth", "8", "--duration",
                            "12s", "--metrics", f"127.0.0.1:{port}")  # fmt: skip
        ended = time.time()
        assert done.returncode == 0, done.stdout + done.stderr
        assert "until every scraper has them" in done.stderr
        assert "not every scraper" not in done.stderr  # the scrape, not the 30 s, ended it
        with Store(truth_db) as store:
            (run_id,) = store.run_ids(limit=1)
            run = store.load_run(run_id)
        phase = run.phases[-1]
        read = phase.aggregate.totals["read"]
        series = phase.aggregate.series[ALL]
        stored = float(np.median(series.bytes_per_s))
        assert stored == pytest.approx(CAP_BPS, rel=0.03)  # the device's answer
        selector = f'iorig_io_bytes_total{{run="{run_id}",phase="{phase.name}",direction="read"}}'
        (raw,) = prom.query(f"{selector}[10m]", at=ended + 1)
        samples = [(float(t), float(v)) for t, v in raw["values"]]
        rates = prom.query_range(f"rate({selector}[{WINDOW_S:g}s])", began, ended, SCRAPE_S)
    # Prometheus holds the stored total as the counter's last value
    assert samples[-1][1] == read.io_bytes, (samples[-1], read.io_bytes)
    # iorig went on serving only until that scrape: about one interval after the run
    last_scrape = samples[-1][0]
    assert ended - last_scrape < 2 * SCRAPE_S + 1.0, (ended, last_scrape)
    origin = phase.series_origin or phase.started_at
    first_s, last_s = origin + float(series.t_s[0]) - 1.0, origin + float(series.t_s[-1])
    steps = [(float(t), float(v)) for t, v in rates[0]["values"]] if rates else []
    inside = [(t, v) for t, v in steps if t - WINDOW_S >= first_s and t <= last_s]
    assert len(inside) >= 5, (steps, first_s - began, last_s - began)  # the phase's seconds

    def lag(t: float, v: float) -> float:
        return _lag(t, v, origin, series.t_s, series.bytes_per_s)

    errors = sorted(_window_errors(inside, samples, first_s, last_s, lag))
    middle_error = errors[len(errors) // 2]  # more than half the windows are within it
    spread = float(np.max(np.abs(series.bytes_per_s - stored))) / stored
    bound = middle_error + spread + RESOLUTION
    median = statistics.median(v for _, v in inside)
    print(
        f"truth 16: stored total {read.io_bytes} B, Prometheus's last {samples[-1][1]:.0f} B; "
        f"median {stored / 1e6:.2f} MB/s stored, {median / 1e6:.2f} MB/s by rate() over "
        f"{len(inside)} windows; window errors {errors[0]:.1%}…{errors[-1]:.1%}, stored "
        f"spread {spread:.1%}: bound ±{bound:.1%}; phase {first_s - began:.1f}…"
        f"{last_s - began:.1f} s, samples from {samples[0][0] - began:.1f} s"
    )
    assert median == pytest.approx(stored, rel=bound)
