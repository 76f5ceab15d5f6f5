"""Shared pieces of the ``iorig`` command: the typer app, the consoles (the
only place that prints), the live progress view and the run-and-summarise
steps every run command ends with."""

from __future__ import annotations

import math
import shlex
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer
from pydantic import ValidationError
from rich.markup import escape
from rich.progress import BarColumn, Progress, TaskID, TextColumn
from rich.text import Text

from iorig import __version__
from iorig.analyze.analysis import Comparison, RunAnalysis, analyse
from iorig.analyze.summary import summarize_phase
from iorig.errors import UserError
from iorig.fio.hosts import MAX_HOSTS, HostSpec, parse_entry, parse_hosts, too_many_hosts
from iorig.machine.recovery import recover
from iorig.model import ALL, PhaseKind, RunStatus
from iorig.report.exporters import render
from iorig.report.options import RenderOptions
from iorig.report.tables.metrics import metric
from iorig.report.writers.console import SafeConsole
from iorig.report.writers.terminal import DESCRIPTION_CHARS, TITLE_CHARS, clip
from iorig.report.writers.text import PIPED_WIDTH
from iorig.run import make_backend
from iorig.run.actions import check_events, parse_grants
from iorig.run.backend import PhaseBackend
from iorig.run.events import (
    Event,
    PhaseFinished,
    PhaseProgress,
    PhaseStarted,
    RunOutcome,
    RunStarted,
)
from iorig.run.plan import Plan
from iorig.run.session import check_workdir_space
from iorig.scenario.events import EventSpec, parse_cli_event
from iorig.scenario.loading import ResolvedScenario, parse_assignments
from iorig.scenario.schema import Phase
from iorig.scenario.sut import system_under_test
from iorig.store import Store, default_db_path
from iorig.targets import bind_host_targets, bind_targets
from iorig.units import format_bytes, format_latency, format_rate, format_si, parse_rate
from iorig.untrusted import check_text, check_utf8_path, read_input

EXIT_CODES = {RunStatus.OK: 0, RunStatus.FAILED: 1, RunStatus.ABORTED: 130}
EXIT_VERDICT_FAILED = 3

# every text printed is shown visibly (report/writers/console.py), never re-styled
console = SafeConsole()
err_console = SafeConsole(stderr=True)

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
    trim = "trim"  # discards: where the target takes them (docs/guide/scenario-files.md, Trims)
    randtrim = "randtrim"
    trimwrite = "trimwrite"
    randtrimwrite = "randtrimwrite"


# Options shared by the run commands (run, sweep, knee, curve).
TargetOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--target",
        help="file, directory (ends with /) or block device; ROLE=PATH for a scenario with "
        "several targets (repeatable)",
    ),
]
SizeOpt = Annotated[str | None, typer.Option(help="working set, e.g. 64MiB, 16GiB")]
SetOpt = Annotated[
    list[str] | None, typer.Option("--set", help="parameter override name=value (repeatable)")
]
QuickOpt = Annotated[bool, typer.Option(help="use the scenario's quick profile (a fast look)")]
ProfileOpt = Annotated[str | None, typer.Option(help="use a named profile of the scenario")]
AllowDestroyOpt = Annotated[
    bool, typer.Option(help="allow overwriting a device or file that holds data")
]
KeepFilesOpt = Annotated[
    bool, typer.Option(help="keep the data file iorig creates in a directory target")
]
BsOpt = Annotated[str | None, typer.Option(help="ad-hoc: block size")]
IodepthOpt = Annotated[int | None, typer.Option(help="ad-hoc: outstanding I/Os per job")]
JobsOpt = Annotated[int | None, typer.Option(help="ad-hoc: fio jobs")]
DurationOpt = Annotated[str | None, typer.Option(help="ad-hoc: measured time, e.g. 30s")]
ReadPctOpt = Annotated[int | None, typer.Option(help="ad-hoc randrw/rw: read percentage")]
EngineOpt = Annotated[
    str | None,
    typer.Option(help="ad-hoc: io_uring, libaio, psync, auto, or null (fio's ceiling, no storage)"),
]
RepeatOpt = Annotated[
    int, typer.Option(min=1, help="run the measured phases N times (for significance)")
]
PrecisionOpt = Annotated[
    str | None,
    typer.Option(
        help="measure each measured phase until its median is known to ±N % (e.g. 2%; its "
        "duration becomes the maximum) and warm up until steady"
    ),
]


def check_label(param: typer.CallbackParam, value: str | None) -> str | None:
    """``--label`` (and ``ab``'s side labels): one line of plain text."""
    return None if value is None else check_text(value, param.opts[0] if param.opts else "label")


LabelOpt = Annotated[
    str | None,
    typer.Option(
        help="a name for this run in comparisons, e.g. 'with passthrough'", callback=check_label
    ),
]
FioOpt = Annotated[str | None, typer.Option(help="fio binary (default: $IORIG_FIO or PATH)")]
HostsOpt = Annotated[
    str | None,
    typer.Option(
        help="run on these hosts: ssh://[USER@]HOST[:PORT] (reached over SSH) or an `iorig "
        "agent`'s HOST[:PORT], comma-separated (default: this machine)"
    ),
]
SutOpt = Annotated[
    Path | None,
    typer.Option(
        "--sut",
        help="a YAML file describing the system under test (see `iorig sut template`); "
        "merged over the scenario's sut: section",
    ),
]
NoteOpt = Annotated[
    list[str] | None,
    typer.Option("--note", help="free text stored with the run, e.g. 'cache off' (repeatable)"),
]


@dataclass(frozen=True)
class SutOptions:
    """``--sut FILE`` and ``--note TEXT`` of a run command."""

    file: Path | None = None
    notes: tuple[str, ...] = ()


HostsFileOpt = Annotated[
    Path | None,
    typer.Option(
        help="a file listing the hosts, one per line: ssh://[USER@]HOST[:PORT] or an "
        "`iorig agent`'s HOST[:PORT]"
    ),
]


def host_list(hosts: str | None, hosts_file: Path | None) -> list[HostSpec]:
    """The hosts of --hosts and --hosts-file (empty: this machine)."""
    found: list[HostSpec] = []
    if hosts is not None:  # an empty --hosts is a mistake, not this machine
        found += parse_hosts(hosts)
    if hosts_file is not None:
        lines = read_input(hosts_file, "--hosts-file").splitlines()
        seen = set(found)
        for number, line in enumerate(lines, start=1):
            entry = line.split("#", 1)[0].strip()
            if not entry:
                continue
            if len(found) == MAX_HOSTS:
                raise too_many_hosts(f"{hosts_file} (with --hosts)" if hosts else str(hosts_file))
            try:
                host = parse_entry(entry)
            except UserError as exc:
                raise UserError(f"{hosts_file}:{number}: {exc.message}", hint=exc.hint) from None
            if host in seen:
                raise UserError(f"{hosts_file}:{number}: host {host.label} is listed twice")
            seen.add(host)
            found.append(host)
    return found


@dataclass(frozen=True)
class EventOptions:
    """``run --event``, ``--event-command`` and ``--allow-commands``."""

    events: tuple[str, ...] = ()
    commands: tuple[str, ...] = ()
    command_files: tuple[Path, ...] = ()


EventOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--event",
        help="add an event to a phase: PHASE@TIME=ACTION, e.g. measure@20s='stop-host 2' "
        "(repeatable; see docs/guide/availability-integrity.md)",
    ),
]
EventCommandOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--event-command",
        help="allow the event command NAME to run COMMAND: NAME='COMMAND' (repeatable)",
    ),
]
AllowCommandsOpt = Annotated[
    list[Path] | None,
    typer.Option("--allow-commands", help="a YAML file of event commands, NAME: COMMAND"),
]


def with_events(resolved: ResolvedScenario, items: Sequence[str]) -> ResolvedScenario:
    """The scenario with ``--event`` items added to their phases."""
    if not items:
        return resolved
    scenario = resolved.scenario
    added: dict[str, list[EventSpec]] = {}
    for item in items:
        try:
            phase, spec = parse_cli_event(item)
        except ValueError as exc:
            raise UserError(str(exc).splitlines()[0]) from None
        if phase not in {p.name for p in scenario.phases}:
            names = ", ".join(p.name for p in scenario.phases)
            raise UserError(f"--event {item!r:.80}: no phase {phase!r} (phases: {names})")
        added.setdefault(phase, []).append(spec)
    phases = []
    for p in scenario.phases:
        try:
            phases.append(
                Phase.model_validate(
                    p.model_dump() | {"events": [*p.events, *added.get(p.name, [])]}
                )
            )
        except ValidationError as exc:
            problems = "; ".join(e["msg"].removeprefix("Value error, ") for e in exc.errors())
            raise UserError(f"--event for phase {p.name!r}: {problems}") from None
    return replace(resolved, scenario=scenario.model_copy(update={"phases": phases}))


def plan_for(
    resolved: ResolvedScenario,
    targets: list[str],
    *,
    hosts: list[HostSpec],
    allow_destroy: bool,
    fio: str | None,
    repeats: int = 1,
    min_rate: str | None = None,
    events: EventOptions | None = None,
    sut: SutOptions | None = None,
) -> tuple[Plan, PhaseBackend]:
    """The backend (this machine, or the fio servers of --hosts), and the
    plan it prepared on the bound targets; events and the system under
    test checked before that."""
    sut = sut or SutOptions()
    described = system_under_test(resolved, sut.file, sut.notes)  # before any target file
    events = events or EventOptions()
    floor = _min_rate(min_rate)
    resolved = with_events(resolved, events.events)
    grants = parse_grants(events.commands, events.command_files)
    roles = list(resolved.scenario.targets)
    if hosts and (keeps := _keeps_state(resolved)):
        # fio 3.33 saves a job's write state on the server but loads it from
        # the client: the check could never run (refused before any file exists)
        raise UserError(
            f"workload {keeps!r} checks exactly what was acknowledged (verify_state), which "
            "works on this machine only, not on fio servers",
            hint="run the scenario without --hosts",
        )
    local = {} if hosts else bind_targets(roles, targets)
    for path in local.values():
        check_utf8_path(path)
    check_events(resolved, grants, hosts, local)  # a command not granted: nothing runs
    check_workdir_space()  # before any target file exists
    backend = make_backend(hosts, fio)
    if hosts:
        bound = bind_host_targets(roles, targets, hosts)
        paths = {host.label: paths for host, paths in bound.items()}
    else:
        paths = {backend.hosts[0]: local}
    restored = recover()  # what killed runs left: caps put back, files removed (and said)
    for line in restored:
        err_console.print(Text.assemble(("note:", "cyan"), " ", line))
    plan = backend.prepare(resolved, paths, allow_destroy=allow_destroy, repeats=repeats)
    plan = replace(plan, event_grants=grants, sut=described, notes=plan.notes + tuple(restored))
    return (replace(plan, min_bytes_per_s=floor) if floor else plan), backend


def _keeps_state(resolved: ResolvedScenario) -> str | None:
    """The first enabled workload that saves or loads fio's write state."""
    for phase in resolved.scenario.phases:
        for w in phase.workloads:
            if phase.enabled and w.enabled and w.verify_state:
                return w.label
    return None


MinRateOpt = Annotated[
    str | None,
    typer.Option(
        help="below this rate a prefill, creation or checksum counts as hung and is stopped "
        "(default 1MiB/s)"
    ),
]


def _min_rate(text: str | None) -> float | None:
    if text is None:
        return None
    try:
        rate = parse_rate(text)
    except ValueError as exc:
        raise UserError(f"--min-rate: {exc}") from None
    if not math.isfinite(rate) or rate < 1:
        raise UserError(f"--min-rate: {text!r} is not a positive rate", hint="e.g. 1MiB/s")
    return rate


def collect_overrides(items: list[str], **options: object) -> dict[str, str]:
    """``--set`` items plus the options that were given, as overrides. With a
    scenario, ``--duration 2s`` is ``--set duration=2s`` (the scenario must have
    the parameter; resolving says so when it does not)."""
    overrides = parse_assignments(items)
    for name, value in options.items():
        if value is None:
            continue
        if name in overrides:
            raise UserError(f"{name} is given twice (--{name.replace('_', '-')} and --set)")
        overrides[name] = str(value)
    return overrides


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
    """Live view of a run: one progress line per phase with current rates.

    Off a terminal (a file, a CI log) there is nothing to redraw: each phase's
    line is written once, whole, when it ends (rich would cut it to 80
    columns, or COLUMNS, and write the lines only when the run ends)."""

    def __init__(self, out: SafeConsole) -> None:
        self.live = out.is_terminal
        self.console = (
            out
            if self.live
            else SafeConsole(
                file=out.file,
                width=PIPED_WIDTH,
                no_color=out.no_color,
                soft_wrap=True,
            )
        )
        self.names: dict[tuple[int, int], str] = {}
        self.progress = Progress(
            TextColumn("{task.description}"),
            BarColumn(bar_width=24),
            TextColumn("{task.fields[clock]:>12}"),
            TextColumn("{task.fields[stats]}"),
            console=out,
            auto_refresh=True,
        )
        self.tasks: dict[tuple[int, int], TaskID] = {}

    def __enter__(self) -> ProgressView:
        if self.live:
            self.progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.live:
            self.progress.stop()

    def handle(self, event: Event) -> None:
        if isinstance(event, RunStarted):
            plan = event.plan
            targets = ", ".join(
                f"{t.path} ({format_bytes(t.size_bytes)})" for t in plan.targets.values()
            )
            self.console.print(  # user text as Text: no markup, no highlighting
                Text.assemble(
                    "run ",
                    (event.run_id, "bold"),
                    f": {clip(plan.resolved.scenario.title, TITLE_CHARS)} on {clip(targets)}; "
                    f"{plan.fio_version}, engine {', '.join(plan.engines) or '-'}",
                )
            )
            if plan.resolved.profile:
                self.console.print(
                    f"[yellow]profile {escape(plan.resolved.profile)}: shortened phases for a "
                    "fast look[/]"
                )
        elif isinstance(event, PhaseStarted):
            p = event.phase
            again = f" #{event.repeat + 1}" if event.repeat else ""
            name = f"[{event.index + 1}/{event.total or '?'}] {clip(p.name)}{again} ({p.kind})"
            self.names[(p.seq, event.repeat)] = name
            if self.live:
                self.tasks[(p.seq, event.repeat)] = self.progress.add_task(
                    escape(name), total=1.0, clock="", stats=""
                )
        elif isinstance(event, PhaseProgress) and self.live:
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
                self.tasks[(p.seq, event.repeat)],
                completed=event.fraction or 0,
                clock=clock,
                stats=stats,
            )
        elif isinstance(event, PhaseFinished):
            result = event.result
            stats = str(result.status)
            if result.kind is not PhaseKind.IDLE and result.aggregate is not None:
                s = summarize_phase(result)
                fmt = metric(s.headline)
                stats += f": {fmt.with_unit(s.headline_value)} (phase mean)"
                hosts = result.host_scopes
                if hosts:  # fio's client mode reports rates per host at the end only
                    each = "/".join(
                        fmt.format(sc.totals[ALL].level(s.headline)) if ALL in sc.totals else "-"
                        for sc in hosts
                    )
                    stats += f" [{len(hosts)} hosts: {each}]"
            if result.error:
                stats += f" ({result.error})"
            key = (event.phase.seq, event.result.repeat)
            if self.live:
                self.progress.update(
                    self.tasks[key], completed=1.0, stats=escape(clip(stats, DESCRIPTION_CHARS))
                )
            else:  # as Text: the phase's name and fio's message are no markup
                self.console.print(Text(f"{self.names[key]}  {stats}"))


def command_line() -> str:
    return " ".join(shlex.quote(a) for a in ["iorig", *sys.argv[1:]])


def open_reaped(db: Path) -> Store:
    """The results database with the runs of owners that died (``kill -9``)
    marked aborted first: every command that starts, shows, compares,
    reports or exports a run opens it this way, so none presents a killed
    run as running."""
    store = Store(db)
    try:
        store.reap_stale()
    except BaseException:
        store.close()
        raise
    return store


def open_for_run(db: Path, prepared: Sequence[tuple[Plan, PhaseBackend]]) -> Store:
    """The results database a run stores into (``open_reaped``), or, when it
    cannot be opened after all (a full filesystem, which preflight cannot
    see), the ``prepared`` plans' targets released first: a refused run
    leaves no file behind."""
    try:
        return open_reaped(db)
    except UserError:
        for plan, backend in prepared:
            backend.clean_up(plan, keep_files=False)
        raise


def run_with_progress(
    db: Path,
    work: Callable[[Store, Callable[[Event], None]], RunOutcome],
    prepared: tuple[Plan, PhaseBackend],
) -> tuple[RunOutcome, RunAnalysis]:
    """Run ``work`` (an execute or a search of the ``prepared`` plan) with the
    live view; analyse the result."""
    with open_for_run(db, [prepared]) as store:
        with ProgressView(console) as view:
            outcome = work(store, view.handle)
        if outcome.recovery is None:
            analysis = analyse(store.load_run(outcome.run_id))
    if outcome.recovery is not None:  # the database would not take the run: it is in this file
        with Store(outcome.recovery) as kept:
            analysis = analyse(kept.load_run(outcome.run_id))
    console.print()
    return outcome, analysis


def render_options(**given: object) -> RenderOptions:
    """Options for the text renderer, sized to this terminal; when stdout is
    no terminal (a pipe, a file, a CI log), tables keep their natural width
    and nothing wraps, whatever COLUMNS says."""
    color = console.is_terminal and not console.no_color
    return RenderOptions(  # type: ignore[arg-type]
        width=console.width, color=color, piped=not console.is_terminal, **given
    )


def emit(fmt: str, subject: RunAnalysis | Comparison, options: RenderOptions | None = None) -> None:
    """Render and print: the only way a run or a comparison reaches stdout."""
    sys.stdout.write(render(fmt, subject, options or render_options()))
    sys.stdout.flush()


def finish(db: Path, outcome: RunOutcome, analysis: RunAnalysis) -> None:
    """What the run found, where it is, and the exit code: a run whose
    measured phases all failed its requirements (a FAIL verdict) exits 3, so
    scripts can tell; so does one whose verify phase found data lost (the run
    also failed, but lost data is the verdict, not a breakdown)."""
    emit("text", analysis)
    if outcome.recovery is not None:
        kept = escape(str(outcome.recovery))
        console.print(
            f"\n[bold red]the results database {escape(str(db))} could not be written[/]: this "
            f"run's results are kept in {kept}\nonce the database is free, add them with: "
            f"iorig --db {escape(str(db))} import {kept}"
        )
    else:
        console.print(f"\nstored in {escape(str(db))}; see `iorig show {outcome.run_id}`")
    code = EXIT_CODES[outcome.status]
    if (code == 0 and not analysis.passed) or (
        outcome.status is RunStatus.FAILED and analysis.data_lost
    ):
        code = EXIT_VERDICT_FAILED
    raise typer.Exit(code)


def write_atomically(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.partial")
    try:
        tmp.write_text(text, encoding="utf-8")
        tmp.replace(path)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise UserError(f"cannot write {path}: {exc.strerror}") from None
