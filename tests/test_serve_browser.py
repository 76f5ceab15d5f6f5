"""iorig serve in a real headless Chromium: the live page of a four-host run
on authenticated agents shows new seconds and a host's stop and resume
while it runs and turns into the stored run's page; the comparison page
says what `iorig compare --json` says; a label holding markup is text; no
console error, no request beyond the server (docs/guide/live.md). Two
tests, the live page and the list's comparison, so that the timing stage
runs them side by side (one took 69 s, the stage's longest)."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from tests.agents import iorig, token_agents
from tests.browser import BrowserSession
from tests.conftest import chromium_or_skip
from tests.serving import start_serve

pytestmark = [pytest.mark.browser, pytest.mark.system, pytest.mark.fio, pytest.mark.timing]

REPO = Path(__file__).resolve().parents[1]
SCREENSHOT = REPO / "docs" / "images" / "serve-live.png"
LABEL = '<img src=x onerror="document.body.dataset.owned=1">'


def _running(db: Path, timeout_s: float = 30) -> str:
    """The running run's id, once its row is stored: the database may exist
    before its tables do (serve and the run create it, a soak's poll once
    came between)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if db.exists():
            with contextlib.closing(sqlite3.connect(db)) as conn:
                with_status = "SELECT id FROM runs WHERE status = 'running'"
                try:
                    row = conn.execute(with_status).fetchone()
                except sqlite3.OperationalError as exc:
                    if "no such table" not in str(exc):
                        raise
                    row = None
                if row:
                    return row[0]
        time.sleep(0.1)
    raise AssertionError(f"no run stored as running in {db} within {timeout_s:g} s")


def _quick_run(db: Path, target: Path, label: str, iodepth: str) -> str:
    done = iorig("--db", str(db), "run", "--rw", "randread", "--bs", "4k", "--iodepth", iodepth,
                 "--duration", "4s", "--size", "16MiB", "--target", str(target),
                 "--label", label)  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    return json.loads(iorig("--db", str(db), "show", "last", "--json").stdout)["run"]["id"]


@pytest.mark.timeout(240)
def test_the_live_page_of_a_four_host_run_in_chromium(tmp_path):
    browser = chromium_or_skip()
    db = tmp_path / "results.sqlite"
    serve, url = start_serve(db, tmp_path / "serve.log")
    try:
        with token_agents(4, tmp_path / "agents") as lab:
            run = subprocess.Popen(
                [sys.executable, "-m", "iorig", "--db", str(db), "run", "--rw", "randread",
                 "--bs", "4k", "--iodepth", "4", "--duration", "15s", "--size", "16MiB",
                 "--hosts", lab.hosts_arg,
                 "--event", "randread@4s=stop-host 2", "--event", "randread@7s=start-host 2"],
                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                env={**os.environ, **lab.env, "COLUMNS": "200", "NO_COLOR": "1"},
            )  # fmt: skip
            try:
                run_id = _running(db)
                with BrowserSession(browser, tmp_path / "profile", window="1100,1250") as page:
                    page.goto(f"{url}runs/{run_id}")
                    seen = int(
                        page.wait_for("+document.getElementById('live').dataset.seconds", 30)
                    )
                    lags = [float(page.evaluate("document.getElementById('live').dataset.lagS"))]
                    more = f"+document.getElementById('live').dataset.seconds > {seen}"
                    page.wait_for(more, 5)  # a new second within 2 s of the last, and then some
                    lags.append(
                        float(page.evaluate("document.getElementById('live').dataset.lagS"))
                    )
                    # every host, once each has logged a second: a fresh clone's
                    # page listed two of four when its first seconds came
                    listed = (
                        "Array.from(document.querySelectorAll('#last tr td:first-child'))"
                        ".map(function (c) { return c.textContent; })"
                    )
                    page.wait_for(f"new Set({listed}).size >= {len(lab.hosts)}", 20)
                    hosts = page.evaluate(listed)
                    assert sorted(set(hosts)) == sorted(h.label for h in lab.hosts), hosts
                    assert page.evaluate("document.getElementById('rule').textContent") == ""
                    # issue 50: a 4 KiB random read charts IOPS, as its report does;
                    # the clock says how much is left, the value axis has ticks
                    # between its ends, p99 beside the mean, IOPS with a prefix
                    title = page.evaluate("document.getElementById('throughput-title').textContent")
                    assert title == "IOPS per second", title
                    clock = page.evaluate("document.getElementById('elapsed').textContent")
                    assert re.fullmatch(r"\d+ s of 15 s, \d+ s left", clock), clock
                    # the prefill ran first: the measured phase is the last to come
                    phase = page.evaluate("document.getElementById('phase').textContent")
                    coming = page.evaluate("document.getElementById('coming').textContent")
                    assert (phase, coming) == ("randread (2/2)", "the last phase"), phase
                    ticks = page.evaluate("document.querySelectorAll('#throughput .grid').length")
                    assert ticks == 4, ticks
                    dashed = (
                        "document.querySelectorAll('#latency polyline[stroke-dasharray]').length"
                    )
                    assert page.evaluate(dashed) >= 1
                    # the legend readable: no two names overlap (4 hosts, all and
                    # each one's p99 are 10 names; in one row they did)
                    overlaps = page.evaluate(_LEGEND_OVERLAPS)
                    assert overlaps == [], overlaps
                    iops = page.evaluate(
                        "Array.from(document.querySelectorAll('#last tr td:nth-child(4)'))"
                        ".map(function (c) { return c.textContent; })"
                    )
                    assert all(re.fullmatch(r"\d{1,3}(\.\d+)?( [kMG])?|–", v) for v in iops), iops
                    # the host stopped and resumed, listed as it happens
                    page.wait_for("+document.getElementById('live').dataset.events >= 2", 20)
                    listed = page.evaluate("document.getElementById('events').textContent")
                    assert "stop-host" in listed and "start-host" in listed, listed
                    # a fuller chart for the README: some seconds of every host
                    page.wait_for(
                        f"+document.getElementById('live').dataset.seconds > {seen + 20}", 20
                    )
                    shot = page.screenshot(tmp_path / "live.png", full_page=False)
                    # the run ends: the same URL shows the stored run's report
                    page.wait_for(
                        "!document.getElementById('live') && !!document.body.dataset.chartsDrawn",
                        60,
                    )
                    assert page.current_url() == f"{url}runs/{run_id}"
                    errors, requests = list(page.console_errors), list(page.requests)
            finally:
                run.kill() if run.poll() is None else None
                output = run.communicate(timeout=60)[0]
            assert run.returncode in (0, 3), output
    finally:
        serve.terminate()
        serve.wait(10)
    assert errors == [], errors
    assert all(r.startswith(url) or r.startswith("data:") for r in requests), requests
    print(f"serve: live page lag behind iorig's reading of a second: {lags} s")
    assert max(lags) < 2.0, lags
    if os.environ.get("IORIG_UPDATE_SCREENSHOT"):
        SCREENSHOT.parent.mkdir(exist_ok=True)
        shutil.copyfile(shot, SCREENSHOT)


@pytest.mark.timeout(120)
def test_the_run_list_and_a_comparison_in_chromium(tmp_path):
    browser = chromium_or_skip()
    db = tmp_path / "results.sqlite"
    first = _quick_run(db, tmp_path / "a.dat", "qd1", "1")
    second = _quick_run(db, tmp_path / "b.dat", "qd4", "4")
    # a label that would run script if it were markup: shown as text
    _quick_run(db, tmp_path / "c.dat", LABEL, "1")
    serve, url = start_serve(db, tmp_path / "serve.log")
    try:
        with BrowserSession(browser, tmp_path / "profile", window="1100,1250") as page:
            # the list: the label is text, two runs ticked and compared
            page.goto(url)
            page.wait_for("!!document.querySelector('td.label')", 10)
            assert page.evaluate("document.body.dataset.owned") is None
            cells = page.evaluate(
                "Array.from(document.querySelectorAll('td.label'))"
                ".map(function (c) { return c.textContent; })"
            )
            assert LABEL in cells
            # issue 50: the list shows each run's target and figures, and sorts
            figures = page.evaluate(
                "Array.from(document.querySelectorAll('td.figures'))"
                ".map(function (c) { return c.textContent; })"
            )
            assert len(figures) == 3 and all("IOPS" in f for f in figures), figures
            targets = page.evaluate(
                "Array.from(document.querySelectorAll('td.target'))"
                ".map(function (c) { return c.textContent; })"
            )
            assert sorted(targets) == [str(tmp_path / f"{n}.dat") for n in "abc"]
            order = (
                "Array.from(document.querySelectorAll('td.label'))"
                ".map(function (c) { return c.textContent; })"
            )
            newest_first = page.evaluate(order)
            page.evaluate("document.querySelector('th[aria-sort]').click()")
            assert page.evaluate("document.body.dataset.sortedBy") == "started ascending"
            assert page.evaluate(order) == newest_first[::-1]
            page.evaluate("document.querySelector('th[aria-sort]').click()")  # newest first again
            assert page.evaluate(order) == newest_first
            shots = {"runs": page.screenshot(tmp_path / "runs.png", full_page=False)}
            page.evaluate(
                f"document.querySelector('input[value=\"{first}\"]').click();"
                f"document.querySelector('input[value=\"{second}\"]').click();"
                "document.querySelector('form[action=\"/compare\"]').submit();"
            )
            page.wait_for("!!document.body.dataset.chartsDrawn", 60)
            # newest first in the list: the second run is the baseline
            assert page.current_url() == f"{url}compare?run={second}&run={first}"
            rows = page.evaluate(_MEDIAN_ROWS)
            shots["compare"] = page.screenshot(tmp_path / "compare.png", full_page=False)
            page.back()
            page.wait_for("location.pathname === '/' && !!document.querySelector('td.label')", 10)
            page.goto(f"{url}runs/{first}")
            page.wait_for("!!document.body.dataset.chartsDrawn", 60)
            shots["run"] = page.screenshot(tmp_path / "run.png", full_page=False)
            errors, requests = list(page.console_errors), list(page.requests)
    finally:
        serve.terminate()
        serve.wait(10)
    assert errors == [], errors
    assert all(r.startswith(url) or r.startswith("data:") for r in requests), requests
    for name, shot in shots.items():  # a page drawn, not a blank window
        data = shot.read_bytes()
        assert data.startswith(b"\x89PNG") and len(data) > 30_000, (name, len(data))
        if os.environ.get("IORIG_UPDATE_SCREENSHOT"):
            shutil.copyfile(shot, SCREENSHOT.parent / f"serve-{name}.png")
    expected = json.loads(
        iorig("--db", str(db), "compare", second, first, "--format", "json").stdout
    )
    (theirs,) = [p for p in expected["phases"] if not p["baseline"]]
    (row,) = [r for r in rows if r[0].startswith(theirs["phase"])]
    assert row[3] == f"{theirs['change_median'] * 100:+.2f}%", (row, theirs)
    words = {"untestable": "not testable", "better": "better", "worse": "worse"}
    if theirs["verdict"] in words:
        assert row[5].startswith(words[theirs["verdict"]]), (row, theirs["verdict"])
    else:
        assert not row[5].startswith(("better", "worse", "not testable")), row


# pairs of legend names (each chart's) whose boxes overlap
_LEGEND_OVERLAPS = """
(function () {
  var out = [];
  ["throughput", "latency"].forEach(function (id) {
    var names = Array.from(document.querySelectorAll("#" + id + " text.legend"));
    var boxes = names.map(function (t) { return t.getBBox(); });
    boxes.forEach(function (a, i) {
      boxes.slice(i + 1).forEach(function (b, j) {
        var apart = a.x + a.width <= b.x || b.x + b.width <= a.x ||
                    a.y + a.height <= b.y || b.y + b.height <= a.y;
        if (!apart) { out.push([id, names[i].textContent, names[i + 1 + j].textContent]); }
      });
    });
  });
  return out;
})()
"""


# the comparison page's Median table, each row's cells as text
_MEDIAN_ROWS = """
(function () {
  var tables = Array.from(document.querySelectorAll("table"));
  var median = tables.find(function (t) {
    var caption = t.querySelector("caption") || t.previousElementSibling;
    return caption && /^Median/.test(caption.textContent.trim());
  });
  if (!median) { return []; }
  return Array.from(median.querySelectorAll("tbody tr")).map(function (tr) {
    return Array.from(tr.children).map(function (c) { return c.textContent.trim(); });
  });
})()
"""
