"""Commands that search rather than run a fixed list: sweep (a grid of
parameter values), knee (the concurrency where throughput stops paying),
curve (load points at fractions of the maximum) and ort (SPEC's overall
response time of any load-point table)."""

from __future__ import annotations

from typing import Annotated

import typer

from iorig.adhoc import adhoc_source
from iorig.cli.common import (
    AllowDestroyOpt,
    BsOpt,
    DurationOpt,
    EngineOpt,
    FioOpt,
    IodepthOpt,
    JobsOpt,
    KeepFilesOpt,
    LabelOpt,
    ProfileOpt,
    QuickOpt,
    ReadPctOpt,
    RepeatOpt,
    Rw,
    SetOpt,
    SizeOpt,
    TargetOpt,
    app,
    collect_overrides,
    command_line,
    finish,
    print_run,
    print_search,
    run_with_progress,
)
from iorig.errors import UserError
from iorig.execute import execute
from iorig.plan import prepare
from iorig.scenario import READS, read_source
from iorig.sweep import parse_grid, resolve_with_sweep, search_settings

TargetArg = Annotated[
    str | None,
    typer.Argument(metavar="[TARGET]", help="file, directory (ends with /) or block device"),
]


def _one_target(positional: str | None, option: str | None) -> str | None:
    if positional and option and positional != option:
        raise UserError("give the target once: as an argument or with --target, not both")
    return positional or option


@app.command()
def sweep(
    ctx: typer.Context,
    target_arg: TargetArg = None,
    param: Annotated[
        list[str] | None,
        typer.Option(help="a parameter and its values, e.g. bs=4k,8k,16k (repeatable: a grid)"),
    ] = None,
    scenario: Annotated[
        str | None, typer.Option(help="sweep a scenario's parameters (default: ad-hoc fio job)")
    ] = None,
    target: TargetOpt = None,
    size: SizeOpt = None,
    set_: SetOpt = None,
    quick: QuickOpt = False,
    profile: ProfileOpt = None,
    allow_destroy: AllowDestroyOpt = False,
    keep_files: KeepFilesOpt = False,
    rw: Annotated[Rw | None, typer.Option(help="ad-hoc: I/O pattern when not swept")] = None,
    bs: BsOpt = None,
    iodepth: IodepthOpt = None,
    jobs: JobsOpt = None,
    duration: DurationOpt = None,
    read_pct: ReadPctOpt = None,
    engine: EngineOpt = None,
    repeat: RepeatOpt = 1,
    label: LabelOpt = None,
    fio: FioOpt = None,
) -> None:
    """Run a grid of parameter values in one run, each point a stored phase."""
    grid = parse_grid(param or [])
    adhoc = scenario is None
    if adhoc:
        if rw is not None and "rw" in grid:
            raise UserError("rw is both swept (--param rw=…) and fixed (--rw)", hint="drop one")
        patterns = grid.get("rw", [rw.value if rw else "randread"])
        source = adhoc_source(
            patterns[0], rw_parameter=True, prefill=any(p in READS for p in patterns),
            name="sweep", title="ad-hoc sweep",
        )  # fmt: skip
    else:
        if rw is not None:
            raise UserError(
                "--rw is for ad-hoc sweeps", hint="use --param or --set with a scenario"
            )
        source = read_source(scenario)
    overrides = collect_overrides(
        set_ or [], size=size, bs=bs, iodepth=iodepth, jobs=jobs, duration=duration,
        read_pct=read_pct, engine=engine, adhoc=adhoc,
    )  # fmt: skip
    resolved = resolve_with_sweep(source, "quick" if quick else profile, overrides, grid)
    if not resolved.sweep:
        raise UserError(
            "nothing to sweep", hint="give --param name=v1,v2 (e.g. --param bs=4k,64k,1m)"
        )
    roles = list(resolved.scenario.targets)
    given = _one_target(target_arg, target)
    plan = prepare(
        resolved,
        {roles[0]: given} if given and len(roles) == 1 else {},
        allow_destroy=allow_destroy,
        fio_path=fio,
        repeats=repeat,
    )
    search = search_settings(resolved)
    outcome, stored = run_with_progress(
        ctx.obj,
        lambda store, on_event: execute(
            plan, store, command=command_line(), on_event=on_event, keep_files=keep_files,
            label=label, search=search,
        ),
    )  # fmt: skip
    print_run(stored)
    print_search(stored)
    finish(ctx.obj, outcome)
