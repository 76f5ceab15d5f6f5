"""The terminal rendering of a run or a comparison, as text (with ANSI
colours when asked): the same tables as every other format, via rich."""

from __future__ import annotations

import io
from typing import TYPE_CHECKING

from rich.console import RenderableType
from rich.text import Text

from iorig.report.options import RenderOptions
from iorig.report.tables.model import TableModel, to_rich, visible_model
from iorig.report.writers import terminal
from iorig.report.writers.console import SafeConsole
from iorig.report.writers.fit import fit
from iorig.untrusted import visible

if TYPE_CHECKING:
    from iorig.analyze.analysis import Comparison, RunAnalysis

# a pipe's "width": wide enough that rich wraps nothing (its lines are then
# cut of their trailing padding)
PIPED_WIDTH = 100_000


def _to_text(parts: list[RenderableType], options: RenderOptions) -> str:
    buffer = io.StringIO()
    console = SafeConsole(  # user text shown as it is: never re-styled, no control acts
        file=buffer,
        width=PIPED_WIDTH if options.piped else options.width or 100,
        force_terminal=options.color,
        no_color=not options.color,
        emoji=False,
    )
    for part in parts:
        console.print(part)
    text = buffer.getvalue()
    if options.piped:
        text = "".join(line.rstrip() + "\n" for line in text.splitlines())
    return text


def table_parts(
    table: TableModel, options: RenderOptions, styles: dict[str, dict[str, str]] | None = None
) -> list[RenderableType]:
    """A table fitted to the terminal (whole in a pipe), then its notes."""
    fitted = fit(visible_model(table), None if options.piped else options.width or 100)
    out: list[RenderableType] = [to_rich(fitted.model, fitted.widths, styles)]
    return out + [Text(f"  {note}", style="dim") for note in fitted.model.notes]


def tables_text(
    tables: list[TableModel],
    options: RenderOptions,
    styles: dict[str, dict[str, str]] | None = None,
) -> str:
    """Tables on their own (``iorig runs``), as ``run_view`` shows them."""
    return _to_text([p for t in tables for p in table_parts(t, options, styles)], options)


def _tables(tables: list[TableModel], options: RenderOptions) -> list[RenderableType]:
    return [part for table in tables for part in table_parts(table, options)]


def run_view(analysis: RunAnalysis, options: RenderOptions) -> list[RenderableType]:
    # the tables of an analysis, imported here: `iorig runs` prints tables without them
    from iorig.report.tables.compare import run_limit_table
    from iorig.report.tables.run import run_tables, summary_tables
    from iorig.report.tables.searches import search_tables

    run = analysis.run
    engines = sorted({p.engine for p in analysis.stored.phases if p.engine})
    parts: list[RenderableType] = [terminal.run_header(run, engines), Text("")]
    parts += terminal.steady_lines(analysis.stored.phases)
    parts += terminal.findings_block(run.warnings)
    if run.warnings or any(p.steady for p in analysis.stored.phases):
        parts.append(Text(""))
    measured = analysis.measured
    if measured:
        parts += _tables(summary_tables(measured), options)
        parts += [
            Text(terminal.clip(f"{s.name}: {s.error}", terminal.DESCRIPTION_CHARS), style="red")
            for s in measured
            if s.error
        ]
    else:
        parts.append(Text("no measured phase finished", style="yellow"))
    parts += _tables(run_tables(analysis) + search_tables(analysis.search), options)
    if options.limit is not None:
        parts += _tables([run_limit_table(analysis, options.limit)], options)
    if options.jobs:
        if (given := run.job_file) is not None:
            parts.append(Text(f"\n; the fio job file as given: {given[0]}", style="bold"))
            parts.append(Text(given[1]))
        for name, text in analysis.job_texts.items():
            parts.append(Text(f"\n; phase {terminal.clip(name)}", style="bold"))
            # fio breaks lines at \n only: a CR, VT, FF, NEL or U+2028 in a
            # value is part of it, shown as an escape, never as a line break
            parts.append(Text(visible(text, lines=True)))
    return parts


def comparison_view(cmp: Comparison, options: RenderOptions) -> list[RenderableType]:
    from iorig.report.tables.compare import comparison_notes, comparison_tables

    parts: list[RenderableType] = []
    for note in cmp.definition_differences:
        parts.append(
            Text.assemble(("differs: ", "yellow"), terminal.clip(note, terminal.DESCRIPTION_CHARS))
        )
    for label, analysis in zip(cmp.labels, cmp.runs, strict=True):
        found = [w for w in analysis.run.warnings if w.severity == "warning"]
        if found:
            codes = ", ".join(dict.fromkeys(w.code for w in found))
            parts.append(
                Text.assemble(
                    (f"audit of {terminal.clip(label)}: ", "yellow"),
                    terminal.clip(f"{codes} (see `iorig show {analysis.run.id}`)"),
                )
            )
    parts += _tables(comparison_tables(cmp, options), options)
    parts += [
        Text(terminal.clip(note, terminal.DESCRIPTION_CHARS), style="dim")
        for note in comparison_notes(cmp)
    ]
    return parts


class TextExporter:
    def run(self, analysis: RunAnalysis, options: RenderOptions) -> str:
        return _to_text(run_view(analysis, options), options)

    def comparison(self, cmp: Comparison, options: RenderOptions) -> str:
        return _to_text(comparison_view(cmp, options), options)
