"""The core commands: run, runs, show, compare, report, export, import and
scenarios (doctor: cli/doctor.py). Each reads as its list of steps."""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import asdict, replace
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape
from rich.text import Text

from iorig.analyze.analysis import analyse, compare
from iorig.analyze.compare import shared_limit
from iorig.cli.common import (
    app,
    command_line,
    console,
    emit,
    err_console,
    finish,
    open_reaped,
    prepare_run,
    render_options,
    run_with_progress,
    scenarios_app,
    write_atomically,
)
from iorig.cli.options import PrecisionOpt, Rw, run_options
from iorig.cli.portable import import_bundle, waiting_notes
from iorig.cli.refs import resolve_run_id, resolve_runs
from iorig.errors import UserError
from iorig.model import Metric, StoredRun, series_stats
from iorig.report.exporters import render
from iorig.report.options import Limit
from iorig.report.tables.sut import sut_view
from iorig.report.tables.timeline import build_timeline
from iorig.report.writers import terminal
from iorig.report.writers.jsoncsv import FORMAT_VERSION, run_dict, series_dict, sut_dict, to_json
from iorig.report.writers.sparkline import timeline_lines
from iorig.report.writers.text import tables_text
from iorig.run.events import RunOutcome
from iorig.run.request import RunRequest
from iorig.run.searches import ThreadsSettings, run_threads_auto, stretch_builder
from iorig.run.session import RunSession, execute
from iorig.scenario import loading as scenario_mod
from iorig.scenario.adhoc import adhoc_source
from iorig.scenario.precision import parse_precision, with_precision
from iorig.scenario.schema import READS, TRIMS
from iorig.scenario.sweep import parse_grid, resolve_with_sweep, search_settings
from iorig.store import Store, export_run, preflight
from iorig.units import parse_limit

RUN_SETTINGS = {"allow_extra_args": True, "ignore_unknown_options": True}


@app.command(context_settings=RUN_SETTINGS)
@run_options(
    "target",
    "scenario",
    "profile",
    "adhoc",
    "repeat",
    "hosts",
    "min_rate",
    "events",
    "record",
    "fio",
)
def run(
    ctx: typer.Context,
    scenario: Annotated[
        str | None,
        typer.Argument(help="built-in scenario name, a scenario YAML or a fio job file (.fio)"),
    ] = None,
    rw: Annotated[Rw | None, typer.Option(help="ad-hoc run: I/O pattern (no scenario)")] = None,
    param: Annotated[
        list[str] | None,
        typer.Option(help="sweep a parameter: name=v1,v2,… (repeatable: a grid)"),
    ] = None,
    threads: Annotated[
        str | None,
        typer.Option(
            help="the scenario's threads: N, a scaling series N1,N2,… or auto (the fewest "
            "that pass its criteria)"
        ),
    ] = None,
    precision: PrecisionOpt = None,
    *,
    request: RunRequest,
) -> None:
    """Run a scenario (or an ad-hoc fio workload) and store every result.

    Any scenario parameter can also be given as an option (--mailboxes 500 is
    --set mailboxes=500), and a target by role (--target-db DIR is --target
    db=DIR). --param sweeps: every combination of the values given, each a
    stored phase (`iorig sweep` is the same command).
    """
    sweeping = ctx.info_name == "sweep"
    grid = parse_grid(param or [])
    if sweeping and not grid:
        raise UserError(
            "nothing to sweep", hint="give --param name=v1,v2 (e.g. --param bs=4k,64k,1m)"
        )
    source = _scenario_source(scenario, rw, grid, default_rw="randread" if sweeping else None)
    extra_sets, extra_targets = scenario_options(ctx.args)
    # a fio job file's own filename= or directory= unless --target is given
    targets = [*request.targets, *extra_targets] or ([source.target] if source.target else [])
    request = replace(request, sets=(*request.sets, *extra_sets), targets=tuple(targets))
    overrides = request.overrides()
    auto = threads_option(threads, overrides, grid)
    resolved = resolve_with_sweep(source, request.profile, overrides, grid)
    if precision is not None:
        resolved = with_precision(resolved, parse_precision(precision))
    preflight(ctx.obj)  # a database the run could not write to: refused before any target
    plan, backend = prepare_run(resolved, request)
    if auto:
        settings = ThreadsSettings()
        build = stretch_builder(plan, source, request.profile, overrides)

        def work(store: Store, on_event: Callable) -> RunOutcome:
            session = RunSession(
                plan,
                store,
                backend,
                command=command_line(),
                on_event=on_event,
                keep_files=request.keep_files,
                label=request.label,
                search=settings.as_dict(),
            )
            with session:
                run_threads_auto(session, build, settings)
            return session.outcome

        outcome, analysis = run_with_progress(ctx.obj, work, (plan, backend))
    else:
        outcome, analysis = run_with_progress(
            ctx.obj,
            lambda store, on_event: execute(
                plan,
                store,
                backend,
                command=command_line(),
                on_event=on_event,
                keep_files=request.keep_files,
                label=request.label,
                search=search_settings(resolved),
            ),
            (plan, backend),
        )
    finish(ctx.obj, outcome, analysis)


# `iorig sweep`: seed 003's word for a grid, kept as a name for `run --param`
app.command(
    "sweep",
    context_settings=RUN_SETTINGS,
    help="The same as `iorig run` with --param: a grid of parameter values in one run, each "
    "point a stored phase. Without a scenario or --rw, an ad-hoc random read.",
)(run)


def scenario_options(args: list[str]) -> tuple[list[str], list[str]]:
    """Options typer did not know: ``--name value`` (or ``--name=value``) sets a
    scenario parameter, ``--target-ROLE PATH`` binds a target."""
    sets, targets = [], []
    rest = list(args)
    while rest:
        item = rest.pop(0)
        if not item.startswith("--") or len(item) < 3:
            raise UserError(
                f"unexpected argument {item!r}",
                hint="one scenario per run; parameters are --name value or --set name=value",
            )
        name, sep, value = item[2:].partition("=")
        if not sep:
            if not rest or rest[0].startswith("--"):
                raise UserError(f"--{name} needs a value, e.g. --{name} 10")
            value = rest.pop(0)
        if name.startswith("target-") and len(name) > 7:
            targets.append(f"{name[7:].replace('-', '_')}={value}")
        else:
            sets.append(f"{name.replace('-', '_')}={value}")
    return sets, targets


def threads_option(threads: str | None, overrides: dict[str, str], grid: dict) -> bool:
    """``--threads``: a value (an override), a list (a sweep) or auto (True)."""
    if threads is None:
        return False
    if "threads" in overrides or "threads" in grid:
        raise UserError("give the threads once: --threads, --set threads or --param threads")
    if threads.strip() == "auto":
        return True
    values = [v.strip() for v in threads.split(",")]
    if len(values) > 1:
        grid["threads"] = values
    else:
        overrides["threads"] = values[0]
    return False


def _scenario_source(
    scenario: str | None, rw: Rw | None, grid: dict, *, default_rw: str | None = None
) -> scenario_mod.ScenarioSource:
    """The scenario named, or an ad-hoc one: with ``--rw``, with a sweep of
    ``rw`` (``--param rw=read,write``), or with ``default_rw``."""
    if scenario and rw:
        raise UserError(
            "give either a scenario or --rw (an ad-hoc run), not both",
            hint="scenario parameters are changed with --set name=value",
        )
    if scenario:
        return scenario_mod.read_source(scenario)
    if rw is not None and "rw" in grid:
        raise UserError("rw is both swept (--param rw=…) and fixed (--rw)", hint="drop one")
    if "rw" in grid or default_rw is not None:
        patterns = grid.get("rw", [rw.value if rw else default_rw])
        return adhoc_source(
            patterns[0],
            rw_parameter=True,
            prefill=any(p in READS | TRIMS for p in patterns),
            name="sweep",
            title="ad-hoc sweep",
        )
    if rw:
        return adhoc_source(rw.value)
    raise UserError(
        "which scenario? give a name, a YAML file, or --rw for an ad-hoc run",
        hint=f"built-ins: {', '.join(scenario_mod.builtin_names())} (see `iorig scenarios`)",
    )


@app.command()
def runs(
    ctx: typer.Context,
    limit: Annotated[int, typer.Option(min=1, help="newest N runs")] = 20,
    as_json: Annotated[bool, typer.Option("--json", help="machine-readable output")] = False,
) -> None:
    """List stored runs, newest first."""
    with open_reaped(ctx.obj) as store:
        records = store.list_runs(limit)
        headlines = {r.id: store.headline_series(r.id) for r in records}
        notes = waiting_notes(store, (r.id for r in records))
    for note in notes:  # on stderr, past the output (a pipe or --json reads stdout)
        err_console.print(note)
    if as_json:
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


FormatOpt = Annotated[Format | None, typer.Option("--format", help="output format")]


def _analyses(
    store: Store, refs: list[str], *, jobs: bool = True, baseline: str | None = None
) -> list:
    """The runs named by ``refs`` (``baseline`` first when given), analysed, each once."""
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
    typer.Option(
        help="baseline run (id, prefix, label, last~N); each run as % of it (median per second)"
    ),
]
LimitOpt = Annotated[
    str | None,
    typer.Option(
        help="an interface limit (3.5GB/s) or a device's rating (500kIOPS): adds each run's "
        "median per second as % of it"
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
    write_atomically(output, text)
    console.print(f"wrote {escape(str(output))} ({len(text.encode()) / 1e6:.1f} MB)")


def _parse_limit(limit: str | None) -> Limit | None:
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
    from iorig.report.writers.disclosure import render_disclosure  # jinja2: when asked for

    with open_reaped(db) as store:
        run_id = resolve_run_id(store, ref)
        analysis = analyse(store.load_run(run_id), store.job_texts(run_id))
    text = render_disclosure(analysis)
    write_atomically(output, text)
    console.print(f"wrote {escape(str(output))} ({len(text.encode()) / 1e3:.0f} kB)")


@app.command("export")
def export_cmd(
    ctx: typer.Context,
    run_ref: Annotated[str, typer.Argument(metavar="RUN", help="run id, prefix, label or last")],
    output: Annotated[Path, typer.Option("-o", "--output", help="bundle file to create")],
) -> None:
    """Write one run with all its data to a portable file (an iorig results database)."""
    with open_reaped(ctx.obj) as store:
        run_id = resolve_run_id(store, run_ref)
        export_run(store, run_id, output)
    console.print(
        f"exported run {run_id} to {escape(str(output))}; load it elsewhere with `iorig import`"
    )


@app.command("import")
def import_cmd(
    ctx: typer.Context,
    bundle: Annotated[
        Path, typer.Argument(help="file written by `iorig export` (or any results db)")
    ],
) -> None:
    """Add the runs of an exported file to the database; runs already present are skipped."""
    with Store(ctx.obj) as store:
        results = import_bundle(store, bundle)
    for run_id, imported in results:
        console.print(f"{run_id}: {'imported' if imported else 'already present, skipped'}")
    if not results:
        console.print(f"{escape(str(bundle))} holds no runs")


@scenarios_app.callback()
def scenarios_list(ctx: typer.Context) -> None:
    """List built-in scenarios."""
    if ctx.invoked_subcommand is None:
        sources = [scenario_mod.read_source(n) for n in scenario_mod.builtin_names()]
        console.print(terminal.scenarios_table(sources))
        console.print("show one with `iorig scenarios show NAME`")


@scenarios_app.command("show")
def scenarios_show(
    name: Annotated[str, typer.Argument(help="built-in name or YAML path")],
) -> None:
    """Print a scenario with its parameters, profiles and phases."""
    resolved = scenario_mod.load(name)
    console.print(terminal.scenario_detail(resolved))
