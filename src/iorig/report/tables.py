"""Comparison tables as plain data, built once and rendered to the terminal,
Markdown, CSV or HTML by the thin functions at the end."""

from __future__ import annotations

import math
from dataclasses import dataclass

from rich.table import Table
from rich.text import Text

from iorig.analyze.compare import (
    METHOD_NOTES,
    NO_DIFFERENCE,
    Comparison,
    PhaseComparison,
    percent,
    verdict_text,
)
from iorig.analyze.criteria import Verdict, criteria_of, evaluate, overall
from iorig.analyze.summary import PhaseSummary
from iorig.multihost import host_spread
from iorig.results import ALL, PhaseResult
from iorig.store import StoredRun
from iorig.units import format_bytes, format_duration, format_latency, format_rate, format_si

FIGURES = (("median", "Median"), ("max", "Maximum"), ("min", "Minimum"))
METRIC_NAME = {"iops": "IOPS", "bytes_per_s": "Bytes/Sec"}


@dataclass(frozen=True)
class TableModel:
    title: str
    headers: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    align: tuple[str, ...]  # "l", "c" or "r" per column
    notes: tuple[str, ...] = ()


def _value(headline: str, value: float) -> str:
    if value is None or math.isnan(value):
        return "-"
    return format_si(value) if headline == "iops" else format_rate(value)


def _test_name(phase: PhaseComparison) -> str:
    return f"{phase.name} ({METRIC_NAME[phase.headline]})"


def figure_table(cmp: Comparison, figure: str, title: str) -> TableModel:
    """Seed 000's layout: values per run, % gain or loss vs the baseline, winner."""
    labels = cmp.labels
    two = len(labels) == 2
    headers: list[str] = ["Test", f"{labels[0]} ({title})"]
    for label in labels[1:]:
        headers.append(f"{label} ({title})")
        headers.append("% Gain or Loss" if two else f"% vs {labels[0]}")
    headers += ["Winner", "Significance"]
    rows = []
    for phase in cmp.phases:
        stat = {"median": "median", "max": "maximum", "min": "minimum"}[figure]
        row = [_test_name(phase)]
        base = phase.entries[0]
        row.append(_value(phase.headline, getattr(base.stats, stat)) if base else "(absent)")
        for entry, diff in zip(phase.entries[1:], phase.differences[1:], strict=True):
            row.append(_value(phase.headline, getattr(entry.stats, stat)) if entry else "(absent)")
            row.append(percent(getattr(diff, f"change_{figure}")) if diff else "-")
        row.append(phase.winner(labels, figure))
        row.append(
            " / ".join(
                (f"{labels[i]}: " if not two else "") + verdict_text(d)
                for i, d in enumerate(phase.differences)
                if d is not None
            )
        )
        rows.append(tuple(row))
    align = ("l", *("c" for _ in headers[1:-1]), "l")
    return TableModel(title, tuple(headers), tuple(rows), align)


def latency_table(cmp: Comparison) -> TableModel:
    labels = cmp.labels
    headers: list[str] = ["Test"]
    for what in ("mean", "p99"):
        headers.append(f"{labels[0]} {what}")
        for label in labels[1:]:
            headers += [f"{label} {what}", "% change"]
    rows = []
    for phase in cmp.phases:
        row = [phase.name]
        for what, attr in (("mean", "lat_mean_ns"), ("p99", "lat_p99_ns")):
            base = phase.entries[0]
            row.append(format_latency(getattr(base, attr)) if base else "(absent)")
            for entry, diff in zip(phase.entries[1:], phase.differences[1:], strict=True):
                row.append(format_latency(getattr(entry, attr)) if entry else "(absent)")
                row.append(percent(getattr(diff, f"change_lat_{what}")) if diff else "-")
        rows.append(tuple(row))
    return TableModel(
        "Completion latency (lower is better)",
        tuple(headers),
        tuple(rows),
        ("l", *("c" for _ in headers[1:])),
        ("p99 from the histograms of all repeats merged",),
    )


def percent_of_baseline_table(cmp: Comparison) -> TableModel:
    """Each run as % of the baseline ("92 % of native"), by median per second."""
    labels = cmp.labels
    headers = ("Test", *(f"{label} as % of {labels[0]}" for label in labels[1:]))
    rows = []
    for phase in cmp.phases:
        base = phase.entries[0]
        row = [_test_name(phase)]
        for entry in phase.entries[1:]:
            if base is None or entry is None or not base.stats.median:
                row.append("-")
            else:
                row.append(f"{entry.stats.median / base.stats.median * 100:.1f}%")
        rows.append(tuple(row))
    return TableModel(
        f"Percent of {labels[0]} (median per second)",
        headers,
        tuple(rows),
        ("l", *("c" for _ in headers[1:])),
    )


def limit_table(cmp: Comparison, limit_bytes_per_s: float) -> TableModel:
    """Throughput as % of an interface limit (bytes/s of every phase)."""
    headers = ("Test", *(f"{label} % of limit" for label in cmp.labels))
    rows = []
    for phase in cmp.phases:
        row = [phase.name]
        for entry in phase.entries:
            row.append(
                "-" if entry is None else f"{entry.bytes_per_s / limit_bytes_per_s * 100:.1f}%"
            )
        rows.append(tuple(row))
    above = [
        f"{phase.name}: {label} is above the limit — cache or data reduction inflated it"
        for phase in cmp.phases
        for label, entry in zip(cmp.labels, phase.entries, strict=True)
        if entry is not None and entry.bytes_per_s > limit_bytes_per_s
    ]
    return TableModel(
        f"Percent of the interface limit ({format_rate(limit_bytes_per_s)})",
        headers,
        tuple(rows),
        ("l", *("c" for _ in headers[1:])),
        tuple(above),
    )


def comparison_tables(
    cmp: Comparison, *, as_percent: bool = False, limit_bytes_per_s: float | None = None
) -> list[TableModel]:
    tables = [figure_table(cmp, figure, title) for figure, title in FIGURES]
    tables.append(latency_table(cmp))
    if as_percent:
        tables.append(percent_of_baseline_table(cmp))
    if limit_bytes_per_s:
        tables.append(limit_table(cmp, limit_bytes_per_s))
    return tables


def comparison_notes(cmp: Comparison) -> list[str]:
    notes = [f"baseline: {cmp.labels[0]} (run {cmp.runs[0].id})"]
    notes += [
        f"{label}: run {run.id}" for label, run in zip(cmp.labels[1:], cmp.runs[1:], strict=True)
    ]
    notes += [f"phase {name} only in {label}" for name, label in cmp.only_in]
    notes.append(
        f"'{NO_DIFFERENCE}' (n.s.): the {cmp.confidence * 100:.0f}% confidence interval (CI) of "
        f"the change in throughput includes zero, or the change is under the "
        f"{cmp.threshold * 100:g}% threshold. A maximum or minimum only wins where that test "
        "agrees."
    )
    methods = {d.method for p in cmp.phases for d in p.differences if d is not None}
    notes += [f"significance by {METHOD_NOTES[m]}" for m in sorted(methods)]
    return notes


def summary_tables(summaries: list[PhaseSummary]) -> list[TableModel]:
    """One run's measured phases: per-second figures and latency."""
    rows = []
    for s in summaries:
        st = s.per_second
        label = f"{s.name} ({METRIC_NAME[s.headline]})" + (f" #{s.repeat + 1}" if s.repeat else "")
        cov = "-" if math.isnan(st.cov) else f"{st.cov * 100:.1f}%"
        rows.append(
            (
                label,
                _value(s.headline, st.median),
                _value(s.headline, st.maximum),
                _value(s.headline, st.minimum),
                cov,
                str(st.n),
                s.status,
            )
        )
    throughput = TableModel(
        "Throughput per second",
        ("Test", "Median", "Maximum", "Minimum", "CoV", "Seconds", "Status"),
        tuple(rows),
        ("l", "c", "c", "c", "c", "c", "l"),
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
        ("Test", "Mean", "p50", "p99", "p99.9", "Max"),
        tuple(lat_rows),
        ("l", "c", "c", "c", "c", "c"),
        ("percentiles from fio's latency histograms merged across jobs (never averaged)",),
    )
    return [throughput, latency]


# ------------------------------------------------------------------ renderers


def to_rich(model: TableModel) -> Table:
    table = Table(title=Text(model.title), title_justify="left", header_style="bold")
    justify = {"l": "left", "c": "center", "r": "right"}
    for header, align in zip(model.headers, model.align, strict=True):
        table.add_column(Text(header), justify=justify[align], overflow="fold")  # type: ignore[arg-type]
    for row in model.rows:
        table.add_row(*(Text(cell) for cell in row))  # labels are user text, not markup
    return table


def _md_cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def to_markdown(model: TableModel) -> str:
    rule = {"l": ":---", "c": ":---:", "r": "---:"}
    lines = [f"### {model.title}", ""]
    lines.append("| " + " | ".join(_md_cell(h) for h in model.headers) + " |")
    lines.append("| " + " | ".join(rule[a] for a in model.align) + " |")
    lines += ["| " + " | ".join(_md_cell(c) for c in row) + " |" for row in model.rows]
    lines += [""] + [f"*{_md_cell(n)}*" for n in model.notes]
    return "\n".join(lines).rstrip() + "\n"


def _criterion_value(metric: str, value: float) -> str:
    if value is None or math.isnan(value):
        return "-"
    if metric == "iops":
        return f"{format_si(value)} IOPS"
    if metric == "bytes_per_s":
        return format_rate(value)
    return format_latency(value)


def verdict_table(verdicts: list[Verdict]) -> TableModel:
    """Jetstress-style verdicts: each requirement with its figure, PASS or FAIL."""
    rows = []
    for v in verdicts:
        if math.isnan(v.margin):
            margin = "-"
        elif v.bound == "min":
            margin = f"{'exceeded by' if v.margin >= 0 else 'short by'} {abs(v.margin) * 100:.0f}%"
        else:
            margin = (
                f"{v.margin * 100:.0f}% under the limit"
                if v.margin >= 0
                else (f"{-v.margin * 100:.0f}% over the limit")
            )
        rows.append(
            (
                v.name,
                v.phase,
                _criterion_value(v.metric, v.value),
                ("≥ " if v.bound == "min" else "≤ ") + _criterion_value(v.metric, v.limit),
                "PASS" if v.passed else "FAIL",
                margin,
            )
        )
    result = overall(verdicts)
    return TableModel(
        f"Verdict: {result}",
        ("requirement", "phase", "achieved", "limit", "result", "margin"),
        tuple(rows),
        ("l", "l", "r", "r", "c", "l"),
        (
            "figures over the named workloads on all hosts: rates add up, latency is fio's "
            "completion latency (the maximum is the worst one-second average unless it says "
            "single I/O)",
        ),
    )


def timed_table(phases: list[PhaseResult]) -> TableModel | None:
    """How long the phases that go over their data once took (creation, checksum…)."""
    rows = []
    for p in phases:
        if p.kind not in ("prefill", "precondition", "verify"):
            continue
        totals = p.aggregate.totals.get(ALL) if p.aggregate else None
        moved = totals.io_bytes if totals else 0
        elapsed = p.ended_at - p.started_at
        rows.append(
            (
                p.name,
                p.kind,
                format_bytes(moved),
                format_duration(round(elapsed, 1)),
                format_rate(totals.bytes_per_s) if totals else "-",
                p.status if not p.error else f"{p.status}: {p.error}",
            )
        )
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


def run_tables(stored: StoredRun) -> list[TableModel]:
    """A run's timed phases and its verdict, when it has them."""
    tables = []
    timed = timed_table(list(stored.phases))
    if timed is not None:
        tables.append(timed)
    verdicts = evaluate(criteria_of(stored.run.resolved), stored.phases)
    if verdicts:
        tables.append(verdict_table(verdicts))
    return tables + host_tables(stored)


def host_tables(stored: StoredRun) -> list[TableModel]:
    """Seed 001's per-VM table: each measured phase per host, with the
    average per host and the spread between hosts (slowest, fastest, CoV)."""
    if len(stored.run.hosts) < 2:
        return []
    rows: list[tuple[str, ...]] = []
    notes = []
    for phase in (p for p in stored.phases if p.kind == "measure"):
        hosts = [s for s in phase.scopes if s.workload == "" and s.host != ""]
        if not hosts:
            continue
        label = phase.name + (f" #{phase.repeat + 1}" if phase.repeat else "")
        levels = {}
        for scope in hosts:
            totals = scope.totals.get(ALL)
            level = getattr(totals, phase.headline) if totals else math.nan
            levels[scope.host] = level
            rows.append(
                (
                    label,
                    scope.host,
                    _value(phase.headline, level),
                    format_latency(totals.lat_mean_ns if totals else None),
                    format_latency(totals.percentiles_ns((99.0,))[99.0] if totals else None),
                    scope.status if not scope.error else f"{scope.status}: {scope.error}",
                )
            )
        finite = [v for v in levels.values() if not math.isnan(v)]
        if finite:
            rows.append(
                (label, "average per host", _value(phase.headline, sum(finite) / len(finite)),
                 "", "", "")
            )  # fmt: skip
        spread = host_spread(levels)
        if spread:
            slow, fast, cov = spread
            notes.append(
                f"{label}: slowest {slow} ({_value(phase.headline, levels[slow])}), fastest "
                f"{fast} ({_value(phase.headline, levels[fast])}), coefficient of variation "
                f"across hosts {cov * 100:.1f}%"
            )
    if not rows:
        return []
    return [
        TableModel(
            "Per host",
            ("phase", "host", "throughput", "mean lat", "p99", "status"),
            tuple(rows),
            ("l", "l", "r", "r", "r", "l"),
            tuple(notes),
        )
    ]


def host_spread_table(runs: list[StoredRun], labels: tuple[str, ...]) -> TableModel | None:
    """compare: how evenly each multi-host run's hosts performed, per phase."""
    if not any(len(r.run.hosts) > 1 for r in runs):
        return None
    names = list(dict.fromkeys(p.name for r in runs for p in r.phases if p.kind == "measure"))
    rows = []
    for name in names:
        row = [name]
        for stored in runs:
            phase = next((p for p in stored.phases if p.name == name), None)
            hosts = [s for s in phase.scopes if s.workload == "" and s.host] if phase else []
            levels = {
                s.host: getattr(s.totals[ALL], phase.headline) if ALL in s.totals else math.nan
                for s in hosts
            }
            spread = host_spread(levels)
            if phase is None or spread is None:
                row.append("-")
                continue
            slow, fast, cov = spread
            row.append(
                f"CoV {cov * 100:.1f}%: {_value(phase.headline, levels[slow])} ({slow}) to "
                f"{_value(phase.headline, levels[fast])} ({fast})"
            )
        rows.append(tuple(row))
    return TableModel(
        "Spread between hosts",
        ("phase", *labels),
        tuple(rows),
        ("l", *("l" for _ in labels)),
        ("coefficient of variation of the hosts' throughput, slowest to fastest host",),
    )
