"""Tables of a run's events and their impact, and of two runs' impacts side
by side (seed 001's before/after), for every output format."""

from __future__ import annotations

from iorig.analyze.analysis import Comparison, RunAnalysis
from iorig.analyze.impact import EventImpact, Impact
from iorig.report.tables.metrics import metric
from iorig.report.tables.model import TableModel
from iorig.units import format_latency, format_si

DEFINITIONS = (
    "baseline: median per second over the seconds before the event; dip: the lowest second "
    "after it, % of the baseline; recovery: from the event until the series stays within the "
    "tolerance band of the baseline for the settle time (the scenario's impact: rule); lost: "
    "I/Os short of the baseline until then; errors: the I/O errors fio reported in the event's "
    "phase (the whole phase)"
)


# an event placed this far from the time it was asked for gets a note saying so
MOVED_S = 0.5


def _when(e: EventImpact) -> str:
    """Its phase and where it fell on the phase's axis, as the timeline draws
    it and its impact is read; an event that never happened: when it was asked."""
    at = f"+{e.at_s:.1f}s" if e.at_s is not None else f"+{e.event.at_s:g}s"
    return f"{e.phase}{f' #{e.repeat + 1}' if e.repeat else ''} {at}"


def _moved(e: EventImpact) -> str | None:
    if e.at_s is None or abs(e.at_s - e.event.at_s) < MOVED_S:
        return None
    return (
        f"{_when(e)} {e.event.label}: asked for +{e.event.at_s:g}s on the events' clock, it "
        f"came {e.at_s:.1f} s into the phase's per-second figures (on fio servers the events "
        "count from the last host to begin, the figures from the first; runs stored before "
        "events counted from the jobs' first I/O counted them from fio's launch)"
    )


def _recovery(i: Impact) -> str:
    if i.recovery_s is not None:
        return f"{i.recovery_s:.1f} s"
    return f"not in {i.observed_s:.0f} s" if i.baseline else "-"


def _errors(i: Impact | None) -> str:
    """The total, with its types when fio said which (``12: read: Input/output error 12``)."""
    if i is None:
        return "-"
    types = ", ".join(f"{t} {n:,}" for t, n in i.errors_by_type.items())
    return f"{i.errors:,}" + (f" ({types})" if types else "")


def _figures(i: Impact | None) -> tuple[str, str, str, str, str]:
    if i is None:
        return "-", "-", "-", "-", "-"
    fmt = metric(i.metric)
    return (
        fmt.format(i.baseline) if i.baseline is not None else "-",
        f"{i.dip_pct:.0f}%" if i.dip_pct is not None else "-",
        format_latency(i.worst_p99_ns),
        _recovery(i),
        format_si(i.lost_ios) if i.lost_ios is not None else "-",
    )


def event_table(analysis: RunAnalysis) -> TableModel | None:
    if not analysis.events:
        return None
    rows = []
    notes = [DEFINITIONS]
    for e in analysis.events:
        rows.append(
            (_when(e), e.event.label, str(e.event.status), *_figures(e.impact), _errors(e.impact))
        )
        if moved := _moved(e):
            notes.append(moved)
        if e.impact is not None and e.impact.note:
            notes.append(f"{_when(e)} {e.event.label}: {e.impact.note}")
        if e.event.status != "done" and e.event.detail:
            first = e.event.detail.strip().splitlines()[0] if e.event.detail.strip() else ""
            notes.append(f"{_when(e)} {e.event.label}: {first[:200]}")
    return TableModel(
        "Events",
        (
            "when",
            "event",
            "status",
            "baseline",
            "dip",
            "worst p99",
            "recovery",
            "lost I/Os",
            "errors",
        ),
        tuple(rows),
        ("l", "l", "l", "r", "r", "r", "r", "r", "r"),
        tuple(notes),
    )


def event_comparison_table(cmp: Comparison) -> TableModel | None:
    """Each event (by phase, time and action) with every run's impact."""
    keyed: dict[tuple[str, float, str], dict[str, EventImpact]] = {}
    for label, run in zip(cmp.labels, cmp.runs, strict=True):
        for e in run.events:
            if e.impact is not None:
                keyed.setdefault((e.phase, e.event.at_s, e.event.label), {}).setdefault(label, e)
    if not keyed:
        return None
    rows = []
    for (phase, at_s, label), by_run in keyed.items():
        cells = []
        for run_label in cmp.labels:
            e = by_run.get(run_label)
            if e is None or e.impact is None:
                cells.append("-")
                continue
            _, dip, _, recovery, lost = _figures(e.impact)
            errors = f", errors {e.impact.errors:,}" if e.impact.errors else ""
            cells.append(f"dip {dip}, recovery {recovery}, lost {lost}{errors}")
        rows.append((f"{phase} +{at_s:g}s", label, *cells))
    return TableModel(
        "Events compared",
        ("when", "event", *cmp.labels),
        tuple(rows),
        ("l", "l", *("r" for _ in cmp.labels)),
        (DEFINITIONS,),
    )
