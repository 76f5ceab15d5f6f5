"""Markdown output: seed 000's tables, ready to paste into a blog or a ticket.
User text goes in through ``md_text`` (one line, HTML and terminal controls
shown as typed); the whole document is made visible once more at the end."""

from __future__ import annotations

from dataclasses import replace

from iorig.analyze.analysis import Comparison, RunAnalysis
from iorig.model.records import target_name
from iorig.report.options import RenderOptions
from iorig.report.tables.compare import comparison_notes, comparison_tables, run_limit_table
from iorig.report.tables.run import md_text, run_tables, summary_tables, to_markdown
from iorig.report.tables.searches import search_tables
from iorig.report.tables.sut import sut_markdown
from iorig.untrusted import visible


class MarkdownExporter:
    def run(self, analysis: RunAnalysis, options: RenderOptions) -> str:
        run = analysis.run
        parts = [md_text(f"## {run.title} — run {run.name}"), ""]
        parts.append(
            md_text(f"- scenario: {run.scenario} v{run.scenario_version}, status {run.status}")
        )
        if run.profile:
            parts.append(
                f"- profile {run.profile}: shortened for a fast look, not figures to decide on"
            )
        parts += [
            md_text(f"- target {target_name(t)}: {t['path']} ({t['kind']})") for t in run.targets
        ]
        parts += [md_text(f"- fio: {run.fio_version}"), ""]
        parts.append(sut_markdown(run))
        findings = sorted(run.warnings, key=lambda w: w.severity != "warning")
        if findings:
            parts += ["**Audit** (what could have distorted these figures):", ""]
            for f in findings:
                mark = "warning" if f.severity == "warning" else "note"
                advice = f" — *{md_text(f.advice)}*" if f.advice else ""
                parts.append(f"- {mark}: {md_text(f.message)}{advice}")
            parts.append("")
        tables = summary_tables(analysis.measured) + search_tables(analysis.search)
        if options.limit is not None:
            tables.append(run_limit_table(analysis, options.limit))
        parts += [to_markdown(t) for t in tables + run_tables(analysis)]
        return visible("\n".join(parts) + "\n", lines=True)

    def comparison(self, cmp: Comparison, options: RenderOptions) -> str:
        parts = [md_text("## Comparison: " + " vs ".join(cmp.labels)), ""]
        if cmp.definition_differences:
            parts.append("**The runs differ in their definitions:**")
            parts.append("")
            parts += [f"- {md_text(note)}" for note in cmp.definition_differences]
            parts.append("")
        for label, analysis in zip(cmp.labels, cmp.runs, strict=True):
            codes = dict.fromkeys(w.code for w in analysis.run.warnings if w.severity == "warning")
            if codes:
                parts.append(md_text(f"- audit of {label}: {', '.join(codes)}"))
        parts.append("")
        parts += [to_markdown(t) for t in comparison_tables(cmp, options)]
        parts += [f"- {md_text(note)}" for note in comparison_notes(cmp)]
        # each run's own timed phases and verdict, titled with the run
        for label, analysis in zip(cmp.labels, cmp.runs, strict=True):
            for table in run_tables(analysis):
                parts.append(to_markdown(replace(table, title=f"{table.title} — {label}")))
        return visible("\n".join(parts) + "\n", lines=True)
