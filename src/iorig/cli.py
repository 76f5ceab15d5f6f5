"""The ``iorig`` command. Thin: each command reads as its list of steps;
the one place that prints and the one place that catches UserError."""

from __future__ import annotations

import json
import shlex
import sys
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, Progress, TaskID, TextColumn

from iorig import __version__
from iorig import scenario as scenario_mod
from iorig.adhoc import adhoc_source
from iorig.analyze.summary import measured, series_stats, summarize_phase
from iorig.errors import UserError
from iorig.execute import Event, PhaseFinished, PhaseProgress, PhaseStarted, RunStarted, execute
from iorig.plan import prepare
from iorig.report import tabular, terminal
from iorig.store import Store, default_db_path
from iorig.units import format_bytes, format_latency, format_rate, format_si

EXIT_CODES = {"ok": 0, "failed": 1, "aborted": 130}

console = Console()
err_console = Console(stderr=True)

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_show_locals=False,
    help="iorig: fair, repeatable storage benchmarks on fio, with every result kept.",
)
scenarios_app = typer.Typer(no_args_is_help=False, invoke_without_command=True)
app.add_typer(scenarios_app, name="scenarios", help="List built-in scenarios or show one.")


class Rw(StrEnum):
    read = "read"
    write = "write"
    randread = "randread"
    randwrite = "randwrite"
    randrw = "randrw"
    rw = "rw"


def _version(value: bool) -> None:
    if value:
        console.print(f"iorig {__version__}")
        raise typer.Exit()


@app.callback()
def main_options(
    ctx: typer.Context,
    db: Annotated[
        Path | None,
        typer.Option(
            help="results database (default: $IORIG_DB or $XDG_DATA_HOME/iorig/results.sqlite)"
        ),
    ] = None,
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="print the version")
    ] = False,
) -> None:
    ctx.obj = db or default_db_path()


class ProgressView:
    """Live view of a run: one progress line per phase with current rates."""

    def __init__(self, out: Console) -> None:
        self.console = out
        self.progress = Progress(
            TextColumn("{task.description}"),
            BarColumn(bar_width=24),
            TextColumn("{task.fields[clock]:>12}"),
            TextColumn("{task.fields[stats]}"),
            console=out,
            auto_refresh=True,
        )
        self.tasks: dict[int, TaskID] = {}

    def __enter__(self) -> ProgressView:
        self.progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.progress.stop()

    def handle(self, event: Event) -> None:
        if isinstance(event, RunStarted):
            plan = event.plan
            targets = ", ".join(
                f"{t.path} ({format_bytes(t.size_bytes)})" for t in plan.targets.values()
            )
            self.console.print(
                f"run [bold]{event.run_id}[/]: {plan.resolved.scenario.title} on {targets}; "
                f"{plan.fio_version}, engine {', '.join(plan.engines) or '-'}"
            )
            if plan.resolved.profile:
                self.console.print(
                    f"[yellow]profile {plan.resolved.profile}: shortened phases for a fast look[/]"
                )
        elif isinstance(event, PhaseStarted):
            p = event.phase
            self.tasks[p.seq] = self.progress.add_task(
                f"[{event.index + 1}/{event.total}] {p.name} ({p.kind})",
                total=1.0,
                clock="",
                stats="",
            )
        elif isinstance(event, PhaseProgress):
            p = event.phase
            clock = f"{event.elapsed_s:.0f}s" + (f"/{p.duration_s:.0f}s" if p.duration_s else "")
            stats = ""
            if event.rates:
                r = event.rates
                stats = (
                    f"{format_si(r.iops)} IOPS  {format_rate(r.bytes_per_s)}  "
                    f"lat {format_latency(r.lat_mean_ns)}"
                )
            self.progress.update(
                self.tasks[p.seq], completed=event.fraction or 0, clock=clock, stats=stats
            )
        elif isinstance(event, PhaseFinished):
            result = event.result
            stats = result.status
            if result.kind != "idle" and result.aggregate is not None:
                s = summarize_phase(result)
                value = terminal.format_metric(s.headline, s.headline_value)
                stats += f": {value} {terminal.METRIC_LABEL[s.headline]} (phase mean)"
            if result.error:
                stats += f" ({result.error})"
            self.progress.update(self.tasks[event.phase.seq], completed=1.0, stats=stats)


def _command_line() -> str:
    return " ".join(shlex.quote(a) for a in ["iorig", *sys.argv[1:]])


@app.command()
def run(
    ctx: typer.Context,
    scenario: Annotated[
        str | None, typer.Argument(help="built-in scenario name or path to a scenario YAML")
    ] = None,
    target: Annotated[
        str | None, typer.Option(help="file, directory (ends with /) or block device to test")
    ] = None,
    size: Annotated[str | None, typer.Option(help="working set, e.g. 64MiB, 16GiB")] = None,
    set_: Annotated[
        list[str] | None, typer.Option("--set", help="parameter override name=value (repeatable)")
    ] = None,
    quick: Annotated[
        bool, typer.Option(help="use the scenario's quick profile (a fast look)")
    ] = False,
    profile: Annotated[str | None, typer.Option(help="use a named profile of the scenario")] = None,
    allow_destroy: Annotated[
        bool, typer.Option(help="allow overwriting a device or file that holds data")
    ] = False,
    keep_files: Annotated[
        bool, typer.Option(help="keep the data file iorig creates in a directory target")
    ] = False,
    rw: Annotated[Rw | None, typer.Option(help="ad-hoc run: I/O pattern (no scenario)")] = None,
    bs: Annotated[str | None, typer.Option(help="ad-hoc: block size")] = None,
    iodepth: Annotated[int | None, typer.Option(help="ad-hoc: outstanding I/Os per job")] = None,
    jobs: Annotated[int | None, typer.Option(help="ad-hoc: fio jobs")] = None,
    duration: Annotated[str | None, typer.Option(help="ad-hoc: measured time, e.g. 30s")] = None,
    read_pct: Annotated[int | None, typer.Option(help="ad-hoc randrw/rw: read percentage")] = None,
    engine: Annotated[
        str | None, typer.Option(help="ad-hoc: io_uring, libaio, psync or auto")
    ] = None,
    fio: Annotated[
        str | None, typer.Option(help="fio binary (default: $IORIG_FIO or PATH)")
    ] = None,
) -> None:
    """Run a scenario (or an ad-hoc fio workload) and store every result."""
    source = _scenario_source(scenario, rw)
    overrides = _overrides(
        set_ or [], size=size, bs=bs, iodepth=iodepth, jobs=jobs, duration=duration,
        read_pct=read_pct, engine=engine, adhoc=rw is not None,
    )  # fmt: skip
    resolved = scenario_mod.resolve(source, "quick" if quick else profile, overrides)
    roles = list(resolved.scenario.targets)
    plan = prepare(
        resolved,
        {roles[0]: target} if target and len(roles) == 1 else {},
        allow_destroy=allow_destroy,
        fio_path=fio,
    )
    with Store(ctx.obj) as store:
        with ProgressView(console) as view:
            outcome = execute(
                plan, store, command=_command_line(), on_event=view.handle, keep_files=keep_files
            )
        stored = store.load_run(outcome.run_id)
    console.print()
    engines = sorted({p.engine for p in stored.phases if p.engine})
    console.print(terminal.run_report(stored.run, measured(stored.phases), engines))
    console.print(f"\nstored in {ctx.obj}; see `iorig show {outcome.run_id}`")
    raise typer.Exit(EXIT_CODES[outcome.status])


def _scenario_source(scenario: str | None, rw: Rw | None) -> scenario_mod.ScenarioSource:
    if scenario and rw:
        raise UserError(
            "give either a scenario or --rw (an ad-hoc run), not both",
            hint="scenario parameters are changed with --set name=value",
        )
    if rw:
        return adhoc_source(rw.value)
    if not scenario:
        raise UserError(
            "which scenario? give a name, a YAML file, or --rw for an ad-hoc run",
            hint=f"built-ins: {', '.join(scenario_mod.builtin_names())} (see `iorig scenarios`)",
        )
    return scenario_mod.read_source(scenario)


def _overrides(items: list[str], *, adhoc: bool, **options: object) -> dict[str, str]:
    overrides = scenario_mod.parse_assignments(items)
    for name, value in options.items():
        if value is None:
            continue
        if name != "size" and not adhoc:
            raise UserError(
                f"--{name.replace('_', '-')} is for ad-hoc runs (with --rw)",
                hint=f"change a scenario's parameters with --set, e.g. --set {name}={value}",
            )
        overrides[name] = str(value)
    return overrides


@app.command()
def runs(
    ctx: typer.Context,
    limit: Annotated[int, typer.Option(help="newest N runs")] = 20,
    as_json: Annotated[bool, typer.Option("--json", help="machine-readable output")] = False,
) -> None:
    """List stored runs, newest first."""
    with Store(ctx.obj) as store:
        records = store.list_runs(limit)
        headlines = {r.id: store.headline_series(r.id) for r in records}
    if as_json:
        out = []
        for r in records:
            item = tabular.run_dict(r)
            item["headline"] = [
                {"phase": name, "metric": metric, "per_second": tabular.series_dict(stats)}
                for name, metric, stats in ((n, m, series_stats(v)) for n, m, v in headlines[r.id])
            ]
            out.append(item)
        console.print_json(json.dumps(out))
        return
    if not records:
        console.print(
            f"no runs in {ctx.obj} yet; try `iorig run peak --quick --target ./iorig-scratch/`"
        )
        return
    console.print(terminal.runs_table(records, headlines))


@app.command()
def show(
    ctx: typer.Context,
    run_ref: Annotated[
        str, typer.Argument(metavar="RUN", help="run id, unique prefix, or last")
    ] = "last",
    as_json: Annotated[bool, typer.Option("--json", help="machine-readable output")] = False,
    jobs: Annotated[bool, typer.Option("--jobs", help="print each phase's fio job file")] = False,
) -> None:
    """Show one run: per measured phase, median/max/min per second and latency percentiles."""
    with Store(ctx.obj) as store:
        stored = store.load_run(run_ref)
        job_texts = (
            [
                (p.name, store.artifact(pid, "job.fio"))
                for p, pid in zip(stored.phases, stored.phase_ids, strict=True)
            ]
            if jobs
            else []
        )
    if as_json:
        console.print_json(json.dumps(tabular.show_dict(stored)))
        return
    engines = sorted({p.engine for p in stored.phases if p.engine})
    console.print(terminal.run_report(stored.run, measured(stored.phases), engines))
    for name, text in job_texts:
        if text:
            console.print(f"\n[bold]; phase {name}[/]")
            console.print(text, markup=False, highlight=False)


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


def main() -> None:
    try:
        app()
    except UserError as exc:
        err_console.print(f"[bold red]error:[/] {escape(exc.message)}", highlight=False)
        if exc.hint:
            err_console.print(f"  [cyan]hint:[/] {escape(exc.hint)}", highlight=False)
        sys.exit(2)
