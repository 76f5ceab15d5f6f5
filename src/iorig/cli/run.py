"""``iorig run`` (and ``iorig sweep``, the same command with a grid):
a scenario, a fio job file or an ad-hoc workload, run and stored. It reads
as its list of steps."""

from __future__ import annotations

import contextlib
from dataclasses import replace
from typing import TYPE_CHECKING, Annotated

import typer

from iorig.cli.common import (
    app,
    command_line,
    finish,
    prepare_run,
    run_search,
    run_with_progress,
)
from iorig.cli.options import PrecisionOpt, Rw, run_options
from iorig.errors import UserError

if TYPE_CHECKING:
    from iorig.run.request import RunRequest
    from iorig.scenario.loading import ScenarioSource

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
    "jobfile",
    "events",
    "record",
    "fio",
    "metrics",
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
    accelerators: Annotated[
        str | None,
        typer.Option(
            help="a training scenario's accelerators per host: N, or auto (the most that keep "
            "AU at or above the floor in every epoch)"
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
    from iorig.machine.sysinfo import usable_cpus
    from iorig.run.searches import (
        AcceleratorsSettings,
        ThreadsSettings,
        accelerators_builder,
        run_accelerators_auto,
        run_threads_auto,
        stretch_builder,
    )
    from iorig.run.session import execute
    from iorig.scenario.precision import parse_precision, with_precision
    from iorig.scenario.sweep import parse_grid, resolve_with_sweep, search_settings
    from iorig.store import preflight

    sweeping = ctx.info_name == "sweep"
    grid = parse_grid(param or [])
    if sweeping and not grid:
        raise UserError(
            "nothing to sweep", hint="give --param name=v1,v2 (e.g. --param bs=4k,64k,1m)"
        )
    source = scenario_source(scenario, rw, grid, default_rw="randread" if sweeping else None)
    request.check_data_rules(source)
    extra_sets, extra_targets = scenario_options(ctx.args)
    # a fio job file's own filename= or directory= unless --target is given
    targets = [*request.targets, *extra_targets] or ([source.target] if source.target else [])
    request = replace(request, sets=(*request.sets, *extra_sets), targets=tuple(targets))
    overrides = request.overrides()
    auto = threads_option(threads, overrides, grid)
    most = accelerators_option(accelerators, overrides, grid)
    resolved = resolve_with_sweep(source, request.profile, overrides, grid)
    if accelerators is not None and resolved.scenario.training is None:
        raise UserError(
            "--accelerators applies to a training scenario (one with a training section)",
            hint="iorig run train --accelerators auto",
        )
    if precision is not None:
        resolved = with_precision(resolved, parse_precision(precision))
    preflight(ctx.obj)  # a database the run could not write to: refused before any target
    plan, backend = prepare_run(resolved, request)
    if most:
        search = AcceleratorsSettings.for_plan(plan, usable_cpus()[0])
        builder = accelerators_builder(plan, source, request.profile, overrides)
        run_search(
            ctx.obj,
            (plan, backend),
            request,
            search.as_dict(),
            lambda session: run_accelerators_auto(session, builder, search),
        )
        return
    if auto:
        settings = ThreadsSettings()
        build = stretch_builder(plan, source, request.profile, overrides)
        run_search(
            ctx.obj,
            (plan, backend),
            request,
            settings.as_dict(),
            lambda session: run_threads_auto(session, build, settings),
        )
        return
    with contextlib.ExitStack() as after:  # closed once the summary is out
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
            request,
            after,
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


def accelerators_option(given: str | None, overrides: dict[str, str], grid: dict) -> bool:
    """``--accelerators``: a count (an override) or auto (True: the search)."""
    if given is None:
        return False
    if "accelerators" in overrides or "accelerators" in grid:
        raise UserError(
            "give the accelerators once: --accelerators, --set accelerators or --param accelerators"
        )
    if given.strip() == "auto":
        if grid:
            raise UserError("--accelerators auto is a search of its own: drop --param")
        return True
    overrides["accelerators"] = given.strip()
    return False


def scenario_source(
    scenario: str | None, rw: Rw | None, grid: dict, *, default_rw: str | None = None
) -> ScenarioSource:
    """The scenario named, or an ad-hoc one: with ``--rw``, with a sweep of
    ``rw`` (``--param rw=read,write``), or with ``default_rw``."""
    from iorig.scenario import loading as scenario_mod
    from iorig.scenario.adhoc import adhoc_source
    from iorig.scenario.schema import READS, TRIMS

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
