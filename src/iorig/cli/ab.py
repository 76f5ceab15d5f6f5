"""``iorig ab``: an interleaved A/B comparison — two runs whose measured
phases alternate in rounds of random order — printed as ``compare`` prints
two runs, with the verdicts of the paired rounds."""

from __future__ import annotations

import contextlib
import random
from dataclasses import replace
from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape

from iorig.analyze.abrounds import MAX_ROUNDS, MIN_AUTO_ROUNDS
from iorig.cli.common import (
    app,
    command_line,
    console,
    emit,
    err_console,
    exit_code,
    open_for_run,
    prepare_run,
    render_options,
    watch_or_release,
)
from iorig.cli.options import Rw, check_label, run_options
from iorig.cli.results import Format
from iorig.cli.run import scenario_source
from iorig.errors import UserError
from iorig.report.writers.console import SafeConsole

if TYPE_CHECKING:
    from iorig.run.ab import AbOutcome, SideKey
    from iorig.run.backend import PhaseBackend
    from iorig.run.events import Event
    from iorig.run.plan import Plan
    from iorig.run.request import RunRequest
    from iorig.scenario.loading import ResolvedScenario, ScenarioSource

SideOpt = Annotated[
    list[str] | None,
    typer.Option(
        help="this side's settings, name=value (comma-separated or repeated): target=PATH or "
        "target-ROLE=PATH binds a target, anything else sets a scenario parameter"
    ),
]


def side_items(key: str, items: list[str]) -> tuple[list[str], list[str]]:
    """``--a``/``--b`` items as (parameter settings, target bindings). A
    comma-separated piece without ``=`` belongs to the value before it
    (``bssplit=4k/50,8k/50``)."""
    pieces: list[str] = []
    for item in items:
        for piece in item.split(","):
            if "=" in piece or not pieces:
                pieces.append(piece)
            else:
                pieces[-1] += "," + piece
    sets, targets = [], []
    for piece in pieces:
        name, sep, value = piece.partition("=")
        name = name.strip()
        if not sep or not name or not value.strip():
            raise UserError(
                f"--{key} {piece!r}: expected name=value",
                hint=f"e.g. --{key} target=/mnt/x or --{key} iodepth=32",
            )
        if name == "target":
            targets.append(value.strip())
        elif name.startswith("target-") and len(name) > 7:
            targets.append(f"{name[7:].replace('-', '_')}={value.strip()}")
        else:
            sets.append(f"{name.replace('-', '_')}={value.strip()}")
    return sets, targets


def _rounds(text: str) -> int | None:
    if text.strip() == "auto":
        return None
    try:
        rounds = int(text)
    except ValueError:
        raise UserError(
            f"--rounds {text!r}: a number of rounds or auto", hint="e.g. --rounds 5"
        ) from None
    if not 2 <= rounds <= 1000:
        raise UserError(
            "--rounds: 2 to 1000 (a paired test needs two rounds at least)",
            hint="--rounds auto adds rounds until the verdict is clear",
        )
    return rounds


def _resolve(
    key: str, source: ScenarioSource, profile: str | None, overrides: dict[str, str]
) -> ResolvedScenario:
    from iorig.scenario.sweep import resolve_with_sweep

    try:
        return resolve_with_sweep(source, profile, overrides)
    except UserError as exc:
        raise UserError(
            f"side {key.upper()}: {exc.message}",
            hint=exc.hint or f"fix --{key} (or --set, which both sides share)",
        ) from None


def _plans(
    resolved: dict[str, ResolvedScenario], targets: dict[str, list[str]], request: RunRequest
) -> dict[str, tuple[Plan, PhaseBackend]]:
    """Both sides' plans; a side that cannot be planned leaves no target file
    of the other behind."""
    from iorig.run.ab import check_sides

    made: dict[str, tuple[Plan, PhaseBackend]] = {}
    try:
        for key in ("a", "b"):
            try:
                side = replace(request, targets=tuple(targets[key]))
                made[key] = prepare_run(resolved[key], side)
            except UserError as exc:
                hint = exc.hint or f"fix the targets of --{key}"
                raise UserError(f"side {key.upper()}: {exc.message}", hint=hint) from None
        check_sides(made["a"][0], made["b"][0])
    except BaseException:
        for plan, backend in made.values():
            backend.clean_up(plan, keep_files=False)
        raise
    return made


@app.command("ab")
@run_options("target", "scenario", "profile", "adhoc", "jobfile", "fio", "metrics")
def ab_cmd(
    ctx: typer.Context,
    scenario: Annotated[
        str | None, typer.Argument(help="built-in scenario name or path to a scenario YAML")
    ] = None,
    a: SideOpt = None,
    b: SideOpt = None,
    a_label: Annotated[str, typer.Option(help="label of side A's run", callback=check_label)] = "A",
    b_label: Annotated[str, typer.Option(help="label of side B's run", callback=check_label)] = "B",
    rounds: Annotated[
        str,
        typer.Option(
            help="rounds of A and B in random order: N, or auto (until the verdict "
            "is clear, at least 3, at most --max-rounds)"
        ),
    ] = "auto",
    max_rounds: Annotated[
        int, typer.Option(min=MIN_AUTO_ROUNDS, max=1000, help="--rounds auto: at most this many")
    ] = MAX_ROUNDS,
    seed: Annotated[int | None, typer.Option(help="seed of the rounds' order (recorded)")] = None,
    threshold: Annotated[
        float, typer.Option(help="practical threshold in %: smaller changes are no difference")
    ] = 2.0,
    confidence: Annotated[float, typer.Option(help="confidence level in %")] = 95.0,
    rw: Annotated[Rw | None, typer.Option(help="ad-hoc A/B: I/O pattern (no scenario)")] = None,
    fmt: Annotated[Format | None, typer.Option("--format", help="output: text, md or json")] = None,
    *,
    request: RunRequest,
) -> None:
    """Compare A and B in interleaved rounds: setup once per side, then the
    measured phases of A and B in a random order every round, each a fresh fio
    run; the verdict from the paired rounds.

    e.g. iorig ab peak --quick --a target=/mnt/x --b target=/mnt/y
    """
    from iorig.analyze.analysis import analyse, compare
    from iorig.run.ab import AbSettings, Side, run_ab
    from iorig.run.events import PhaseStarted
    from iorig.run.request import collect_overrides
    from iorig.store import preflight

    chosen = fmt or Format.text
    if chosen not in (Format.text, Format.md, Format.json):
        raise UserError(
            f"--format {chosen.value}: ab prints text, md or json",
            hint="write html or csv from the stored runs: iorig report A B -o FILE",
        )
    if not 0 < confidence < 100:
        raise UserError("--confidence is a percentage between 0 and 100, e.g. 95")
    if not 0 <= threshold < 100:
        raise UserError("--threshold is a percentage from 0 to 100, e.g. 2")
    count = _rounds(rounds)
    source = scenario_source(scenario, rw, {})
    request.check_data_rules(source)
    common = request.overrides()
    profile = request.profile
    resolved, targets = {}, {}
    for key, items in (("a", a), ("b", b)):
        if not items:
            raise UserError(
                f"side {key.upper()} is not given",
                hint=f"e.g. --{key} target=/mnt/{key} (or --{key} iodepth=32 "
                "with --target PATH for both)",
            )
        sets, bound = side_items(key, items)
        overrides = common | collect_overrides(sets)
        resolved[key] = _resolve(key, source, profile, overrides)
        targets[key] = bound or list(request.targets)
    preflight(ctx.obj)  # a database the runs could not write to: refused before any target
    plans = _plans(resolved, targets, request)
    labels = {"a": a_label, "b": b_label}
    sides = (Side("a", *plans["a"], a_label), Side("b", *plans["b"], b_label))
    settings = AbSettings(
        rounds=count,
        max_rounds=max_rounds,
        threshold=threshold / 100,
        confidence=confidence / 100,
        seed=seed if seed is not None else random.SystemRandom().randrange(2**31),
    )
    out = err_console if chosen is Format.json else console
    with contextlib.ExitStack() as after:  # closed once the comparison is out
        with open_for_run(ctx.obj, list(plans.values())) as store:
            with contextlib.ExitStack() as watched:
                handle = watch_or_release(
                    watched,
                    out,
                    ctx.obj,
                    request.metrics,
                    list(plans.values()),
                    (after, request.metrics_linger_s),
                )

                def on_event(side: SideKey, event: Event) -> None:
                    if isinstance(event, PhaseStarted):  # which side's phase, in the live view
                        phase = replace(
                            event.phase,
                            name=f"{labels[side]}: {event.phase.name}",
                            # metrics label it as the scenario's: a side's label is user text
                            scenario_phase=event.phase.scenario_name,
                        )
                        event = replace(event, phase=phase)
                    handle(event, side)

                outcome = run_ab(
                    sides,
                    store,
                    settings,
                    command=command_line(),
                    on_event=on_event,
                    keep_files=request.keep_files,
                )
            kept = [o.recovery for o in outcome.outcomes if o.recovery is not None]
            if not kept:
                cmp = compare(
                    [analyse(store.load_run(o.run_id)) for o in outcome.outcomes],
                    threshold=threshold / 100,
                    confidence=confidence / 100,
                )
        _report(ctx, outcome, kept, out)
        if not kept:
            emit(chosen.value, cmp, render_options())
        code = max(exit_code(o.status) for o in outcome.outcomes)
        raise typer.Exit(code)


def _report(ctx: typer.Context, outcome: AbOutcome, kept: list, err: SafeConsole) -> None:
    """Where the two runs are, how many rounds ran and how they ended."""
    a, b = outcome.a, outcome.b
    err.print(
        f"A/B {outcome.id}: {outcome.rounds} round(s) completed, order seed {outcome.seed}; "
        f"A = run {a.run_id} ({a.status}), B = run {b.run_id} ({b.status})"
    )
    for o in (a, b):
        if o.error:
            err.print(f"[yellow]run {o.run_id}: {escape(o.error)}[/]")
    if kept:
        files = ", ".join(escape(str(k)) for k in kept)
        err.print(
            f"[bold red]the results database {escape(str(ctx.obj))} could not be "
            f"written[/]: the results are kept in {files} (add them with iorig "
            "import)"
        )
        return
    err.print(f"stored in {escape(str(ctx.obj))}; again with `iorig compare {a.run_id} {b.run_id}`")
