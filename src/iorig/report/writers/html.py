"""Self-contained HTML report: one file with plotly.js inlined, nothing
fetched at view time (a Content-Security-Policy forbids it), every
user-supplied string escaped by Jinja's autoescape."""

from __future__ import annotations

import base64
import datetime as dt
import hashlib
import json
import math
import re
from dataclasses import dataclass
from typing import Any

import jinja2
import numpy as np
from markupsafe import Markup

from iorig import __version__
from iorig.analyze.analysis import Comparison, RunAnalysis
from iorig.analyze.search import (
    AcceleratorsResult,
    CurveResult,
    KneeResult,
    LoadPointResult,
    SweepResult,
)
from iorig.model import ALL, Metric, PhaseKind, PhaseResult, StoredRun, histogram
from iorig.model.combine import headline_scope
from iorig.model.records import flatten, target_name
from iorig.report.options import RenderOptions
from iorig.report.tables.compare import comparison_notes, comparison_tables, run_limit_table
from iorig.report.tables.downsample import Drawn, envelope, note
from iorig.report.tables.metrics import metric
from iorig.report.tables.run import TableModel, run_tables, summary_tables
from iorig.report.tables.searches import search_tables
from iorig.report.tables.sut import sut_tables, undisclosed
from iorig.report.tables.timeline import build_timeline
from iorig.report.writers.terminal import limit_text
from iorig.report.writers.timelinechart import chart_title, timeline_chart
from iorig.units import format_bytes, format_duration, format_latency

_PERCENTILE_TICKS = (0, 1, 2, 3, 4, 5)
_PERCENTILE_LABELS = ("0", "90", "99", "99.9", "99.99", "99.999")


@dataclass(frozen=True)
class ReportRun:
    analysis: RunAnalysis
    label: str

    @property
    def stored(self) -> StoredRun:
        return self.analysis.stored


def _when(ts: float | None) -> str:
    if ts is None:
        return "-"
    return dt.datetime.fromtimestamp(ts).strftime("%Y-%m-%d %H:%M:%S")


def _run_header(r: ReportRun) -> dict[str, Any]:
    run = r.stored.run
    ended = run.ended_at or run.started_at
    return {
        "id": run.id,
        "label": r.label,
        "scenario": run.scenario,
        "scenario_version": run.scenario_version,
        "title": run.title,
        "origin": run.scenario_origin,
        "status": run.status,
        "error": run.error,
        "profile": run.profile,
        "started": _when(run.started_at),
        "duration": format_duration(ended - run.started_at),
        "targets": [
            {
                "role": target_name(t),
                "path": t["path"],
                "kind": t["kind"],
                "size": format_bytes(t["size_bytes"]),
            }
            for t in run.targets
        ],
        "hosts": ", ".join(run.hosts),
        "fio_version": run.fio_version,
        "engines": ", ".join(sorted({p.engine for p in r.stored.phases if p.engine})) or "-",
        "params": [(name, p["text"], p["origin"]) for name, p in run.params.items()],
        "command": run.command,
        "warnings": sorted(run.warnings, key=lambda w: w.severity != "warning"),
        "limit": limit_text(run.disclosure.interface_limit) if run.disclosure else None,
        "tables": run_tables(r.analysis),
        "disclosure": [
            (section, list(flatten(content).items()))
            for section, content in run.disclosure.sections.items()
        ],
        "sut": sut_tables(run.sut, all_sections=False),
        "sut_missing": undisclosed(run.sut) if run.sut else ["all (no description given)"],
    }


def steady_charts(runs: list[ReportRun]) -> list[dict[str, Any]]:
    """Convergence plots: round means with the steady window and its band."""
    charts = []
    for r in runs:
        for p in r.stored.phases:
            st = p.steady
            if st is None or not st.rounds:
                continue
            x = list(range(1, len(st.rounds) + 1))
            scale = metric(st.metric).scale
            data: list[dict[str, Any]] = [
                {
                    "type": "scatter",
                    "mode": "lines+markers",
                    "name": "round mean",
                    "x": x,
                    "y": [v * scale for v in st.rounds],
                }
            ]
            shapes = []
            tail = st.rounds[-st.window :]
            if len(st.rounds) >= st.window:
                mean = sum(tail) / len(tail) * scale
                start = len(st.rounds) - st.window + 1
                for level, name in (
                    (1 + st.max_range / 2, "+range/2"),
                    (1.0, "window mean"),
                    (1 - st.max_range / 2, "-range/2"),
                ):
                    data.append(
                        {
                            "type": "scatter",
                            "mode": "lines",
                            "name": name,
                            "x": [start, len(st.rounds)],
                            "y": [mean * level] * 2,
                            "line": {"dash": "dot" if level != 1.0 else "dash"},
                        }
                    )
                shapes.append(
                    {
                        "type": "rect",
                        "xref": "x",
                        "yref": "paper",
                        "x0": start - 0.5,
                        "x1": len(st.rounds) + 0.5,
                        "y0": 0,
                        "y1": 1,
                        "opacity": 0.12,
                        "fillcolor": "green" if st.converged else "red",
                        "line": {"width": 0},
                    }
                )
            verdict = "steady" if st.converged else "NOT steady"
            charts.append(
                {
                    "id": f"steady-{len(charts)}",
                    "title": f"{r.label}: {p.name} — {verdict} after {len(st.rounds)} rounds",
                    "data": data,
                    "layout": _layout(
                        f"{r.label}: {p.name} ({verdict})",
                        f"round ({st.round_s:g} s each)",
                        metric(st.metric).unit,
                        shapes=shapes,
                        hovermode="closest",
                    ),
                }
            )
    return charts


def _finite(values: np.ndarray) -> list[float | None]:
    return [None if v is None or math.isnan(v) else float(v) for v in values]


def _percentile_trace(counts: np.ndarray) -> tuple[list[float], list[float]]:
    values, cumulative = histogram.percentile_curve(counts)
    with np.errstate(divide="ignore"):
        x = -np.log10(np.clip(1.0 - cumulative, 1e-6, 1.0))
    return x.tolist(), (values / 1e6).tolist()


def _latency_ticks(traces: list[dict[str, Any]]) -> dict[str, Any]:
    """A log axis of latencies (ms) labelled in their own units at 1, 2 and 5
    of each decade (every decade's 1 alone past four decades): plotly's own
    labelled minor ticks as bare digits ("1, 9, 8…2") and put "100µ" on an
    ms axis."""
    values = [v for t in traces for v in t.get("y", ()) if v is not None and v > 0]
    if not values:
        return {}
    low, high = math.floor(math.log10(min(values))), math.ceil(math.log10(max(values)))
    steps = (1,) if high - low > 4 else (1, 2, 5)
    ticks = [m * 10.0**d for d in range(low, high + 1) for m in steps]
    # "100 µs", "2 ms": a tick is a round number, its zeros after the point say nothing
    text = [re.sub(r"\.0+ ", " ", format_latency(t * 1e6)) for t in ticks]
    return {"tickvals": ticks, "ticktext": text}


def _layout(title: str, x_title: str, y_title: str, **extra: Any) -> dict[str, Any]:
    layout = {
        "title": chart_title(title),
        "margin": {"l": 60, "r": 20, "t": 60, "b": 45},
        "xaxis": {"title": {"text": x_title}},
        "yaxis": {"title": {"text": y_title}, "rangemode": "tozero"},
        "legend": {"orientation": "h", "y": -0.25},
        "hovermode": "x unified",
    }
    layout.update(extra)
    return layout


def interval_traces(
    p: PhaseResult, name: str, t_s: np.ndarray, scale: float
) -> list[dict[str, Any]]:
    """An ``until: precise`` phase's median as a dashed line across its
    seconds and its 95 % interval as a band around it."""
    state = p.precision
    if state is None or state.low is None or state.high is None or t_s.size == 0:
        return []
    first, last = float(t_s[0]), float(t_s[-1])
    low, high, median = state.low * scale, state.high * scale, state.median * scale
    asked = f"asked ±{state.target_pct:g} %"
    return [
        {
            "type": "scatter",
            "mode": "lines",
            "name": f"{name}: median's 95 % interval (±{state.achieved_pct:.1f} %, {asked})",
            "x": [first, last, last, first, first],
            "y": [low, low, high, high, low],
            "fill": "toself",
            "opacity": 0.25,
            "line": {"width": 0},
            "hoverinfo": "name",
        },
        {
            "type": "scatter",
            "mode": "lines",
            "name": f"{name}: median",
            "x": [first, last],
            "y": [median, median],
            "line": {"dash": "dash"},
        },
    ]


def phase_charts(index: int, name: str, runs: list[ReportRun]) -> list[dict[str, Any]]:
    """Throughput and latency per second (runs overlaid) and percentile curves."""
    throughput, latency, percentiles = [], [], []
    drawn: list[Drawn] = []  # long series are drawn as envelopes
    headline = Metric.IOPS
    for r in runs:
        repeats = [p for p in r.stored.phases if p.name == name and p.kind is PhaseKind.MEASURE]
        merged = []
        for p in repeats:
            scope = headline_scope(p)
            if scope is None or ALL not in scope.series:
                continue
            headline = p.headline
            s = scope.series[ALL]
            trace_name = r.label + (f" #{p.repeat + 1}" if len(repeats) > 1 else "")
            rate, lat = s.values(headline) * metric(headline).scale, s.lat_mean_ns / 1e6
            drawn += [envelope(rate), envelope(lat)]
            throughput.append(
                {
                    "type": "scatter",
                    "mode": "lines" if drawn[-2].reduced else "lines+markers",
                    "name": trace_name,
                    "x": s.t_s[drawn[-2].index].tolist(),
                    "y": _finite(rate[drawn[-2].index]),
                }
            )
            throughput += interval_traces(p, trace_name, s.t_s, metric(headline).scale)
            latency.append(
                {
                    "type": "scatter",
                    "mode": "lines" if drawn[-1].reduced else "lines+markers",
                    "name": trace_name,
                    "x": s.t_s[drawn[-1].index].tolist(),
                    "y": _finite(lat[drawn[-1].index]),
                }
            )
            if ALL in scope.totals:
                merged.append(scope.totals[ALL].hist)
        if merged:
            x, y = _percentile_trace(histogram.merge(merged))
            percentiles.append(
                {"type": "scatter", "mode": "lines", "name": r.label, "x": x, "y": y}
            )
    prefix = f"chart-{index}"
    unit = metric(headline).unit
    return [
        {
            "id": f"{prefix}-throughput",
            "data": throughput,
            "layout": _layout(f"{name}: {unit} per second{note(drawn)}", "second", unit),
        },
        {
            "id": f"{prefix}-latency",
            "data": latency,
            "layout": _layout(
                f"{name}: mean completion latency per second{note(drawn)}", "second", "ms"
            ),
        },
        {
            "id": f"{prefix}-percentiles",
            "data": percentiles,
            "layout": _layout(
                f"{name}: latency percentiles (merged histograms)",
                "percentile",
                "ms",
                xaxis={
                    "title": {"text": "percentile"},
                    "tickvals": list(_PERCENTILE_TICKS),
                    "ticktext": list(_PERCENTILE_LABELS),
                },
                yaxis={"title": {"text": "latency"}, "type": "log", **_latency_ticks(percentiles)},
                hovermode="closest",
            ),
        },
    ]


def _json_for_script(data: Any) -> Markup:
    # Inside <script>, "</script>" or "<!--" in a user string would end the
    # script; escaping <, > and & as JSON unicode escapes makes that impossible.
    text = json.dumps(data, allow_nan=False)
    text = text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    return Markup(text)


def _plotly_escaped(data: Any) -> Any:
    """Every string of a chart with plotly's own markup escaped: plotly draws
    names, titles and tick labels as a subset of HTML (a label ``<a href=…>``
    became a live link), and shows ``&lt;`` as ``<``."""
    if isinstance(data, str):
        return data.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    if isinstance(data, dict):
        return {key: _plotly_escaped(value) for key, value in data.items()}
    if isinstance(data, list | tuple):
        return [_plotly_escaped(value) for value in data]
    return data


_INLINE_SCRIPT = re.compile(r"<script>(.*?)</script>", re.S)
CSP_PLACEHOLDER = "script-src 'iorig-script-hashes'"


def _with_script_hashes(page: str, own_site: bool = False) -> str:
    """The page with its CSP allowing exactly its own inline scripts, by hash
    (no 'unsafe-inline', no 'unsafe-eval'); ``own_site``: and scripts from
    the site that serves it (plotly, from iorig serve)."""
    hashes = ("'self' " if own_site else "") + " ".join(
        "'sha256-" + base64.b64encode(hashlib.sha256(m.encode()).digest()).decode() + "'"
        for m in _INLINE_SCRIPT.findall(page)
    )
    return page.replace(CSP_PLACEHOLDER, f"script-src {hashes}", 1)


def _plotly_js() -> Markup:
    from plotly.offline import get_plotlyjs

    js = get_plotlyjs()
    return Markup(js.replace("</script", "<\\/script"))


_ENV = jinja2.Environment(
    loader=jinja2.PackageLoader("iorig.report", "templates"),
    autoescape=True,
    undefined=jinja2.StrictUndefined,
)


def render_report(
    runs: list[ReportRun],
    tables: list[TableModel],
    notes: list[str],
    comparison: Comparison | None = None,
    plotly_src: str | None = None,
) -> str:
    names = list(
        dict.fromkeys(p.name for r in runs for p in r.stored.phases if p.kind is PhaseKind.MEASURE)
    )
    steady = steady_charts(runs)
    search = search_charts(runs)
    charts = [c for i, name in enumerate(names) for c in phase_charts(i, name, runs)]
    charts += [{k: v for k, v in c.items() if k != "title"} for c in steady + search]
    # one timeline per run, at the top of its section
    headers = [
        _run_header(r) | {"timeline": f"timeline-{i}" if r.stored.phases else None}
        for i, r in enumerate(runs)
    ]
    charts = [
        timeline_chart(build_timeline(r.stored), h["timeline"], f"{r.label}: the whole run")
        for r, h in zip(runs, headers, strict=True)
        if h["timeline"]
    ] + charts
    phases = [
        {
            "name": name,
            "jobs": [
                {"label": r.label, "text": r.analysis.job_texts[name]}
                for r in runs
                if name in r.analysis.job_texts
            ],
        }
        for name in names
    ]
    title = "iorig report: " + " vs ".join(r.label for r in runs)
    page = _ENV.get_template("report.html.j2").render(
        title=title,
        version=__version__,
        generated=dt.datetime.now().strftime("%Y-%m-%d %H:%M:%S"),
        runs=headers,
        differences=list(comparison.definition_differences) if comparison else [],
        tables=tables,
        notes=notes,
        phases=phases,
        steady=[{"id": c["id"], "title": c["title"]} for c in steady],
        search=[{"id": c["id"], "title": c["title"]} for c in search],
        plotly_js=None if plotly_src else _plotly_js(),
        plotly_src=plotly_src,
        charts_json=_json_for_script(_plotly_escaped(charts)),
    )
    return _with_script_hashes(page, own_site=plotly_src is not None)


class HtmlExporter:
    def run(self, analysis: RunAnalysis, options: RenderOptions) -> str:
        tables = summary_tables(analysis.measured) + search_tables(analysis.search)
        if options.limit is not None:
            tables.append(run_limit_table(analysis, options.limit))
        runs = [ReportRun(analysis, analysis.run.name)]
        return render_report(runs, tables, [], plotly_src=options.plotly_src)

    def comparison(self, cmp: Comparison, options: RenderOptions) -> str:
        tables = comparison_tables(cmp, options)
        runs = [ReportRun(a, label) for a, label in zip(cmp.runs, cmp.labels, strict=True)]
        return render_report(runs, tables, comparison_notes(cmp), cmp, options.plotly_src)


def _axis_order(values: list[str]) -> list[str]:
    return list(dict.fromkeys(values))


def accelerators_charts(runs: list[ReportRun]) -> list[dict[str, Any]]:
    """An accelerators search: AU (the lowest epoch's, what the verdict
    judges, and the mean) against accelerators per host, with the floor."""
    found = [
        (r, a) for r in runs if isinstance(a := r.analysis.search, AcceleratorsResult) and a.points
    ]
    if not found:
        return []
    data: list[dict[str, Any]] = []
    for r, a in found:
        x = [p.accelerators for p in a.points]
        data.append(
            {
                "type": "scatter",
                "mode": "lines+markers",
                "name": f"{r.label} lowest epoch (most {a.most})",
                "x": x,
                "y": [None if p.au_min is None else p.au_min * 100 for p in a.points],
                "text": [str(p.training.outcome) for p in a.points],
                "marker": {"symbol": ["circle" if p.passed else "x" for p in a.points], "size": 9},
            }
        )
        data.append(
            {
                "type": "scatter",
                "mode": "markers",
                "name": f"{r.label} mean",
                "x": x,
                "y": [None if p.training.au_mean is None else p.training.au_mean * 100
                      for p in a.points],
            }
        )  # fmt: skip
    floor = found[0][1].au_floor * 100
    xs = [p.accelerators for _, a in found for p in a.points]
    data.append(
        {
            "type": "scatter",
            "mode": "lines",
            "name": f"floor {floor:.0f}%",
            "x": [min(xs), max(xs)],
            "y": [floor, floor],
            "line": {"dash": "dash"},
        }
    )
    return [
        {
            "id": "search-accelerators",
            "title": "accelerators search",
            "data": data,
            "layout": _layout(
                "accelerator utilisation against accelerators per host",
                "accelerators per host",
                "AU %",
                hovermode="closest",
            ),
        }
    ]


def search_charts(runs: list[ReportRun]) -> list[dict[str, Any]]:
    """Charts of what search runs found: a sweep's throughput and latency
    against the swept parameter, a knee's curve with the knee and the USL fit,
    a load-point curve's latency against achieved throughput (with its ORT)."""
    charts: list[dict[str, Any]] = []
    sweeps = [(r, s) for r in runs if isinstance(s := r.analysis.search, SweepResult) and s.points]
    if sweeps:
        x_name = sweeps[0][1].x_axis
        thr, lat = [], []
        for r, sw in sweeps:
            for group, points in sw.groups().items():
                by_test: dict[str, list] = {}
                for p in points:
                    by_test.setdefault(p.test, []).append(p)
                several = len(by_test) > 1
                for test, members in by_test.items():
                    name = " ".join(
                        x
                        for x in (r.label, test if several else "", group if group != "all" else "")
                        if x
                    )
                    x = [p.coords.get(sw.x_axis, "") for p in members]
                    thr.append(
                        {
                            "type": "scatter",
                            "mode": "lines+markers",
                            "name": name,
                            "x": x,
                            "y": [p.phase.bytes_per_s / 1e6 for p in members],
                        }
                    )
                    lat.append(
                        {
                            "type": "scatter",
                            "mode": "lines+markers",
                            "name": name,
                            "x": x,
                            "y": _finite(np.array([p.phase.lat_mean_ns / 1e6 for p in members])),
                        }
                    )
        order = _axis_order([p.coords.get(x_name, "") for _, s in sweeps for p in s.points])
        category = {
            "type": "category",
            "categoryorder": "array",
            "categoryarray": order,
            "title": {"text": x_name},
        }
        charts.append(
            {
                "id": "search-sweep-throughput",
                "title": "sweep throughput",
                "data": thr,
                "layout": _layout(
                    f"throughput against {x_name}",
                    x_name,
                    "MB/s",
                    xaxis=category,
                    hovermode="closest",
                ),
            }
        )
        charts.append(
            {
                "id": "search-sweep-latency",
                "title": "sweep latency",
                "data": lat,
                "layout": _layout(
                    f"mean completion latency against {x_name}",
                    x_name,
                    "ms",
                    xaxis=category,
                    hovermode="closest",
                ),
            }
        )
    knees = [(r, k) for r in runs if isinstance(k := r.analysis.search, KneeResult)]
    if knees:
        thr, lat = [], []
        headline = knees[0][1].headline
        scale = metric(headline).scale
        for r, k in knees:
            xs = [p.concurrency for p in k.points]
            thr.append(
                {
                    "type": "scatter",
                    "mode": "lines+markers",
                    "name": r.label,
                    "x": xs,
                    "y": [p.throughput * scale for p in k.points],
                }
            )
            if k.knee.point:
                # a star on the knee; where the curve never flattened, an
                # arrow past the last point: the table's and sentence's words
                thr.append(
                    {
                        "type": "scatter",
                        "mode": "markers",
                        "name": f"{r.label}: knee {k.knee.where}",
                        "x": [k.knee.point.concurrency],
                        "y": [k.knee.point.throughput * scale],
                        "marker": {
                            "size": 14,
                            "symbol": "triangle-right" if k.knee.beyond else "star",
                        },
                    }
                )
            if k.usl:
                grid = np.geomspace(min(xs), max(xs), 60)
                thr.append(
                    {
                        "type": "scatter",
                        "mode": "lines",
                        "name": f"{r.label}: USL fit",
                        "x": grid.tolist(),
                        "y": (np.asarray(k.usl.predict(grid)) * scale).tolist(),
                        "line": {"dash": "dot"},
                    }
                )
            lat.append(
                {
                    "type": "scatter",
                    "mode": "lines+markers",
                    "name": f"{r.label} p99",
                    "x": xs,
                    "y": [p.lat_p99_ns / 1e6 for p in k.points],
                }
            )
            lat.append(
                {
                    "type": "scatter",
                    "mode": "lines+markers",
                    "name": f"{r.label} mean",
                    "x": xs,
                    "y": [p.lat_mean_ns / 1e6 for p in k.points],
                }
            )
        log2 = {"type": "log", "title": {"text": "concurrency (jobs × iodepth)"}, "dtick": 0.30103}
        axis = metric(headline).unit
        charts.append(
            {
                "id": "search-knee-throughput",
                "title": "knee",
                "data": thr,
                "layout": _layout(
                    "throughput against concurrency", "", axis, xaxis=log2, hovermode="closest"
                ),
            }
        )
        charts.append(
            {
                "id": "search-knee-latency",
                "title": "knee latency",
                "data": lat,
                "layout": _layout(
                    "latency against concurrency", "", "ms", xaxis=log2, hovermode="closest"
                ),
            }
        )
    loads = [
        (r, lp) for r in runs if isinstance(lp := r.analysis.search, LoadPointResult) and lp.points
    ]
    if loads:
        data = []
        for r, lp in loads:
            ort = f", ORT {lp.ort_ms:.2f} ms" if lp.ort_ms is not None else ""
            data.append(
                {
                    "type": "scatter",
                    "mode": "lines+markers",
                    "name": f"{r.label}{ort}",
                    "x": [p.achieved_ops_per_s for p in lp.points],
                    "y": [p.lat_mean_ns / 1e6 for p in lp.points],
                    "text": [
                        f"{p.load} {lp.metric}" + ("" if p.valid else " (invalid)")
                        for p in lp.points
                    ],
                    "marker": {
                        "symbol": ["circle" if p.valid else "x" for p in lp.points],
                        "size": 9,
                    },
                }
            )
        charts.append(
            {
                "id": "search-loadpoints",
                "title": "load points",
                "data": data,
                "layout": _layout(
                    "average latency against achieved ops/s (load points)",
                    "ops/s",
                    "ms",
                    hovermode="closest",
                ),
            }
        )
    charts += accelerators_charts(runs)
    curves = [(r, c) for r in runs if isinstance(c := r.analysis.search, CurveResult) and c.points]
    if curves:
        data = []
        for r, c in curves:
            ort = f", ORT {c.ort_ms:.3f} ms" if c.ort_ms is not None else ""
            xs = [p.load.achieved_ops_per_s for p in c.points]
            data.append(
                {
                    "type": "scatter",
                    "mode": "lines+markers",
                    "name": f"{r.label} mean{ort}",
                    "x": xs,
                    "y": [p.load.lat_mean_ms for p in c.points],
                    "text": [f"{p.fraction * 100:g}% load" for p in c.points],
                }
            )
            data.append(
                {
                    "type": "scatter",
                    "mode": "lines+markers",
                    "name": f"{r.label} p99",
                    "x": xs,
                    "line": {"dash": "dot"},
                    "y": _finite(
                        np.array([(p.load.lat_p99_ns or math.nan) / 1e6 for p in c.points])
                    ),
                }
            )
        charts.append(
            {
                "id": "search-curve",
                "title": "load-point curve",
                "data": data,
                "layout": _layout(
                    "latency against achieved throughput (load points)",
                    "achieved IOPS",
                    "ms",
                    hovermode="closest",
                ),
            }
        )
    return charts
