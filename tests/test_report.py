"""Two real quick peak runs compared, reported and moved between databases:
the terminal and Markdown tables, the JSON/CSV numbers, the HTML report in a
real headless Chromium with no network, and export/import.

The runs are recorded (tests/data/report-peak/record.py runs them with fio):
rendering is tested on what a real run stored, without running fio here."""

from __future__ import annotations

import csv
import io
import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from tests import browser as devtools
from tests.conftest import DATA, CliResult, chromium_or_skip

EVIL = 'B </script><script>window.pwned=1</script> & "q" <a href="https://example.com/x">l</a>'
RECORDED = DATA / "report-peak" / "results.sqlite"


@pytest.fixture
def two_runs(tmp_path: Path) -> tuple[Path, Path]:
    """A copy of the recorded database with two back-to-back `peak --quick`
    runs on the same file, labelled "A" and EVIL."""
    db = tmp_path / "results.sqlite"
    shutil.copyfile(RECORDED, db)
    return db, tmp_path


@pytest.fixture
def _cli(cli):
    def run(db: Path, *args: str, check: bool = True) -> CliResult:
        return cli(db, *args, columns=250, check=check)

    return run


def test_compare_prints_median_maximum_minimum_with_verdicts(_cli, two_runs):
    db, _ = two_runs
    out = _cli(db, "compare", "last~1", "last").stdout
    for title in ("Median", "Maximum", "Minimum", "Completion latency"):
        assert re.search(rf"^{title}", out, re.M), title
    for phase in ("random-read", "sequential-read", "random-write", "sequential-write"):
        rows = [line for line in out.splitlines() if f"{phase} (" in line]
        assert len(rows) == 3, phase  # one row in each of the three tables
        for row in rows:
            assert "%" in row
            assert ("n.s." in row) or ("significant (" in row) or ("not testable" in row)


def test_compare_markdown_has_seed_000_layout(_cli, two_runs):
    db, _ = two_runs
    md = _cli(db, "compare", "last~1", "last", "--format", "md").stdout
    for title in ("Median", "Maximum", "Minimum"):
        assert f"### {title}" in md
        header = next(line for line in md.splitlines() if line.startswith(f"| Test | A ({title})"))
        assert header.endswith("| % Gain or Loss | Winner | Significance |")
    separator = "| :--- | :---: | :---: | :---: | :---: | :--- |"
    assert md.count(separator) == 3
    rows = [line for line in md.splitlines() if line.startswith("| random-read (IOPS)")]
    assert len(rows) == 3 and all(row.count("|") == 7 for row in rows)
    # a label is text in Markdown too: a renderer that obeys HTML shows it as typed
    assert "<script>" not in md and "<a href" not in md
    assert "&lt;/script&gt;&lt;script&gt;window.pwned=1" in md


def test_compare_json_and_csv_carry_the_numbers(_cli, two_runs):
    db, _ = two_runs
    data = json.loads(_cli(db, "compare", "last~1", "last", "--format", "json").stdout)
    assert [r["label"] for r in data["runs"]] == ["A", EVIL]
    phases = [p for p in data["phases"] if not p["baseline"]]
    assert len(phases) == 4
    for p in phases:
        assert p["verdict"] in ("better", "worse", "same", "untestable")
        assert p["change_median"] is not None and p["median"] > 0
    table = list(
        csv.DictReader(io.StringIO(_cli(db, "compare", "last~1", "last", "--format", "csv").stdout))
    )
    assert len(table) == 8 and {"median", "ci_low", "p_value"} <= set(table[0])


def test_as_percent_of_and_limit(_cli, two_runs):
    db, _ = two_runs
    out = _cli(db, "compare", "last", "--as-percent-of", "last~1", "--limit", "1GB/s").stdout
    assert "as % of A" in out
    assert "Percent of the interface limit (1.00 GB/s)" in out
    assert "above the limit" in out  # the sequential phases beat 1 GB/s on this machine's cache


@pytest.mark.browser
def test_html_report_in_headless_chromium(_cli, two_runs):
    db, base = two_runs
    browser = chromium_or_skip()
    report = base / "report.html"
    _cli(db, "report", "last~1", "last", "-o", str(report))
    html = report.read_text()
    assert "<script>window.pwned=1</script>" not in html
    assert "&lt;/script&gt;&lt;script&gt;window.pwned=1&lt;/script&gt;" in html
    profile, netlog, shot = base / "profile", base / "net.json", base / "report.png"
    dom, console, _ = devtools.dump_dom(
        browser,
        report,
        profile,
        window="1200,3000",
        extra=("--disable-quic", f"--log-net-log={netlog}"),
    )
    assert console == [], console  # no errors, no CSP violations, nothing logged at all
    # a timeline per run + 4 phases × (throughput, latency, percentiles)
    assert 'data-charts-drawn="14"' in dom
    for timeline in ("timeline-0", "timeline-1"):  # at the top of each run's section
        assert re.search(rf'class="chart timeline js-plotly-plot" id="{timeline}"', dom)
    drawn = re.findall(r'id="(chart-\d+-\w+)"[^>]*class="[^"]*js-plotly-plot', dom)
    drawn += re.findall(r'class="[^"]*js-plotly-plot[^"]*"[^>]*id="(chart-\d+-\w+)"', dom)
    assert len(set(drawn)) == 12, drawn
    assert dom.count('class="main-svg"') >= 12  # plotly drew SVG for each chart
    for title in ("Median", "Maximum", "Minimum", "Completion latency"):
        assert f"<h3>{title}" in dom
    assert "rw=randread" in dom  # job files in collapsible blocks
    assert "<script>window.pwned=1</script>" not in dom  # the label never became markup
    # nor plotly markup: legends show it as text, no live link
    assert not re.search(r'<a [^>]*href="https://example.com/x"', dom), "a label became a link"
    assert "&lt;a href=" in dom
    csp = re.search(r'http-equiv="Content-Security-Policy" content="([^"]+)"', html)[1]
    assert "unsafe-eval" not in csp and "unsafe-inline" not in csp.split("style-src")[0], csp
    # No request left the page: page-initiated requests have an initiator origin
    # ("null" for file://); the browser's own background traffic has none.
    events = json.loads(netlog.read_text())
    types = {v: k for k, v in events["constants"]["logEventTypes"].items()}
    page_requests = [
        e["params"]["url"]
        for e in events["events"]
        if types.get(e["type"]) == "URL_REQUEST_START_JOB"
        and e.get("params", {}).get("url")
        and e["params"].get("initiator") not in (None, "not an origin")
    ]
    assert page_requests == []
    screenshot = subprocess.run(
        [
            browser,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            f"--user-data-dir={profile}",
            "--window-size=1200,2400",
            "--virtual-time-budget=15000",
            f"--screenshot={shot}",
            f"file://{report}",
        ],
        capture_output=True,
        timeout=120,
    )
    assert screenshot.returncode == 0 and shot.stat().st_size > 50_000


def _overlap(a: list[float], b: list[float]) -> bool:
    return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]


@pytest.mark.browser
def test_html_chart_titles_are_drawn_clear_of_plotlys_toolbar(_cli, two_runs):
    # the toolbar (modebar) sits at a chart's top right; a title beside it was
    # drawn under it once it ran long ("random-read: latency percentiles …")
    db, base = two_runs
    browser = chromium_or_skip()
    report = base / "report.html"
    _cli(db, "report", "last~1", "last", "-o", str(report))
    for window in ("1200,3000", "800,3000"):  # two charts a row: 565 and 365 px wide
        charts = devtools.evaluate(
            browser, report, devtools.CHART_BOXES, base / "profile", window=window
        )
        assert len(charts) == 14  # a timeline per run + 4 phases × 3
        for c in charts:
            assert c["title"] and c["modebar"], c
            assert not _overlap(c["title"], c["modebar"]), (window, c)
            assert c["title"][1] >= c["modebar"][3], (window, c)  # below it, however long
            assert c["title"][0] >= 0 and c["title"][3] <= c["height"], (window, c)


def test_report_markdown_json_csv(_cli, two_runs):
    db, _ = two_runs
    md = _cli(db, "report", "last", "--format", "md").stdout
    assert "### Throughput per second" in md and "| random-read (IOPS) |" in md
    data = json.loads(_cli(db, "report", "last~1", "last", "--format", "json").stdout)
    assert data["format_version"] == 1 and data["kind"] == "comparison"
    assert len(data["runs"]) == 2 and data["phases"]
    # the same document as compare's: one renderer serves both commands
    assert data == json.loads(_cli(db, "compare", "last~1", "last", "--format", "json").stdout)
    for run in data["runs"]:
        assert {s["phase"] for s in run["samples"]} >= {"random-read", "sequential-write"}
    rows = list(csv.DictReader(io.StringIO(_cli(db, "report", "last", "--format", "csv").stdout)))
    # one row per measured phase, in compare's row shape (samples are in the JSON)
    assert sorted(r["phase"] for r in rows) == [
        "random-read",
        "random-write",
        "sequential-read",
        "sequential-write",
    ]
    assert {"median", "lat_p99_ns", "change_median"} <= set(rows[0])
    missing = _cli(db, "report", "last", check=False)
    assert missing.returncode == 2 and "-o report.html" in missing.stderr


def test_export_import_round_trip_without_duplicates(_cli, two_runs, tmp_path):
    db, _ = two_runs
    bundle = tmp_path / "run.iorig"
    _cli(db, "export", "last", "-o", str(bundle))
    original = json.loads(_cli(db, "show", "last", "--json").stdout)
    other = tmp_path / "other.sqlite"
    first = _cli(other, "import", str(bundle)).stdout
    assert "imported" in first
    again = _cli(other, "import", str(bundle)).stdout
    assert "already present, skipped" in again
    copied = json.loads(_cli(other, "show", original["run"]["id"], "--json").stdout)
    assert copied == original
    runs = json.loads(_cli(other, "runs", "--json").stdout)["runs"]
    assert len(runs) == 1
    exists = _cli(db, "export", "last", "-o", str(bundle), check=False)
    assert exists.returncode == 2 and "already exists" in exists.stderr


def test_html_charts_label_latency_in_its_units_and_tell_p99_from_throughput(_cli, two_runs):
    # issue 50: the percentile charts' log axes labelled minor ticks with bare
    # digits and put "100µ" on an ms axis; a timeline's throughput and p99
    # were two black lines in its legend
    db, base = two_runs
    report = base / "report.html"
    _cli(db, "report", "last", "-o", str(report))
    found = re.search(
        r'<script type="application/json" id="iorig-charts">(.*?)</script>',
        report.read_text(),
        re.S,
    )
    charts = {c["id"]: c for c in json.loads(found[1])}
    for chart_id, chart in charts.items():
        if not chart_id.endswith("-percentiles"):
            continue
        axis = chart["layout"]["yaxis"]
        assert axis["type"] == "log" and axis["ticktext"], chart_id
        assert all(re.fullmatch(r"\d+ (ns|µs|ms|s)", t) for t in axis["ticktext"]), axis
        latencies = [v for t in chart["data"] for v in t["y"] if v]
        shown = [v for v in axis["tickvals"] if min(latencies) <= v <= max(latencies)]
        assert shown, (axis["tickvals"], min(latencies), max(latencies))
    (timeline,) = [c for i, c in charts.items() if i.startswith("timeline-")]
    styles = {t["name"]: t["line"].get("dash") for t in timeline["data"]}
    assert styles["p99 latency"] == "dot" and not styles[next(n for n in styles if "p99" not in n)]


def test_a_comparison_leads_with_its_tables_each_runs_details_after(_cli, two_runs):
    # issue 50: a comparison's tables sat three screens down, below each run's details
    db, base = two_runs
    report = base / "compare.html"
    _cli(db, "report", "last~1", "last", "-o", str(report))
    headings = re.findall(r"<h2>([^<]*)", report.read_text())
    assert headings[0] == "Comparison" and headings[1] == "Run A", headings
