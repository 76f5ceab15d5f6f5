"""One timeline per run (issue 14): the timeline data of every phase on one
wall-clock axis (report/tables/timeline.py), the terminal's sparklines
(report/writers/sparkline.py, `iorig show RUN --timeline` on a real run) and the
HTML report's whole-run chart in a real headless Chromium."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from rich.console import Console
from tests.browser import dump_dom
from tests.builders import phase, record, scope
from tests.conftest import chromium_or_skip

from iorig.analyze.analysis import analyse
from iorig.model import (
    AGGREGATE,
    ALL,
    EventAction,
    EventRecord,
    EventStatus,
    Metric,
    PhaseKind,
    PhaseResult,
    Scope,
    ScopeResult,
    Series,
    StoredRun,
    histogram,
)
from iorig.model.secondhists import SecondHists
from iorig.report.options import RenderOptions
from iorig.report.tables.timeline import build_timeline, p99_per_second
from iorig.report.writers.html import HtmlExporter
from iorig.report.writers.sparkline import BLOCKS, downsample, sparkline, timeline_lines

T0 = 1_700_000_000.0  # the run's first phase starts here (unix seconds)


def _hist_row(latencies_ns: list[int]) -> np.ndarray:
    return histogram.from_values(np.array(latencies_ns, dtype=np.uint64))


def _scope(
    iops: list[float],
    rows: list[np.ndarray] | None = None,
    *,
    t_s: list[float] | None = None,
    where: Scope = AGGREGATE,
    bs: int = 4096,
) -> ScopeResult:
    """A scope with these IOPS per second and, if given, these histogram rows."""
    base = scope(np.asarray(iops, dtype=float), where=where)
    n = len(iops)
    hist = np.stack(rows) if rows else np.zeros((n, histogram.NR_BINS), dtype=np.uint64)
    t = np.asarray(t_s if t_s is not None else range(1, n + 1), dtype=float)
    values = np.asarray(iops, dtype=float)
    series = Series(ALL, t, values, values * bs, np.full(n, 1e5), SecondHists.from_dense(hist))
    return ScopeResult(base.scope, 1, base.totals, {ALL: series}, 1.0, 1.0, 1.0, 0)


def _phase(
    name: str,
    start: float,
    seconds: float,
    kind: PhaseKind = PhaseKind.MEASURE,
    scopes: tuple[ScopeResult, ...] = (),
    **over,
) -> PhaseResult:
    return phase(
        name,
        np.zeros(0),
        kind=kind,
        scopes=scopes,
        started_at=start,
        ended_at=start + seconds,
        **over,
    )


def _event(at: float, argument: str, status: EventStatus = EventStatus.DONE) -> EventRecord:
    started = 0.0 if status is EventStatus.SKIPPED else at
    return EventRecord(at - T0, EventAction.MARK, argument, status, started, started)


def _run(phases: list[PhaseResult], hosts: tuple[str, ...] = ("local",)) -> StoredRun:
    return StoredRun(record("r1", hosts=list(hosts), started_at=T0 - 1), tuple(phases))


def _two_phases_and_a_gap() -> StoredRun:
    """Measured 3 s, idle 2 s, measured 3 s (the second with a bigger block)."""
    rows = [
        _hist_row([100_000] * 98 + [900_000, 2_000_000]),
        histogram.empty(),
        _hist_row([50_000, 60_000, 70_000]),
    ]
    events = (_event(T0 + 1.5, "cache flushed"), _event(0, "never", EventStatus.SKIPPED))
    first = _phase("random-read", T0, 3.2, scopes=(_scope([1000, 0, 1200], rows),), events=events)
    pause = _phase("pause", T0 + 3.3, 2.0, PhaseKind.IDLE)
    second = _phase("random-read-2", T0 + 5.4, 3.1, scopes=(_scope([800, 900, 850]),))
    return _run([first, pause, second])


# ---------------------------------------------------------------- timeline data


def test_points_sit_at_phase_start_plus_t_s_and_break_across_the_gap():
    tl = build_timeline(_two_phases_and_a_gap())
    assert tl.origin == T0
    (trace,) = tl.traces()  # one host: the aggregate only
    assert trace.host is None
    assert trace.x_s == pytest.approx((1.0, 2.0, 3.0, None, 6.4, 7.4, 8.4))
    assert trace.throughput[3] is None and trace.p99_ns[3] is None  # the break
    assert trace.phase == ("random-read",) * 3 + (None,) + ("random-read-2",) * 3
    bands = [(p.name, p.kind, p.start_s, p.end_s) for p in tl.phases]
    assert bands == [
        ("random-read", "measure", 0.0, pytest.approx(3.2)),
        ("pause", "idle", pytest.approx(3.3), pytest.approx(5.3)),
        ("random-read-2", "measure", pytest.approx(5.4), pytest.approx(8.5)),
    ]
    assert tl.phases[1].samples == {}  # idle: a band, no points


def test_missing_seconds_inside_a_phase_break_the_line():
    tl = build_timeline(
        _run([_phase("m", T0, 7, scopes=(_scope([5, 6, 7, 8], t_s=[1, 2, 5, 6]),))])
    )
    (trace,) = tl.traces()
    assert trace.x_s == (1.0, 2.0, None, 5.0, 6.0)


def test_p99_of_each_second_is_the_percentile_of_that_seconds_histogram_row():
    rows = [
        _hist_row([100_000] * 98 + [900_000, 2_000_000]),
        histogram.empty(),
        _hist_row([50_000, 60_000, 70_000]),
    ]
    assert p99_per_second(SecondHists.from_dense(np.stack(rows)), 3) == [
        histogram.percentiles(rows[0], (99.0,))[99.0],
        None,  # a second without completions has no latency
        histogram.percentiles(rows[2], (99.0,))[99.0],
    ]
    assert p99_per_second(SecondHists.empty(), 2) == [None, None]  # no rows logged
    (trace,) = build_timeline(_two_phases_and_a_gap()).traces()
    assert trace.p99_ns[:3] == tuple(p99_per_second(SecondHists.from_dense(np.stack(rows)), 3))
    assert trace.p99_ns[0] == pytest.approx(900_000, rel=0.01)  # the 99th of 100
    assert trace.throughput[1] == 0.0  # ... but a throughput of 0


def test_events_are_marks_at_their_wall_clock_time_and_skipped_ones_are_absent():
    tl = build_timeline(_two_phases_and_a_gap())
    (mark,) = tl.marks
    assert (mark.x_s, mark.offset_s, mark.label, mark.phase) == (
        1.5,
        1.5,
        "mark cache flushed",
        "random-read",
    )


MARKED = """
name: marked
title: A mark on two fio servers
targets:
  data: {size: 16MiB}
phases:
  - name: steady
    kind: measure
    duration: 3s
    workloads: [{name: rr, rw: randread, bs: 4k}]
    events:
      - {at: 0.2s, do: "mark here"}
"""


def test_the_events_table_and_the_timeline_place_an_event_at_one_time(db_path):
    # seen: availability's timeline drew the stop at +4.0 s where the events
    # table said +5 s. On fio servers the events count from when the last host
    # began (JobsWatch), the per-second figures from the first host's logs:
    # here the second host began 0.6 s after the first
    from tests.fake_backend import FakeBackend, Step

    from iorig.report.tables.events import event_table
    from iorig.run.session import execute
    from iorig.scenario.loading import resolve, source_from_text
    from iorig.store import Store

    hosts = ("127.0.0.2:8765", "127.0.0.3:8765")
    backend = FakeBackend(hosts=hosts, steps=lambda p, r: Step(late_ms={hosts[1]: 600}, hold_s=0.4))
    plan = backend.prepare(
        resolve(source_from_text(MARKED, "m.yaml")), {}, allow_destroy=False, repeats=1
    )
    with Store(db_path) as store:
        stored = store.load_run(execute(plan, store, backend, command="test").run_id)
    (mark,) = build_timeline(stored).marks
    assert mark.offset_s == pytest.approx(0.8, abs=0.15)  # 0.6 s + 0.2 s, where it happened
    analysis = analyse(stored)
    table = event_table(analysis)
    assert table is not None
    (row,) = table.rows
    assert row[0] == f"steady +{mark.offset_s:.1f}s", row  # as the timeline draws it
    (event,) = analysis.events
    assert event.at_s == mark.offset_s  # the impact reads the series there too
    (moved,) = [n for n in table.notes if "asked for" in n]
    assert moved.startswith(f"steady +{mark.offset_s:.1f}s mark here: asked for +0.2s"), moved


def test_one_metric_for_the_whole_run():
    iops = _phase("r", T0, 2, scopes=(_scope([100, 200], bs=8192),), headline=Metric.IOPS)
    fill = _phase(
        "fill",
        T0 - 5,
        4,
        PhaseKind.PREFILL,
        scopes=(_scope([10, 10]),),
        headline=Metric.BYTES_PER_S,
    )
    tl = build_timeline(_run([iops, fill]))
    assert tl.metric is Metric.IOPS  # the measured phases' headline
    assert [p.name for p in tl.phases] == ["fill", "r"]  # in the order they ran
    assert tl.traces()[0].throughput == (10, 10, None, 100, 200)  # the prefill in IOPS too
    seq = _phase("s", T0 + 3, 2, scopes=(_scope([3, 4], bs=1 << 20),), headline=Metric.BYTES_PER_S)
    tl = build_timeline(_run([iops, seq]))
    assert tl.metric is Metric.BYTES_PER_S  # measured phases differ: bytes/s for all
    assert tl.traces()[0].throughput == (100 * 8192, 200 * 8192, None, 3 << 20, 4 << 20)


def test_multi_host_runs_have_the_aggregate_and_each_host():
    scopes = (
        _scope([30, 30]),
        _scope([10, 10], where=Scope(host="h1")),
        _scope([20, 20], where=Scope(host="h2")),
    )
    tl = build_timeline(_run([_phase("m", T0, 2, scopes=scopes)], hosts=("h1", "h2")))
    assert [(t.host, t.throughput) for t in tl.traces()] == [
        (None, (30, 30)),
        ("h1", (10, 10)),
        ("h2", (20, 20)),
    ]


def test_repeats_are_named_by_their_number():
    phases = [_phase("m", T0 + 10 * r, 2, repeat=r, scopes=(_scope([1, 2]),)) for r in range(2)]
    assert [p.label for p in build_timeline(_run(phases)).phases] == ["m #1", "m #2"]


# ---------------------------------------------------------------- sparklines


def test_sparkline_of_a_known_series():
    assert sparkline([0, 1, 2, 3, 4, 5, 6, 7], top=8, width=80) == BLOCKS
    assert sparkline([0, 4, 8, 16], top=8, width=10) == "▁▅██"  # above the top: the highest
    assert sparkline([5, 5], top=0, width=10) == "▁▁"


def test_sparkline_downsamples_by_averaging_to_its_width():
    assert downsample([1, 3, 5, 7], 2) == [2.0, 6.0]
    line = sparkline([8.0] * 50 + [0.0] * 50, top=8, width=10)
    assert line == "█████▁▁▁▁▁"
    assert len(sparkline(list(range(1000)), top=1000, width=37)) == 37


def _plain(width: int, unicode: bool = True) -> list[str]:
    lines = timeline_lines(build_timeline(_two_phases_and_a_gap()), width, unicode=unicode)
    return [line.plain for line in lines]


def test_timeline_lines_one_per_phase_within_the_width():
    for width in (90, 140):
        lines = _plain(width)
        phases = [line for line in lines if re.match(r"(random-read|pause)", line)]
        assert len(phases) == 3
        assert all(len(line) <= width for line in lines[2:]), lines  # after the heading
    long = _run([_phase("long", T0, 501, scopes=(_scope(list(range(500))),))])
    (line,) = timeline_lines(build_timeline(long), 100)[2:]
    assert len(line.plain) == 100  # 500 seconds averaged into the rest of the line
    assert line.plain.endswith("█") and f"  {BLOCKS[0]}" in line.plain  # rising from 0
    narrow = _plain(50)  # no room left: each sparkline on a line of its own
    assert "    ▇▁█" in narrow and all(
        len(line) <= 50 for line in narrow if line.startswith("    ▇")
    )
    lines = _plain(100)
    first = next(line for line in lines if line.startswith("random-read "))
    assert "measure" in first and "ok" in first and "+0.0s" in first and "3.2s" in first
    assert "1.00K IOPS" in first  # the median of 1000, 0, 1200
    assert first.rstrip().endswith("▇▁█")  # scaled to the run's highest second (1200)
    pause = next(line for line in lines if line.startswith("pause"))
    assert "+3.3s" in pause and "2.0s" in pause and "no I/O" in pause
    mark = lines[lines.index(first) + 1]
    assert mark.strip() == "↳ mark cache flushed at +1.5s into the phase (start +1.5s)"
    assert "never" not in "\n".join(lines)  # a skipped event is not listed


def test_timeline_lines_in_plain_ascii():
    text = "\n".join(_plain(100, unicode=False))
    assert text.isascii()
    assert "- mark cache flushed" in text


def test_timeline_lines_print_without_colour_codes_off_a_terminal(tmp_path):
    out = (tmp_path / "out.txt").open("w", encoding="utf-8")
    console = Console(file=out, width=100)  # not a terminal
    for line in timeline_lines(build_timeline(_two_phases_and_a_gap()), console.width):
        console.print(line)
    out.close()
    text = (tmp_path / "out.txt").read_text()
    assert "\x1b[" not in text and "random-read" in text


# ---------------------------------------------------------------- a real run

SCENARIO = """\
name: timeline
title: every kind of phase
targets:
  data: {size: 8MiB}
phases:
  - {name: fill, kind: prefill, workloads: [{rw: write, bs: 1MiB, iodepth: 4}]}
  - name: warm
    kind: warmup
    duration: 2s
    workloads: [{rw: randread, bs: 4k, iodepth: 8}]
  - name: first
    kind: measure
    duration: 2s
    workloads: [{rw: randread, bs: 4k, iodepth: 8}]
  - {name: rest, kind: idle, duration: 1s}
  - name: second
    kind: measure
    duration: 2s
    workloads: [{rw: randread, bs: 4k, iodepth: 8}]
"""


@pytest.mark.fio
def test_show_timeline_of_a_real_run(iorig, scratch):
    path = scratch / "timeline.yaml"
    path.write_text(SCENARIO)
    iorig("run", str(path), "--target", str(scratch / "data"), check=True)
    out = iorig("show", "last", "--timeline", check=True).stdout
    assert "\x1b[" not in out  # not a terminal: no colour
    names = ["fill", "warm", "first", "rest", "second"]
    rows = [line for line in out.splitlines() if re.match(rf"({'|'.join(names)}) +[a-z]+ ", line)]
    assert [r.split()[:3] for r in rows] == [
        ["fill", "prefill", "ok"],
        ["warm", "warmup", "ok"],
        ["first", "measure", "ok"],
        ["rest", "idle", "ok"],
        ["second", "measure", "ok"],
    ]
    starts = [float(re.search(r"\+(\d+\.\d)s", r)[1]) for r in rows]
    assert starts[0] == 0.0 and starts == sorted(starts)
    for row in rows[1:3] + rows[4:]:  # the timed I/O phases have seconds to draw
        assert "IOPS" in row and "p99" in row and re.search(f"[{BLOCKS}]+$", row), row
    assert "no I/O" in rows[3]
    refused = iorig("show", "last", "--timeline", "--json")
    assert refused.returncode != 0 and "--timeline" in refused.stderr


# ---------------------------------------------------------------- HTML in Chromium


@pytest.mark.browser
def test_html_timeline_in_headless_chromium(tmp_path: Path):
    browser = chromium_or_skip()
    stored = _two_phases_and_a_gap()
    first, pause, second = stored.phases
    evil = EventRecord(
        2.5, EventAction.MARK, 'cut <b>power</b> & "see"', EventStatus.DONE, T0 + 2.5, T0 + 2.5
    )
    first = replace(first, events=(*first.events, evil))
    stored = replace(stored, phases=(first, pause, second))
    report = tmp_path / "report.html"
    report.write_text(HtmlExporter().run(analyse(stored), RenderOptions()))
    html = report.read_text()
    assert "<b>power</b>" not in html
    dom, console, _ = dump_dom(browser, report, tmp_path / "profile", window="1200,2000")
    assert console == [], console  # no JS error, no CSP violation
    assert 'data-charts-drawn="7"' in dom  # the timeline + 2 measured phases × 3
    assert re.search(r'class="chart timeline js-plotly-plot" id="timeline-0"', dom)  # drawn
    annotations = re.findall(r'class="annotation-text"[^>]*>(.*?)</text>', dom, re.S)
    texts = [re.sub(r"<[^>]+>", "", a) for a in annotations]
    for name in ("random-read", "pause", "random-read-2"):
        assert name in texts, texts  # each phase's band is named
    assert "mark cache flushed" in texts
    assert 'mark cut &lt;b&gt;power&lt;/b&gt; &amp; "see"' in texts  # shown as text, not markup
    assert "mark never" not in texts  # the skipped event is not drawn (the events table lists it)
    assert "<b>power</b>" not in dom
