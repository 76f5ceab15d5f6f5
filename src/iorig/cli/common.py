"""Shared pieces of the ``iorig`` command: the typer app, the consoles (the
only place that prints), the live progress view and the run-and-summarise
steps every run command ends with.

Every ``iorig`` start imports this module and every command's options,
``iorig --help`` as much as a run: what only a command's work needs
(numpy, pydantic, the store, the run and report layers) is imported in the
function that does it, never here (bench/startup.py measures the start)."""

from __future__ import annotations

import contextlib
import functools
import inspect
import os
import shlex
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.markup import escape
from rich.text import Text

from iorig import __version__
from iorig.errors import UserError
from iorig.report.writers.console import SafeConsole
from iorig.units import format_duration, format_latency, format_rate, format_si

if TYPE_CHECKING:
    from rich.progress import TaskID

    from iorig.analyze.analysis import Comparison, RunAnalysis
    from iorig.model import RunStatus
    from iorig.report.options import RenderOptions
    from iorig.run.backend import PhaseBackend
    from iorig.run.events import Event, RunOutcome
    from iorig.run.live import LiveSink
    from iorig.run.plan import Plan
    from iorig.run.request import RunRequest
    from iorig.run.session import RunSession
    from iorig.scenario.loading import ResolvedScenario
    from iorig.serve.metrics import MetricsEndpoint
    from iorig.store import Store

EXIT_VERDICT_FAILED = 3

# every text printed is shown visibly (report/writers/console.py), never re-styled
console = SafeConsole(unwrapped_in_pipe=True)
err_console = SafeConsole(stderr=True, unwrapped_in_pipe=True)

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_show_locals=False,
    rich_markup_mode=None,
    help="iorig: fair, repeatable storage benchmarks on fio, with every result kept.",
)
scenarios_app = typer.Typer(no_args_is_help=False, invoke_without_command=True)
app.add_typer(scenarios_app, name="scenarios", help="List built-in scenarios or show one.")


# typer's placeholders (``<int range>``, ``<list[str]>``) as a reader says them;
# text is named by the parameter (--label LABEL)
_PLACEHOLDERS = {"int": "N", "int range": "N", "float": "NUM", "float range": "NUM", "path": "PATH"}
# choices longer than this are named by the parameter and listed in its help:
# joined with "|" they are one word, which help split mid-word at 80 columns
_CHOICES_INLINE = 24


def click_command(typer_app: typer.Typer) -> Any:
    """The click command ``typer_app`` builds, its help made to read in any
    terminal and pipe (``tidy_help``)."""
    command = typer.main.get_command(typer_app)
    tidy_help(command)
    return command


def tidy_help(command: Any) -> None:
    """Placeholders a reader understands in place of typer's ``<str>``,
    ``<list[str]>``, ``<int range>``: N for a count, PATH, the parameter's
    own name for text, short choices as ``a|b`` and long ones by name with
    the choices in the help. Idempotent (tests build the command once)."""
    ctx = typer.Context(command)
    for param in command.params:
        if param.metavar is not None or getattr(param, "is_flag", False):
            continue
        try:
            shown = str(param.display_type(ctx)).strip("<>")
        except (AttributeError, TypeError):  # not typer's parameter: as it is
            continue
        if shown.startswith("list[") and shown.endswith("]"):
            shown = shown[5:-1]
        name = (param.name or "value").rstrip("_").upper()
        if "|" in shown and len(shown) > _CHOICES_INLINE:
            param.metavar = name
            param.help = f"{param.help or ''} (one of: {shown.replace('|', ', ')})".strip()
        elif "|" in shown:
            param.metavar = shown
        else:
            param.metavar = _PLACEHOLDERS.get(shown.lower(), name)
    for sub in getattr(command, "commands", {}).values():
        tidy_help(sub)


def one_line_summaries(typer_app: typer.Typer) -> None:
    """Each command's summary in its group's help: its help's first
    paragraph, its docstring's line breaks joined. typer keeps them in a
    command list (rich) or cuts the text at the first break with "..."
    (plain), which broke ab's, doctor's and serve's descriptions
    mid-sentence and cut agent's."""
    for info in typer_app.registered_commands:
        if not isinstance(info.short_help, str):
            info.short_help = _first_paragraph(info.help, info.callback)
    for group in typer_app.registered_groups:
        inner = group.typer_instance
        callback = inner.registered_callback.callback if inner.registered_callback else None
        if not isinstance(group.short_help, str):  # typer's placeholder for "not given"
            group.short_help = _first_paragraph(group.help or inner.info.help, callback)
        one_line_summaries(inner)


def _first_paragraph(help_text: Any, callback: Any) -> str | None:
    given = help_text if isinstance(help_text, str) else None
    text = inspect.cleandoc(given or (callback and callback.__doc__) or "")
    return " ".join(text.split("\n\n")[0].split()) or None


def exit_code(status: RunStatus) -> int:
    """A run's exit code by how it ended."""
    from iorig.model import RunStatus

    return {RunStatus.OK: 0, RunStatus.FAILED: 1, RunStatus.ABORTED: 130}[status]


def default_db_path() -> Path:
    """The results database when --db is not given."""
    if os.environ.get("IORIG_DB"):
        return Path(os.environ["IORIG_DB"]).expanduser()
    base = os.environ.get("XDG_DATA_HOME") or os.path.join(Path.home(), ".local", "share")
    return Path(base) / "iorig" / "results.sqlite"


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
        from rich.progress import BarColumn, Progress, TextColumn

        from iorig.report.writers.text import PIPED_WIDTH

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
        from iorig.analyze.summary import summarize_phase
        from iorig.model import ALL, PhaseKind
        from iorig.model.combine import headline_scope
        from iorig.report.tables.metrics import metric
        from iorig.report.writers.terminal import (
            DESCRIPTION_CHARS,
            TITLE_CHARS,
            clip,
            target_size,
        )
        from iorig.run.events import PhaseFinished, PhaseProgress, PhaseStarted, RunStarted

        if isinstance(event, RunStarted):
            plan = event.plan
            targets = ", ".join(
                f"{t.path} ({target_size(t.size_bytes, event.search_kind)})"
                for t in plan.targets.values()
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
                hosts = [headline_scope(result, h.scope.host) for h in result.host_scopes]
                if hosts:  # fio's client mode reports rates per host at the end only
                    each = "/".join(
                        fmt.format(sc.totals[ALL].level(s.headline))
                        if sc is not None and ALL in sc.totals
                        else "-"
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


def prepare_run(resolved: ResolvedScenario, request: RunRequest) -> tuple[Plan, PhaseBackend]:
    """The plan and its backend (``run/request.py``'s checks, in order), with
    a note on stderr for anything killed runs had left and was put back."""
    from iorig.run.request import prepare

    def note(line: str) -> None:
        err_console.print(Text.assemble(("note:", "cyan"), " ", line))

    return prepare(resolved, request, on_note=note)


def command_line() -> str:
    return " ".join(shlex.quote(a) for a in ["iorig", *sys.argv[1:]])


def open_reaped(db: Path) -> Store:
    """The results database with the runs of owners that died (``kill -9``)
    marked aborted first: every command that starts, shows, compares,
    reports or exports a run opens it this way, so none presents a killed
    run as running."""
    from iorig.store import Store

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


@contextlib.contextmanager
def live_view(
    out: SafeConsole,
    db: Path,
    metrics: str | None,
    linger: tuple[contextlib.ExitStack, float] | None = None,
) -> Iterator[Callable[..., None]]:
    """What a run shows while it goes: the progress lines on ``out``, its
    live figures in the database's live file for ``iorig serve`` and, with
    ``metrics`` (an address), on a Prometheus endpoint. With ``linger``
    (the command's stack, closed after its output, and at most how long),
    the endpoint stays until its scrapers have the final figures. The
    handler it gives takes the run's events, and a key for each of runs
    that go on together (``iorig ab``'s sides)."""
    from iorig.run.live import LiveFeed
    from iorig.store.live import LiveStore, LiveUnwritable

    sinks: list[LiveSink] = []
    exported = None
    with contextlib.ExitStack() as stack:
        if metrics is not None:
            from iorig.serve.address import parse_address
            from iorig.serve.metrics import LiveMetrics, MetricsEndpoint

            exported = LiveMetrics()
            endpoint = MetricsEndpoint(parse_address(metrics), exported)
            if linger is None:
                stack.callback(endpoint.close)
            else:
                after, most_s = linger
                after.callback(functools.partial(linger_then_close, endpoint, most_s))
            sinks.append(exported)
            err_console.print(f"metrics at http://{endpoint.address}/metrics")
        try:
            live = LiveStore(db)
        except LiveUnwritable as exc:
            err_console.print(Text(f"note: no live figures for iorig serve ({exc})"))
        else:
            stack.callback(live.close)
            sinks.append(live)
        feed = LiveFeed(sinks)
        view = stack.enter_context(ProgressView(out))

        def handle(event: Event, key: str = "") -> None:
            view.handle(event)
            feed.handle(event, key)

        try:
            yield handle
        except BaseException:
            if exported is not None:
                exported.aborted = True  # an error or a signal: nobody waits for a scrape
            raise
        finally:
            feed.close()
            for problem in feed.problems:
                err_console.print(Text(f"note: {problem}"))


def linger_then_close(endpoint: MetricsEndpoint, linger_s: float) -> None:
    """The metrics endpoint kept until its scrapers have the run's final
    figures (``MetricsEndpoint.linger``), then closed; Ctrl-C ends the wait."""
    try:
        if endpoint.metrics.ended_at is not None and not endpoint.metrics.aborted and linger_s > 0:
            err_console.print(
                f"metrics: the final figures stay at http://{endpoint.address}/metrics until "
                f"every scraper has them, at most {format_duration(linger_s)} (Ctrl-C stops)"
            )
        with contextlib.suppress(KeyboardInterrupt):
            if endpoint.linger(linger_s) is False:
                err_console.print(
                    f"note: metrics: not every scraper asked for the final figures in "
                    f"{format_duration(linger_s)}"
                )
    finally:
        endpoint.close()


def watch_or_release(
    stack: contextlib.ExitStack,
    out: SafeConsole,
    db: Path,
    metrics: str | None,
    prepared: Sequence[tuple[Plan, PhaseBackend]],
    linger: tuple[contextlib.ExitStack, float] | None = None,
) -> Callable[..., None]:
    """``live_view`` entered on ``stack``; when it cannot start (the metrics
    port is taken), the ``prepared`` plans' targets are released first:
    a refused run leaves nothing behind."""
    try:
        return stack.enter_context(live_view(out, db, metrics, linger))
    except UserError:
        for plan, backend in prepared:
            backend.clean_up(plan, keep_files=False)
        raise


def run_with_progress(
    db: Path,
    work: Callable[[Store, Callable[[Event], None]], RunOutcome],
    prepared: tuple[Plan, PhaseBackend],
    request: RunRequest,
    after: contextlib.ExitStack,
) -> tuple[RunOutcome, RunAnalysis]:
    """Run ``work`` (an execute or a search of the ``prepared`` plan) with the
    live view; analyse the result. ``after`` closes once the command has
    printed what the run found (a metrics endpoint lingers to it)."""
    from iorig.analyze.analysis import analyse
    from iorig.store import Store

    with open_for_run(db, [prepared]) as store, contextlib.ExitStack() as watched:
        linger = (after, request.metrics_linger_s)
        handle = watch_or_release(watched, console, db, request.metrics, [prepared], linger)
        outcome = work(store, handle)
        watched.close()  # the live view ends with the run, before its analysis
        if outcome.recovery is None:
            analysis = analyse(store.load_run(outcome.run_id))
    if outcome.recovery is not None:  # the database would not take the run: it is in this file
        with Store(outcome.recovery) as kept:
            analysis = analyse(kept.load_run(outcome.run_id))
    console.print()
    return outcome, analysis


def run_search(
    db: Path,
    planned: tuple[Plan, PhaseBackend],
    request: RunRequest,
    settings: dict,
    drive: Callable[[RunSession], None],
) -> None:
    """A run whose phases ``drive`` chooses from what it measured (a knee,
    a curve, --threads auto), with the live view; then what it found."""
    from iorig.run.session import RunSession

    plan, backend = planned

    def work(store: Store, on_event: Callable[[Event], None]) -> RunOutcome:
        session = RunSession(
            plan,
            store,
            backend,
            command=command_line(),
            on_event=on_event,
            keep_files=request.keep_files,
            label=request.label,
            search=settings,
        )
        with session:
            drive(session)
        return session.outcome

    with contextlib.ExitStack() as after:
        outcome, analysis = run_with_progress(db, work, planned, request, after)
        finish(db, outcome, analysis)


def render_options(**given: object) -> RenderOptions:
    """Options for the text renderer, sized to this terminal; when stdout is
    no terminal (a pipe, a file, a CI log), tables keep their natural width
    and nothing wraps, whatever COLUMNS says."""
    from iorig.report.options import RenderOptions

    color = console.is_terminal and not console.no_color
    return RenderOptions(  # type: ignore[arg-type]
        width=console.width, color=color, piped=not console.is_terminal, **given
    )


def emit(fmt: str, subject: RunAnalysis | Comparison, options: RenderOptions | None = None) -> None:
    """Render and print: the only way a run or a comparison reaches stdout."""
    from iorig.report.exporters import render

    sys.stdout.write(render(fmt, subject, options or render_options()))
    sys.stdout.flush()


def finish(db: Path, outcome: RunOutcome, analysis: RunAnalysis) -> None:
    """What the run found, where it is, and the exit code: a run whose
    measured phases all failed its requirements (a FAIL verdict) exits 3, so
    scripts can tell; so does one whose verify phase found data lost (the run
    also failed, but lost data is the verdict, not a breakdown)."""
    from iorig.model import RunStatus

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
    code = exit_code(outcome.status)
    if (code == 0 and not analysis.passed) or (
        outcome.status is RunStatus.FAILED and analysis.data_lost
    ):
        code = EXIT_VERDICT_FAILED
    raise typer.Exit(code)
