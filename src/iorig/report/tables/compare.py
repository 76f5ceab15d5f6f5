"""The tables of a comparison: seed 000's median / maximum / minimum with
% change, winner and significance; latency; % of a baseline or of a limit;
how evenly each run's hosts performed."""

from __future__ import annotations

import math
from collections.abc import Sequence

from iorig.analyze.analysis import Comparison, RunAnalysis
from iorig.analyze.compare import (
    METHOD_NOTES,
    NO_DIFFERENCE,
    PhaseComparison,
    RunPhase,
    percent,
    phase_limit_share,
    verdict_text,
)
from iorig.analyze.stats import LimitShare
from iorig.model import ALL, PhaseKind, spread
from iorig.report.options import Limit, RenderOptions
from iorig.report.tables.ab import ab_lines, rounds_table
from iorig.report.tables.events import event_comparison_table
from iorig.report.tables.metrics import metric
from iorig.report.tables.run import TableModel
from iorig.report.tables.searches import comparison_search_tables
from iorig.report.tables.training import training_comparison_tables
from iorig.report.tables.verdicts import requirements_table, verdicts_table
from iorig.units import format_latency

FIGURES = (("median", "Median"), ("max", "Maximum"), ("min", "Minimum"))
_STAT = {"median": "median", "max": "maximum", "min": "minimum"}


def _test_name(phase: PhaseComparison) -> str:
    return f"{phase.name} ({metric(phase.headline).label})"


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
    stat = _STAT[figure]
    for phase in cmp.phases:
        fmt = metric(phase.headline)
        row = [_test_name(phase)]
        base = phase.entries[0]
        row.append(fmt.format(getattr(base.stats, stat)) if base else "(absent)")
        for entry, diff in zip(phase.entries[1:], phase.differences[1:], strict=True):
            row.append(fmt.format(getattr(entry.stats, stat)) if entry else "(absent)")
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
    # the winner and the significance are the point of a comparison: a narrow
    # terminal leaves out the % columns first (the significance holds the
    # change's interval), then the runs' figures from the last run back
    priority = (0, 3, *(p for _ in labels[1:] for p in (3, 4)), 1, 2)
    return TableModel(title, tuple(headers), tuple(rows), align, priority=priority)


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
        # a narrow terminal keeps the runs' means, then their p99s, then the % columns
        priority=(
            0,
            *(
                p
                for first, pct in ((1, 3), (2, 4))
                for p in (first, *(q for _ in labels[1:] for q in (first, pct)))
            ),
        ),
    )


# The percentage tables divide the phase mean (fio's own figure for the whole
# phase, averaged over repeats): a sustained rate. A per-second median can sit
# a hair above a hard limit where fio's one-second windows and the device's
# do not line up (100.1 % of a 100 MB/s block-throttle cap, measured).
PERCENT_BASIS = "phase mean"


def percent_of_baseline_table(cmp: Comparison) -> TableModel:
    """Each run as % of the baseline ("92 % of native"), by the phase mean."""
    labels = cmp.labels
    headers = ("Test", *(f"{label} as % of {labels[0]}" for label in labels[1:]))
    rows = []
    for phase in cmp.phases:
        base = phase.entries[0]
        row = [_test_name(phase)]
        for entry in phase.entries[1:]:
            if base is None or entry is None or not base.level:
                row.append("-")
            else:
                row.append(f"{entry.level / base.level * 100:.1f}%")
        rows.append(tuple(row))
    return TableModel(
        f"Percent of {labels[0]} ({PERCENT_BASIS})",
        headers,
        tuple(rows),
        ("l", *("c" for _ in headers[1:])),
    )


def limit_table(cmp: Comparison, limit: Limit) -> TableModel:
    """Each run's throughput as % of an interface limit or a device's rating,
    by the phase mean of the limit's own metric (bytes/s or IOPS)."""
    phases = [(p.name, p.entries) for p in cmp.phases]
    return _limit_table(cmp.labels, phases, limit)


def run_limit_table(analysis: RunAnalysis, limit: Limit) -> TableModel:
    """One run's measured phases as % of a limit (``compare RUN --limit``)."""
    phases = [(name, (entry,)) for name, entry in analysis.pooled.items()]
    return _limit_table((analysis.run.name,), phases, limit)


def _limit_table(
    labels: Sequence[str], phases: Sequence[tuple[str, Sequence[RunPhase | None]]], limit: Limit
) -> TableModel:
    fmt = metric(limit.metric)
    headers = ("Test", *(f"{label} % of limit" for label in labels))
    rows, notes, other_kind = [], [], []
    for name, entries in phases:
        row = [name]
        for label, entry in zip(labels, entries, strict=True):
            share = None if entry is None else phase_limit_share(entry, limit.value, limit.metric)
            if share is None:
                row.append("-")
                if entry is not None and name not in other_kind:
                    other_kind.append(name)
                continue
            row.append(f"{share.share * 100:.1f}%")
            if note := _above_note(name, label, share):
                notes.append(note)
        rows.append(tuple(row))
    if other_kind:
        notes.append(
            f"{', '.join(other_kind)}: scored in bytes/s, not held to an IOPS limit (a "
            "small-block random rating)"
        )
    source = f", {limit.source}" if limit.source and limit.source != "--limit" else ""
    title = f"Percent of the interface limit ({fmt.with_unit(limit.value)}{source})"
    return TableModel(
        f"{title}, {PERCENT_BASIS}",
        headers,
        tuple(rows),
        ("l", *("c" for _ in headers[1:])),
        tuple(notes),
    )


def _above_note(name: str, label: str, share: LimitShare) -> str | None:
    """Whether a phase above the limit is above it beyond its own noise (a
    throttle's slices let a short phase overshoot by a hair)."""
    if share.share <= 1.0:
        return None
    if share.low is None or share.high is None:
        return (
            f"{name}: {label} at {share.share * 100:.1f}% has too few seconds to tell whether "
            "it is above the limit"
        )
    interval = f"{share.low * 100:.1f}–{share.high * 100:.1f}% by {share.method}"
    if share.above:
        return (
            f"{name}: {label} is above the limit beyond its noise ({interval}) — a cache or "
            "data reduction answered, not the device"
        )
    at = f"{share.share * 100:.1f}%"
    return f"{name}: {label} at {at} is within its noise of the limit ({interval})"


def host_spread_table(cmp: Comparison) -> TableModel | None:
    """How evenly each multi-host run's hosts performed, per phase."""
    if not any(len(r.run.hosts) > 1 for r in cmp.runs):
        return None
    names = list(
        dict.fromkeys(
            p.name for r in cmp.runs for p in r.stored.phases if p.kind is PhaseKind.MEASURE
        )
    )
    rows = []
    for name in names:
        row = [name]
        for analysis in cmp.runs:
            phase = next((p for p in analysis.stored.phases if p.name == name), None)
            levels = {}
            if phase is not None:
                levels = {
                    s.scope.host or "": s.totals[ALL].level(phase.headline)
                    if ALL in s.totals
                    else math.nan
                    for s in phase.host_scopes
                }
            found = spread(levels)
            if phase is None or found is None:
                row.append("-")
                continue
            fmt = metric(phase.headline)
            row.append(
                f"CoV {found.cov * 100:.1f}%: {fmt.format(levels[found.slowest])} "
                f"({found.slowest}) to {fmt.format(levels[found.fastest])} ({found.fastest})"
            )
        rows.append(tuple(row))
    return TableModel(
        "Spread between hosts",
        ("phase", *cmp.labels),
        tuple(rows),
        ("l", *("l" for _ in cmp.labels)),
        ("coefficient of variation of the hosts' throughput, slowest to fastest host",),
    )


def comparison_tables(cmp: Comparison, options: RenderOptions) -> list[TableModel]:
    """Every table of a comparison, in the order every format shows them."""
    # an application workload's verdicts first: what the runs are judged on
    tables = [t for t in (verdicts_table(cmp), requirements_table(cmp)) if t is not None]
    tables += training_comparison_tables(cmp)
    tables += [figure_table(cmp, figure, title) for figure, title in FIGURES]
    tables.append(latency_table(cmp))
    if (rounds := rounds_table(cmp)) is not None:
        tables.append(rounds)
    if options.as_percent:
        tables.append(percent_of_baseline_table(cmp))
    if options.limit is not None:
        tables.append(limit_table(cmp, options.limit))
    tables += comparison_search_tables(cmp)
    if (spread_table := host_spread_table(cmp)) is not None:
        tables.append(spread_table)
    if (events := event_comparison_table(cmp)) is not None:
        tables.append(events)
    return tables


def comparison_notes(cmp: Comparison) -> list[str]:
    notes = [f"baseline: {cmp.labels[0]} (run {cmp.runs[0].run.id})"]
    notes += [
        f"{label}: run {r.run.id}" for label, r in zip(cmp.labels[1:], cmp.runs[1:], strict=True)
    ]
    notes += [f"phase {name} only in {label}" for name, label in cmp.only_in]
    notes.append(
        f"'{NO_DIFFERENCE}' (n.s.): the {cmp.confidence * 100:.0f}% confidence interval (CI) of "
        f"the change in throughput includes zero, or the change is under the "
        f"{cmp.threshold * 100:g}% threshold. A median, maximum or minimum only wins where that "
        "test agrees; where it moved the other way the winner column says so."
    )
    methods = {d.method for p in cmp.phases for d in p.differences if d is not None}
    notes += [METHOD_NOTES[m] for m in sorted(methods)]
    return ab_lines(cmp) + notes if cmp.ab is not None else notes + ab_lines(cmp)
