"""The HTML report of a day on sixteen hosts opens in Chromium, quickly and
without errors, and its timeline still shows a 5-second dip at hour 13 (read
from the data the chart drew, through the DevTools protocol)."""

from __future__ import annotations

import re
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from tests import builders
from tests.browser import dump_dom, evaluate
from tests.conftest import chromium_or_skip

from iorig.analyze.analysis import analyse
from iorig.model import AGGREGATE, ALL, Scope, SecondHists, Series, StoredRun
from iorig.report.options import RenderOptions
from iorig.report.writers.html import HtmlExporter

DAY_S = 86_400
HOSTS = 16
DIP_AT_S = 13 * 3600  # the dip's first second
DIP_S = 5
LEVEL = 20_000.0  # each host's IOPS
BINS = np.array([590, 600, 610], np.uint16)  # a few busy latency bins a second


def _series(iops: np.ndarray) -> Series:
    counts = np.maximum(iops.astype(np.int64) // 3, 1).astype(np.uint64)
    hist = SecondHists(
        np.arange(0, 3 * iops.size + 1, 3, dtype=np.int64),
        np.tile(BINS, iops.size),
        np.repeat(counts, 3),
    )
    t = np.arange(1, iops.size + 1)
    return Series(ALL, t, iops, iops * 4096, np.full(iops.size, 2.5e5), hist)


def _day_on_sixteen_hosts() -> StoredRun:
    rng = np.random.default_rng(13)
    hosts, total = [], np.zeros(DAY_S)
    for i in range(HOSTS):
        iops = LEVEL * (1 + 0.05 * rng.standard_normal(DAY_S))
        iops[DIP_AT_S - 1 : DIP_AT_S - 1 + DIP_S] = LEVEL / 10  # t_s is 1-based
        total += iops
        base = builders.scope(iops, where=Scope(host=f"h{i:02d}"))
        hosts.append(replace(base, series={ALL: _series(iops)}))
    aggregate = replace(builders.scope(total, where=AGGREGATE), series={ALL: _series(total)})
    phase = builders.phase("soak", total, scopes=(aggregate, *hosts))
    names = [h.scope.host for h in hosts]
    return builders.stored("d0d0d0d0d0d0", "day", [phase], hosts=names, ended_at=float(DAY_S))


# Waits for the charts, then gives what the timeline drew: each trace's
# points, lowest value and where it is, and how long the page took to draw.
DRAWN = r"""
new Promise(function (done) {
  (function poll() {
    if (!document.body || !document.body.dataset.chartsDrawn) { return setTimeout(poll, 50); }
    var chart = document.getElementById("timeline-0");
    done({
      drawn_ms: performance.now(),
      title: chart.layout.title.text,
      traces: chart.data.map(function (t) {
        var low = null, at = null;
        t.y.forEach(function (v, i) {
          if (v !== null && (low === null || v < low)) { low = v; at = t.x[i]; }
        });
        return {name: t.name, points: t.y.length, low: low, at: at};
      })
    });
  })();
})
"""


@pytest.mark.browser
@pytest.mark.timeout(600)
def test_a_days_report_on_sixteen_hosts_opens_quickly_and_shows_the_dip(tmp_path: Path):
    browser = chromium_or_skip()
    report = tmp_path / "report.html"
    report.write_text(HtmlExporter().run(analyse(_day_on_sixteen_hosts()), RenderOptions()))
    size_mb = report.stat().st_size / 1e6
    print(f"report of 24 h × 16 hosts: {size_mb:.1f} MB")
    assert size_mb < 20

    started = time.monotonic()
    drawn = evaluate(browser, report, DRAWN, tmp_path / "profile", timeout_s=120)
    print(
        f"drawn {drawn['drawn_ms'] / 1000:.1f} s after navigation, "
        f"{time.monotonic() - started:.1f} s after Chromium started"
    )
    assert drawn["drawn_ms"] < 10_000
    assert "lowest and highest second" in drawn["title"]
    traces = drawn["traces"]
    assert len(traces) == 2 * (1 + HOSTS)  # throughput and p99: the aggregate and each host
    throughput = [t for t in traces if not t["name"].endswith("p99") and "p99" not in t["name"]]
    assert len(throughput) == 1 + HOSTS
    for trace in throughput:
        assert trace["points"] <= 2500, trace
        # the dip at its depth, where it happened: a tenth of a host's level
        assert trace["low"] < 0.2 * LEVEL * (HOSTS if trace["name"].startswith("all") else 1)
        assert DIP_AT_S - 1 <= trace["at"] <= DIP_AT_S + DIP_S, trace

    console = _console_errors(browser, report, tmp_path / "profile-2")
    assert console == [], console  # no JS error, no CSP violation


def _console_errors(browser: str, report: Path, profile: Path) -> list[str]:
    dom, console, stderr = dump_dom(browser, report, profile, window="1200,2000", timeout_s=180)
    assert re.search(r'data-charts-drawn="\d+"', dom), stderr[-2000:]
    return console
