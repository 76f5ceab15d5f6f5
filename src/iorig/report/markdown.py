"""Markdown output: seed 000's tables, ready to paste into a blog or a ticket."""

from __future__ import annotations

from dataclasses import replace

from iorig.analyze.compare import Comparison
from iorig.report.tables import TableModel, comparison_notes, run_tables, to_markdown
from iorig.store import StoredRun


def markdown_comparison(cmp: Comparison, tables: list[TableModel]) -> str:
    parts = ["## Comparison: " + " vs ".join(cmp.labels), ""]
    if cmp.definition_differences:
        parts.append("**The runs differ in their definitions:**")
        parts.append("")
        parts += [f"- {note}" for note in cmp.definition_differences]
        parts.append("")
    parts += [to_markdown(t) for t in tables]
    parts += [f"- {note}" for note in comparison_notes(cmp)]
    return "\n".join(parts) + "\n"


def markdown_run_tables(runs: list[StoredRun]) -> str:
    """Each run's timed phases and verdict, titled with the run."""
    parts = []
    for stored in runs:
        for table in run_tables(stored):
            titled = replace(table, title=f"{table.title} — {stored.run.label or stored.run.id}")
            parts.append(to_markdown(titled))
    return "\n".join(parts)


def markdown_run(stored: StoredRun, tables: list[TableModel]) -> str:
    run = stored.run
    parts = [f"## {run.title} — run {run.label or run.id}", ""]
    parts.append(f"- scenario: {run.scenario} v{run.scenario_version}, status {run.status}")
    if run.profile:
        parts.append(
            f"- profile {run.profile}: shortened for a fast look, not figures to decide on"
        )
    parts += [f"- target {t['role']}: {t['path']} ({t['kind']})" for t in run.targets]
    parts += [f"- fio: {run.fio_version}", ""]
    parts += [to_markdown(t) for t in tables]
    parts += [to_markdown(t) for t in run_tables(stored)]
    return "\n".join(parts) + "\n"
