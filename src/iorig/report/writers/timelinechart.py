"""The whole-run timeline of the HTML report as a plotly figure (data and
layout, as JSON-ready dicts): throughput per second above, the p99 of each
second below, on one shared wall-clock axis; each phase a shaded band named
above the plot, each event a dashed vertical line with its label; the
aggregate plus one trace per host in multi-host runs. The report escapes
every string of it (phase names, hosts, event labels) for plotly."""

from __future__ import annotations

import datetime as dt
from typing import Any

from iorig.model import EventStatus, PhaseKind, PhaseStatus
from iorig.report.tables.downsample import Drawn, envelope, note, take
from iorig.report.tables.metrics import metric
from iorig.report.tables.timeline import Timeline, Trace
from iorig.report.writers.sparkline import clock

KIND_COLOURS = {
    PhaseKind.PRECONDITION: "#8c6d31",
    PhaseKind.PREFILL: "#8c6d31",
    PhaseKind.WARMUP: "#e0a800",
    PhaseKind.MEASURE: "#2f6db5",
    PhaseKind.IDLE: "#9aa3ad",
    PhaseKind.VERIFY: "#2ca02c",
}
AGGREGATE_COLOUR = "#1d2430"
HOST_COLOURS = (
    "#1f77b4",
    "#ff7f0e",
    "#2ca02c",
    "#d62728",
    "#9467bd",
    "#8c564b",
    "#e377c2",
    "#7f7f7f",
    "#bcbd22",
    "#17becf",
)
EVENT_COLOUR = "#c0262d"
# plotly's toolbar (modebar) takes a chart's top right, 2 to 26 px down
# (drawn in Chromium): titles start under it, so that a long one or a narrow
# chart never puts one beneath it
TOOLBAR_PX = 34
THROUGHPUT_DOMAIN = (0.48, 1.0)
LATENCY_DOMAIN = (0.0, 0.4)


def chart_title(text: str) -> dict[str, Any]:
    """The title of every chart of the report: at the left, under the toolbar."""
    return {
        "text": text,
        "font": {"size": 14},
        "x": 0.01,
        "xanchor": "left",
        "yref": "container",
        "y": 1,
        "yanchor": "top",
        "pad": {"t": TOOLBAR_PX},
    }


def _traces(
    trace: Trace, name: str, colour: str, unit: str, scale: float
) -> tuple[list[dict], list[Drawn]]:
    """The throughput and p99 traces of one host (or the aggregate), each
    drawn as its envelope when long (report/tables/downsample.py)."""
    text = [p or "" for p in trace.phase]
    common = {
        "type": "scatter",
        "mode": "lines+markers",
        "legendgroup": name,
        "line": {"color": colour, "width": 1.5},
        "marker": {"size": 4},
        "connectgaps": False,
    }
    traces, drawn = [], []
    for values, shown, extra in (
        (trace.throughput, lambda v: v * scale, {"name": f"{name}: {unit}" if name else unit}),
        (
            trace.p99_ns,
            lambda v: v / 1e6,
            # dotted: in the legend, told apart from the throughput of its colour
            {
                "name": f"{name}: p99" if name else "p99 latency",
                "yaxis": "y2",
                "line": {"color": colour, "width": 1.5, "dash": "dot"},
            },
        ),
    ):
        kept = envelope(values)
        traces.append(
            common
            | extra
            # thousands of markers a trace cost the browser seconds and show nothing
            | ({"mode": "lines"} if kept.reduced else {})
            | {
                "x": take(trace.x_s, kept),
                "text": take(text, kept),
                "y": [None if v is None else shown(v) for v in take(values, kept)],
            }
        )
        drawn.append(kept)
    return traces, drawn


def timeline_chart(timeline: Timeline, chart_id: str, title: str) -> dict[str, Any]:
    """The chart of one run: ``{"id", "data", "layout"}``."""
    unit = metric(timeline.metric)
    data: list[dict] = []
    drawn: list[Drawn] = []
    several = bool(timeline.hosts)
    for i, trace in enumerate(timeline.traces()):
        if trace.host is None:
            name, colour = ("all hosts" if several else ""), AGGREGATE_COLOUR
        else:
            name, colour = trace.host, HOST_COLOURS[(i - 1) % len(HOST_COLOURS)]
        traces, kept = _traces(trace, name, colour, unit.unit, unit.scale)
        data += traces
        drawn += kept
    shapes: list[dict] = []
    annotations: list[dict] = []
    for i, phase in enumerate(timeline.phases):
        colour = KIND_COLOURS.get(phase.kind, "#9aa3ad")
        failed = phase.status is not PhaseStatus.OK
        shapes.append(
            {
                "type": "rect",
                "xref": "x",
                "yref": "paper",
                "x0": phase.start_s,
                "x1": max(phase.end_s, phase.start_s + 1e-3),
                "y0": 0,
                "y1": 1,
                "layer": "below",
                "fillcolor": colour,
                "opacity": 0.13 if i % 2 == 0 else 0.2,
                "line": {"width": 1.5, "color": EVENT_COLOUR, "dash": "dot"}
                if failed
                else {"width": 0},
            }
        )
        label = phase.label + (f" ({phase.status})" if failed else "")
        annotations.append(
            {
                "x": (phase.start_s + phase.end_s) / 2,
                "xref": "x",
                "yref": "paper",
                "y": 1.0 if i % 2 == 0 else 1.07,
                "yanchor": "bottom",
                "showarrow": False,
                "text": label,
                "font": {"size": 10, "color": colour},
                "name": "phase",
                "hovertext": f"{label}: {phase.kind}, +{clock(phase.start_s)} for "
                f"{clock(phase.duration_s)}",
            }
        )
    for i, mark in enumerate(timeline.marks):
        shapes.append(
            {
                "type": "line",
                "xref": "x",
                "yref": "paper",
                "x0": mark.x_s,
                "x1": mark.x_s,
                "y0": 0,
                "y1": 1,
                "line": {"color": EVENT_COLOUR, "width": 1.5, "dash": "dash"},
            }
        )
        status = "" if mark.status is EventStatus.DONE else f" ({mark.status})"
        annotations.append(
            {
                "x": mark.x_s,
                "xref": "x",
                "yref": "paper",
                "y": 0.97 - 0.07 * (i % 3),
                "yanchor": "top",
                "xanchor": "left",
                "xshift": 3,
                "showarrow": False,
                "text": mark.label + status,
                "name": "event",
                "font": {"size": 10, "color": EVENT_COLOUR},
                "bgcolor": "rgba(255,255,255,0.75)",
                "hovertext": f"{mark.label}{status}: +{clock(mark.offset_s)} into {mark.phase}",
            }
        )
    start = dt.datetime.fromtimestamp(timeline.origin).strftime("%Y-%m-%d %H:%M:%S")
    layout = {
        # the phases' names between it and the plot
        "title": chart_title(title + note(drawn)),
        "margin": {"l": 70, "r": 20, "t": 90, "b": 50},
        "xaxis": {
            "anchor": "y2",
            "title": {"text": f"seconds since the first phase started ({start})"},
            "rangemode": "tozero",
        },
        "yaxis": {
            "domain": list(THROUGHPUT_DOMAIN),
            "title": {"text": f"{unit.unit} per second"},
            "rangemode": "tozero",
        },
        "yaxis2": {
            "domain": list(LATENCY_DOMAIN),
            "anchor": "x",
            "rangemode": "tozero",
            "title": {"text": "p99 of each second (ms)"},
        },
        "shapes": shapes,
        "annotations": annotations,
        "legend": {"orientation": "h", "y": -0.18},
        "hovermode": "x",
    }
    return {"id": chart_id, "data": data, "layout": layout}
