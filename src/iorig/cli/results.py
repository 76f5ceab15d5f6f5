"""The commands that read stored runs: ``runs``, ``show``, ``compare`` and
``report``, with the notes of ``runs`` and ``show`` on recovery files
waiting to be imported."""

from __future__ import annotations

import sys
from collections.abc import Iterable
from dataclasses import asdict
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape
from rich.text import Text

from iorig.cli.common import (
    app,
    console,
    emit,
    err_console,
    open_reaped,
    render_options,
)
from iorig.cli.refs import resolve_run_id, resolve_runs
from iorig.errors import UserError
from iorig.units import parse_limit

if TYPE_CHECKING:
    from iorig.model import StoredRun
    from iorig.report.options import Limit
    from iorig.store import Store


def waiting_notes(store: Store, run_ids: Iterable[str]) -> list[Text]:
    """One note per run of ``run_ids`` whose last results wait in a recovery
    file (the database could not take them): where, and the command that
    adds them."""
    notes = []
    for run_id, kept in sorted(store.waiting_recoveries(run_ids).items()):
        if kept.is_file():
            said = (
                f"its last results wait in {kept}: add them with "
                f"`iorig --db {store.path} import {kept}`"
            )
        else:
            said = f"its last results were kept in {kept}, which is no longer there"
        notes.append(Text.assemble(("note:", "yellow"), f" run {run_id}: {said}"))
    return notes


@app.command()
def runs(
    ctx: typer.Context,
    limit: Annotated[int, typer.Option(min=1, help="newest N runs")] = 20,
    as_json: Annotated[bool, typer.Option("--json", help="machine-readable output")] = False,
) -> None:
    """List stored runs, newest first."""
    from iorig.report.writers import terminal
    from iorig.report.writers.text import tables_text

    with open_reaped(ctx.obj) as store:
        records = store.list_runs(limit)
        headlines = {r.id: store.headline_series(r.id) for r in records}
        notes = waiting_notes(store, (r.id for r in records))
    for note in notes:  # on stderr, past the output (a pipe or --json reads stdout)
        err_console.print(note)
    if as_json:
        from iorig.model import series_stats
        from iorig.report.writers.jsoncsv import FORMAT_VERSION, run_dict, series_dict, to_json

        out = []
        for r in records:
            item = run_dict(r)
            item["headline"] = [
                {"phase": name, "metric": str(m), "per_second": series_dict(series_stats(v))}
                for name, m, v in headlines[r.id]
            ]
            out.append(item)
        sys.stdout.write(to_json({"format_version": FORMAT_VERSION, "runs": out}))
        return
    if not records:
        console.print(
            f"no runs in {ctx.obj} yet; try `iorig run peak --quick --target ./iorig-scratch/`"
        )
        return
    table = terminal.runs_table(records, headlines)
    sys.stdout.write(tables_text([table], render_options(), {"status": terminal.STATUS_STYLE}))
    sys.stdout.flush()


class Format(StrEnum):
    text = "text"
    md = "md"
    json = "json"
    csv = "csv"
    html = "html"
    seconds = "seconds"  # every second of every scope, CSV


FormatOpt = Annotated[Format | None, typer.Option("--format", help="output format")]


def _analyses(
    store: Store, refs: list[str], *, jobs: bool = True, baseline: str | None = None
) -> list:
    """The runs named by ``refs`` (``baseline`` first when given), analysed, each once."""
    from iorig.analyze.analysis import analyse

    ids = resolve_runs(store, refs, baseline)
    return [analyse(store.load_run(i), store.job_texts(i) if jobs else None) for i in ids]


@app.command()
def show(
    ctx: typer.Context,
    run_ref: Annotated[
        str, typer.Argument(metavar="RUN", help="run id, unique prefix, label, last or last~N")
    ] = "last",
    fmt: FormatOpt = None,
    as_json: Annotated[bool, typer.Option("--json", help="the same as --format json")] = False,
    jobs: Annotated[bool, typer.Option("--jobs", help="print each phase's fio job file")] = False,
    disclosure: Annotated[
        bool, typer.Option("--disclosure", help="print the system disclosure")
    ] = False,
    timeline: Annotated[
        bool,
        typer.Option(
            "--timeline",
            help="every phase in order, one line each: start, duration, median, p99 range "
            "and a sparkline of each second's throughput; events under their phase",
        ),
    ] = False,
) -> None:
    """Show one run: per measured phase, median/max/min per second and latency percentiles."""
    from iorig.report.tables.sut import sut_view
    from iorig.report.writers import terminal
    from iorig.report.writers.jsoncsv import FORMAT_VERSION, sut_dict, to_json

    chosen = _format(fmt, as_json, default=Format.text)
    if timeline and (chosen is not Format.text or disclosure):
        raise UserError(
            "--timeline is printed as text, on its own (not with --format, --json or --disclosure)",
            hint="the HTML report (iorig report RUN -o FILE) draws the same timeline",
        )
    with open_reaped(ctx.obj) as store:
        (analysis,) = _analyses(store, [run_ref], jobs=jobs)
        for note in waiting_notes(store, [analysis.run.id]):
            err_console.print(note)
    if timeline:
        _print_timeline(analysis.stored)
        return
    if disclosure:
        if chosen is Format.json:
            limit = analysis.run.disclosure.interface_limit
            data = dict(analysis.run.disclosure.sections) | {
                "interface_limit": None if limit is None else asdict(limit),
                "sut": sut_dict(analysis.run),
            }
            sys.stdout.write(to_json({"format_version": FORMAT_VERSION} | data))
        else:
            console.print(terminal.disclosure_view(analysis.run))
            console.print(sut_view(analysis.run))
        return
    emit(chosen.value, analysis, render_options(jobs=jobs))


def _print_timeline(stored: StoredRun) -> None:
    """`show --timeline`: block characters where the output can encode them,
    colour only on a terminal (rich leaves it out otherwise)."""
    from iorig.report.tables.timeline import build_timeline
    from iorig.report.writers import terminal
    from iorig.report.writers.sparkline import timeline_lines

    unicode = (console.encoding or "").lower().replace("-", "") == "utf8"
    console.print(
        Text(f"run {stored.run.id}  {terminal.clip(stored.run.title, terminal.TITLE_CHARS)}")
    )
    for line in timeline_lines(build_timeline(stored), console.width, unicode=unicode):
        console.print(line, overflow="ellipsis")  # wrapped only where the heading needs it


def _format(fmt: Format | None, as_json: bool, default: Format) -> Format:
    if as_json and fmt not in (None, Format.json):
        raise UserError(f"--json and --format {fmt.value} ask for two formats; give one")
    return Format.json if as_json else (fmt or default)


@app.command("compare")
def compare_cmd(
    ctx: typer.Context,
    run_refs: Annotated[
        list[str],
        typer.Argument(metavar="A B [C ...]", help="runs: id, prefix, label, last, last~1"),
    ],
    threshold: Annotated[
        float, typer.Option(help="practical threshold in %: smaller changes are no difference")
    ] = 2.0,
    confidence: Annotated[float, typer.Option(help="confidence level in %")] = 95.0,
    as_percent_of: AsPercentOfOpt = None,
    limit: LimitOpt = None,
    fmt: FormatOpt = None,
) -> None:
    """Compare runs phase by phase: median/max/min with % change, winner and significance."""
    if len(run_refs) + (as_percent_of is not None) < 2 and limit is None:
        raise UserError(
            "compare needs at least two runs (or one run and --limit)",
            hint="e.g. iorig compare last~1 last, or iorig compare last --limit 3.5GB/s",
        )
    _comparison_out(
        ctx,
        list(run_refs),
        threshold,
        confidence,
        limit,
        fmt or Format.text,
        as_percent_of=as_percent_of,
        output=None,
    )


AsPercentOfOpt = Annotated[
    str | None,
    typer.Option(help="baseline run (id, prefix, label, last~N); each run as % of it (phase mean)"),
]
LimitOpt = Annotated[
    str | None,
    typer.Option(
        help="an interface limit (3.5GB/s) or a device's rating (500kIOPS): adds each run's "
        "phase mean as % of it (above it only beyond its noise)"
    ),
]


def _comparison_out(
    ctx: typer.Context,
    refs: list[str],
    threshold: float,
    confidence: float,
    limit: str | None,
    fmt: Format,
    *,
    as_percent_of: str | None,
    output: Path | None,
) -> None:
    """Analyse the runs, compare them when there are several, render and write."""
    from iorig.analyze.analysis import compare
    from iorig.analyze.compare import shared_limit
    from iorig.model import Metric
    from iorig.report.exporters import render
    from iorig.report.options import Limit
    from iorig.store.files import write_text

    chosen_limit = _parse_limit(limit)
    if not 0 < confidence < 100:
        raise UserError("--confidence is a percentage between 0 and 100, e.g. 95")
    with open_reaped(ctx.obj) as store:
        analyses = _analyses(store, refs, baseline=as_percent_of)
    if as_percent_of is not None and len(analyses) < 2:
        raise UserError(
            f"--as-percent-of {as_percent_of}: no other run to show as a percentage of it",
            hint="name the runs to compare besides the baseline",
        )
    subject = analyses[0]
    if len(analyses) > 1:
        subject = compare(analyses, threshold=threshold / 100, confidence=confidence / 100)
        if chosen_limit is None and (found := shared_limit([a.stored for a in analyses])):
            # recorded by the runs' system disclosure
            chosen_limit = Limit(found.bytes_per_s, Metric.BYTES_PER_S, found.source)
    options = render_options(as_percent=as_percent_of is not None, limit=chosen_limit)
    if output is None:
        emit(fmt.value, subject, options)
        return
    text = render(fmt.value, subject, options)
    write_text(output, text, ctx.obj)
    console.print(f"wrote {escape(str(output))} ({len(text.encode()) / 1e6:.1f} MB)")


def _parse_limit(limit: str | None) -> Limit | None:
    from iorig.model import Metric
    from iorig.report.options import Limit

    if limit is None:
        return None
    try:
        value, unit = parse_limit(limit)
    except ValueError as exc:
        raise UserError(f"--limit {limit}: {exc}") from None
    if not 0 < value < float("inf"):
        raise UserError("--limit must be greater than zero")
    return Limit(value, Metric(unit), "--limit")


@app.command()
def report(
    ctx: typer.Context,
    run_refs: Annotated[
        list[str],
        typer.Argument(metavar="RUN [RUN ...]", help="runs: id, prefix, label, last, last~1"),
    ],
    output: Annotated[
        Path | None, typer.Option("-o", "--output", help="file to write (html: required)")
    ] = None,
    fmt: FormatOpt = None,
    threshold: Annotated[float, typer.Option(help="practical threshold in % (comparisons)")] = 2.0,
    confidence: Annotated[float, typer.Option(help="confidence level in %")] = 95.0,
    as_percent_of: AsPercentOfOpt = None,
    limit: LimitOpt = None,
    disclosure: Annotated[
        bool,
        typer.Option(
            "--disclosure",
            help="a full-disclosure HTML page of one run (or load-point curve): results, the "
            "system under test, the load generators, the audit and every job file",
        ),
    ] = False,
) -> None:
    """Report runs: a self-contained HTML file, Markdown tables, or the numbers (json/csv)."""
    chosen = fmt or Format.html
    if disclosure:
        if len(run_refs) != 1 or chosen is not Format.html or output is None:
            raise UserError(
                "--disclosure writes one run's full-disclosure HTML page",
                hint="iorig report RUN --disclosure -o disclosure.html",
            )
        write_disclosure(ctx.obj, run_refs[0], output)
        return
    if chosen is Format.html and output is None:
        raise UserError("an HTML report needs a file", hint="add -o report.html")
    _comparison_out(
        ctx,
        list(run_refs),
        threshold,
        confidence,
        limit,
        chosen,
        as_percent_of=as_percent_of,
        output=output,
    )


def write_disclosure(db: Path, ref: str, output: Path) -> None:
    """The full-disclosure HTML page of one run (or load-point curve)."""
    from iorig.analyze.analysis import analyse
    from iorig.report.writers.disclosure import render_disclosure  # jinja2: when asked for
    from iorig.store.files import write_text

    with open_reaped(db) as store:
        run_id = resolve_run_id(store, ref)
        analysis = analyse(store.load_run(run_id), store.job_texts(run_id))
    text = render_disclosure(analysis)
    write_text(output, text, db)
    console.print(f"wrote {escape(str(output))} ({len(text.encode()) / 1e3:.0f} kB)")
