"""Tables as plain data (``TableModel``), built once from an analysis and
rendered by the terminal, Markdown and HTML front ends (``to_markdown``
here, ``to_rich`` in ``model``; the HTML template walks the same model).

This module has a run's own tables; ``cmptables`` and ``searchtables``
those of comparisons and searches."""

from __future__ import annotations

import html
import math
from collections.abc import Mapping
from typing import Any

from iorig.analyze.analysis import RunAnalysis
from iorig.analyze.criteria import Verdict, criteria_of, latency_columns
from iorig.analyze.perhost import per_host
from iorig.analyze.summary import PhaseSummary
from iorig.report.tables.events import event_table
from iorig.report.tables.metrics import metric
from iorig.report.tables.model import TableModel
from iorig.report.tables.training import checkpoint_tables, training_tables
from iorig.units import format_bytes, format_duration, format_latency, format_rate
from iorig.untrusted import visible


def phase_label(s: PhaseSummary) -> str:
    """ "random-read (IOPS)", with the repeat when there are several, and the
    workloads the figures count where the scenario named some: "performance
    (IOPS of db)"."""
    counted = f" of {'+'.join(s.headline_workloads)}" if s.headline_workloads else ""
    return f"{s.name} ({metric(s.headline).label}{counted})" + (
        f" #{s.repeat + 1}" if s.repeat else ""
    )


def _pct(value: float) -> str:
    return "-" if math.isnan(value) else f"{value * 100:.1f}%"


def precision_cell(s: PhaseSummary) -> str:
    """The median's 95 % half-width of an ``until: precise`` phase, with what
    was asked when it was not reached."""
    state = s.precision
    if state is None:
        return "-"
    if state.achieved_pct is None:
        return f"none (asked ±{state.target_pct:g}%)"
    if state.precise:
        return f"±{state.achieved_pct:.1f}%"
    return f"±{state.achieved_pct:.1f}% (asked ±{state.target_pct:g}%)"


PRECISION_NOTE = (
    "±: half-width of the median's 95 % interval (until: precise); a phase stops once it is "
    "within what was asked, else at its maximum"
)


def summary_tables(summaries: list[PhaseSummary]) -> list[TableModel]:
    """One run's measured phases: seed 000's three figures per second, and latency."""
    precise = any(s.precision is not None for s in summaries)
    rows = []
    for s in summaries:
        st, fmt = s.per_second, metric(s.headline)
        extra = (precision_cell(s),) if precise else ()
        rows.append(
            (
                phase_label(s),
                fmt.format(st.median),
                *extra,
                fmt.format(st.maximum),
                fmt.format(st.minimum),
                _pct(st.cov),
                str(st.n),
                str(s.status),
            )
        )
    throughput = TableModel(
        "Throughput per second",
        (
            "phase",
            "median",
            *(("±95%",) if precise else ()),
            "maximum",
            "minimum",
            "CoV",
            "seconds",
            "status",
        ),
        tuple(rows),
        ("l", "r", *(("r",) if precise else ()), "r", "r", "r", "r", "l"),
        (PRECISION_NOTE,) if precise else (),
    )
    lat_rows = []
    for s in summaries:
        p = s.lat_percentiles_ns
        lat_rows.append(
            (
                s.name + (f" #{s.repeat + 1}" if s.repeat else ""),
                format_latency(s.lat_mean_ns),
                format_latency(p.get(50.0)),
                format_latency(p.get(99.0)),
                format_latency(p.get(99.9)),
                format_latency(s.lat_max_ns),
            )
        )
    latency = TableModel(
        "Completion latency",
        ("phase", "mean", "p50", "p99", "p99.9", "max"),
        tuple(lat_rows),
        ("l", "r", "r", "r", "r", "r"),
        ("percentiles from fio's latency histograms merged across jobs (never averaged)",),
    )
    return [throughput, latency, *direction_tables(summaries)]


DIRECTION_NOTE = (
    "a phase that trims shows each direction on its own: a trim (discard) moves no data, so "
    "its I/Os and bytes are not like a read's or a write's"
)


def direction_tables(summaries: list[PhaseSummary]) -> list[TableModel]:
    """Each direction of the phases that trim (fio's read, write and trim
    sections): the headline above adds them up."""
    rows = tuple(
        (
            phase_label(s),
            d.ddir,
            metric("iops").format(d.iops),
            format_rate(d.bytes_per_s),
            format_latency(d.lat_mean_ns),
            format_latency(d.lat_p99_ns),
        )
        for s in summaries
        if s.trims
        for d in s.directions
    )
    if not rows:
        return []
    return [
        TableModel(
            "By direction",
            ("phase", "direction", "IOPS", "bytes/s", "mean latency", "p99"),
            rows,
            ("l", "l", "r", "r", "r", "r"),
            (DIRECTION_NOTE,),
        )
    ]


def criterion_value(name: str, value: float) -> str:
    if value is None or math.isnan(value):
        return "-"
    if name in ("iops", "bytes_per_s"):
        return metric(name).with_unit(value)
    return format_latency(value)


def verdict_table(verdicts: tuple[Verdict, ...], result: str | None) -> TableModel:
    """Jetstress-style verdicts: each requirement with its figure, PASS or FAIL
    (per host for a per-host requirement on several hosts)."""
    by_host = any(v.host for v in verdicts)
    rows = []
    for v in verdicts:
        where = (v.phase, v.host or "all") if by_host else (v.phase,)
        if v.bound == "info":
            rows.append((v.name, *where, criterion_value(v.metric, v.value), "-", "info", "-"))
            continue
        if math.isnan(v.margin):
            margin = "-"
        elif v.bound == "min":
            margin = f"{'exceeded by' if v.margin >= 0 else 'short by'} {abs(v.margin) * 100:.0f}%"
        elif v.margin >= 0:
            margin = f"{v.margin * 100:.0f}% under the limit"
        else:
            margin = f"{-v.margin * 100:.0f}% over the limit"
        rows.append(
            (
                v.name,
                *where,
                criterion_value(v.metric, v.value),
                ("≥ " if v.bound == "min" else "≤ ") + criterion_value(v.metric, v.limit),
                str(v.outcome),
                margin,
            )
        )
    scope = (
        "each host judged on its own share of the named workloads (a requirement per host); "
        if by_host
        else "figures over the named workloads on all hosts: rates add up, "
    )
    return TableModel(
        f"Verdict: {result}",
        (
            "requirement",
            "phase",
            *(("host",) if by_host else ()),
            "achieved",
            "limit",
            "result",
            "margin",
        ),
        tuple(rows),
        ("l", "l", *(("l",) if by_host else ()), "r", "r", "c", "l"),
        (
            scope + "latency is fio's completion latency (the maximum is the worst one-second "
            "average unless it says single I/O)",
        ),
    )


def until_done(resolved: Mapping[str, Any]) -> frozenset[str]:
    """The measured phases that ran until their jobs were through (a fio job
    file's sized jobs), not those a training or checkpoint section made
    (their own tables show them)."""
    if resolved.get("training") or resolved.get("checkpoint"):
        return frozenset()
    phases = resolved.get("phases") or []
    return frozenset(
        str(p.get("name")) for p in phases if isinstance(p, dict) and p.get("until") == "done"
    )


def timed_table(
    summaries: tuple[PhaseSummary, ...], sized: frozenset[str] = frozenset()
) -> TableModel | None:
    """How long the phases that go over their data once took (creation,
    checksum…, and the ``sized`` phases: a job file's jobs that end after
    their size)."""
    rows = [
        (
            s.name,
            str(s.kind),
            format_bytes(s.io_bytes),
            format_duration(round(s.elapsed_s, 1)),
            format_rate(s.bytes_per_s) if s.ios else "-",
            str(s.status) if not s.error else f"{s.status}: {s.error}",
        )
        for s in summaries
        if s.kind.size_based or s.name in sized
    ]
    if not rows:
        return None
    return TableModel(
        "Timed phases",
        ("phase", "kind", "data", "took", "rate", "status"),
        tuple(rows),
        ("l", "l", "r", "r", "r", "l"),
        (
            "took: wall time, fio's start and file layout included (what a creation or "
            "checksum costs); rate: fio's, while the I/O ran",
        ),
    )


def host_tables(analysis: RunAnalysis) -> list[TableModel]:
    """Seed 001's per-VM table: each measured phase per host, with the
    average per host and the spread between hosts (slowest, fastest, CoV)."""
    columns = [label for label, _ in latency_columns(criteria_of(analysis.run.resolved))]
    rows: list[tuple[str, ...]] = []
    notes = []
    for phase in per_host(analysis):
        fmt = metric(phase.headline)
        for h in phase.hosts:
            rows.append(
                (
                    phase.label,
                    h.host,
                    fmt.format(h.level),
                    format_latency(h.lat_mean_ns),
                    format_latency(h.lat_p99_ns),
                    *(format_latency(h.latencies.get(c)) for c in columns),
                    h.status if not h.error else f"{h.status}: {h.error}",
                )
            )
        if phase.average is not None:
            rows.append(
                (
                    phase.label,
                    "average per host",
                    fmt.format(phase.average),
                    "",
                    "",
                    *("" for _ in columns),
                    "",
                )
            )
        if found := phase.spread:
            levels = {h.host: h.level for h in phase.hosts}
            notes.append(
                f"{phase.label}: slowest {found.slowest} ({fmt.format(levels[found.slowest])}), "
                f"fastest {found.fastest} ({fmt.format(levels[found.fastest])}), coefficient of "
                f"variation across hosts {found.cov * 100:.1f}%"
            )
    if not rows:
        return []
    return [
        TableModel(
            "Per host",
            ("phase", "host", "throughput", "mean lat", "p99", *columns, "status"),
            tuple(rows),
            ("l", "l", "r", "r", "r", *("r" for _ in columns), "l"),
            tuple(notes),
        )
    ]


def run_tables(analysis: RunAnalysis) -> list[TableModel]:
    """A run's timed phases, its verdict and its hosts, when it has them."""
    tables = training_tables(analysis) + checkpoint_tables(analysis)
    if (timed := timed_table(analysis.summaries, until_done(analysis.run.resolved))) is not None:
        tables.append(timed)
    if analysis.verdicts:
        tables.append(verdict_table(analysis.verdicts, analysis.verdict))
    if (events := event_table(analysis)) is not None:
        tables.append(events)
    return tables + host_tables(analysis)


# ------------------------------------------------------------------ renderers


def md_text(text: object) -> str:
    """User text (labels, titles, paths, a SUT description) as Markdown shows
    it: HTML that a renderer would obey becomes entities, shown as typed, and
    what a terminal would act on (a newline too: it would start a heading or
    a row) becomes an escape."""
    return html.escape(visible(str(text)), quote=False)


def _md_cell(text: str) -> str:
    return md_text(text).replace("|", "\\|").replace("\n", " ")


def to_markdown(model: TableModel) -> str:
    rule = {"l": ":---", "c": ":---:", "r": "---:"}
    lines = [f"### {md_text(model.title)}", ""]
    lines.append("| " + " | ".join(_md_cell(h) for h in model.headers) + " |")
    lines.append("| " + " | ".join(rule[a] for a in model.align) + " |")
    lines += ["| " + " | ".join(_md_cell(c) for c in row) + " |" for row in model.rows]
    lines += [""] + [f"*{_md_cell(n)}*" for n in model.notes]
    return "\n".join(lines).rstrip() + "\n"
