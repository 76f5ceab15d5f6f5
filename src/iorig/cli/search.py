"""Commands that search rather than run a fixed list: sweep (a grid of
parameter values), knee (the concurrency where throughput stops paying),
curve (load points at fractions of the maximum) and ort (SPEC's overall
response time of any load-point table)."""

from __future__ import annotations

import sys
from collections.abc import Callable
from enum import StrEnum
from typing import Annotated

import typer
from rich.markup import escape

from iorig.analyze.knee import KneeRule
from iorig.analyze.loadpoints import default_fractions, ort_of, spec_rules
from iorig.analyze.loadtable import parse_load_table
from iorig.cli.common import (
    AllowDestroyOpt,
    BsOpt,
    DurationOpt,
    EngineOpt,
    FioOpt,
    HostsFileOpt,
    HostsOpt,
    IodepthOpt,
    JobsOpt,
    KeepFilesOpt,
    LabelOpt,
    NoteOpt,
    ProfileOpt,
    QuickOpt,
    ReadPctOpt,
    RepeatOpt,
    Rw,
    SetOpt,
    SizeOpt,
    SutOpt,
    SutOptions,
    TargetOpt,
    app,
    collect_overrides,
    command_line,
    console,
    finish,
    host_list,
    plan_for,
    run_with_progress,
)
from iorig.errors import UserError
from iorig.report.tables.run import to_rich
from iorig.report.tables.searches import ort_table
from iorig.run.backend import PhaseBackend
from iorig.run.events import RunOutcome
from iorig.run.plan import Plan
from iorig.run.searches import (
    CurveSettings,
    KneeSettings,
    check_knee,
    run_curve,
    run_knee,
    template_phase,
)
from iorig.run.session import RunSession, execute
from iorig.scenario.adhoc import adhoc_source
from iorig.scenario.loading import read_source, resolve
from iorig.scenario.schema import READS, TRIMS
from iorig.scenario.sweep import parse_grid, resolve_with_sweep, search_settings
from iorig.store import Store
from iorig.units import parse_latency_limit
from iorig.untrusted import read_input


class Scale(StrEnum):
    iodepth = "iodepth"
    jobs = "jobs"


TargetArg = Annotated[
    str | None,
    typer.Argument(metavar="[TARGET]", help="file, directory (ends with /) or block device"),
]


def _targets(positional: str | None, options: list[str] | None) -> list[str]:
    return ([positional] if positional else []) + list(options or [])


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
    hosts: HostsOpt = None,
    hosts_file: HostsFileOpt = None,
    sut: SutOpt = None,
    note: NoteOpt = None,
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
            patterns[0],
            rw_parameter=True,
            prefill=any(p in READS | TRIMS for p in patterns),
            name="sweep",
            title="ad-hoc sweep",
        )
    else:
        if rw is not None:
            raise UserError(
                "--rw is for ad-hoc sweeps", hint="use --param or --set with a scenario"
            )
        source = read_source(scenario)
    overrides = collect_overrides(
        set_ or [],
        size=size,
        bs=bs,
        iodepth=iodepth,
        jobs=jobs,
        duration=duration,
        read_pct=read_pct,
        engine=engine,
    )
    resolved = resolve_with_sweep(source, "quick" if quick else profile, overrides, grid)
    if not resolved.sweep:
        raise UserError(
            "nothing to sweep", hint="give --param name=v1,v2 (e.g. --param bs=4k,64k,1m)"
        )
    plan, backend = plan_for(
        resolved,
        _targets(target_arg, target),
        hosts=host_list(hosts, hosts_file),
        allow_destroy=allow_destroy,
        fio=fio,
        repeats=repeat,
        sut=SutOptions(sut, tuple(note or ())),
    )
    search = search_settings(resolved)
    outcome, analysis = run_with_progress(
        ctx.obj,
        lambda store, on_event: execute(
            plan,
            store,
            backend,
            command=command_line(),
            on_event=on_event,
            keep_files=keep_files,
            label=label,
            search=search,
        ),
        (plan, backend),
    )
    finish(ctx.obj, outcome, analysis)


def _adhoc_plan(
    *,
    name: str,
    title: str,
    rw: Rw,
    targets: list[str],
    overrides: dict[str, str],
    quick: bool,
    allow_destroy: bool,
    fio: str | None,
    hosts: list,
    sut: SutOptions,
) -> tuple[Plan, PhaseBackend]:
    source = adhoc_source(rw.value, name=name, title=title)
    resolved = resolve(source, "quick" if quick else None, overrides)
    return plan_for(resolved, targets, hosts=hosts, allow_destroy=allow_destroy, fio=fio, sut=sut)


def _search(
    ctx: typer.Context,
    planned: tuple[Plan, PhaseBackend],
    settings: dict,
    drive: Callable[[RunSession], None],
    *,
    label: str | None,
    keep_files: bool,
) -> None:
    plan, backend = planned

    def work(store: Store, on_event: Callable) -> RunOutcome:
        session = RunSession(
            plan,
            store,
            backend,
            command=command_line(),
            on_event=on_event,
            keep_files=keep_files,
            label=label,
            search=settings,
        )
        with session:
            drive(session)
        return session.outcome

    outcome, analysis = run_with_progress(ctx.obj, work, planned)
    finish(ctx.obj, outcome, analysis)


def _percent_option(value: float, option: str) -> float:
    if not 0 < value < 100:
        raise UserError(f"{option} is a percentage between 0 and 100, e.g. 10")
    return value / 100


@app.command()
def knee(
    ctx: typer.Context,
    target_arg: TargetArg = None,
    rw: Annotated[Rw, typer.Option(help="I/O pattern")] = Rw.randread,
    bs: BsOpt = None,
    scale: Annotated[
        Scale, typer.Option(help="what to raise: iodepth (one job) or jobs (each --iodepth deep)")
    ] = Scale.iodepth,
    iodepth: IodepthOpt = None,
    jobs: JobsOpt = None,
    min_gain: Annotated[
        float, typer.Option(help="a doubling must gain this many % to count as paying")
    ] = 10.0,
    slo: Annotated[
        str | None, typer.Option(help="latency SLO, e.g. p99<=1ms: the best throughput within it")
    ] = None,
    max_concurrency: Annotated[
        int, typer.Option(min=1, help="highest jobs × iodepth to try")
    ] = 1024,
    confirm: Annotated[
        int, typer.Option(min=1, help="measurements of each top candidate (a band, not a sample)")
    ] = 3,
    top: Annotated[int, typer.Option(min=1, help="candidates re-measured")] = 3,
    duration: DurationOpt = None,
    target: TargetOpt = None,
    size: SizeOpt = None,
    read_pct: ReadPctOpt = None,
    engine: EngineOpt = None,
    set_: SetOpt = None,
    quick: QuickOpt = False,
    allow_destroy: AllowDestroyOpt = False,
    keep_files: KeepFilesOpt = False,
    label: LabelOpt = None,
    hosts: HostsOpt = None,
    hosts_file: HostsFileOpt = None,
    sut: SutOpt = None,
    note: NoteOpt = None,
    fio: FioOpt = None,
) -> None:
    """Find the knee: the concurrency where more outstanding I/O stops paying."""
    fixed = (jobs if scale is Scale.iodepth else iodepth) or 1
    if (scale is Scale.iodepth and iodepth) or (scale is Scale.jobs and jobs):
        raise UserError(f"--{scale.value} is what the knee search raises; do not fix it")
    slo_ns = None
    if slo is not None:
        stat, slo_ns = _latency_limit(slo, "--slo")
        if stat != "p99":
            raise UserError("--slo takes a p99 limit, e.g. --slo p99<=1ms")
    overrides = collect_overrides(
        set_ or [],
        size=size,
        bs=bs,
        duration=_point_duration(duration, quick),
        read_pct=read_pct,
        engine=engine,
        **{"jobs" if scale is Scale.iodepth else "iodepth": fixed},
    )
    planned = _adhoc_plan(
        name="knee",
        title=f"knee search: {rw.value}, raising {scale.value}",
        rw=rw,
        targets=_targets(target_arg, target),
        overrides=overrides,
        quick=quick,
        allow_destroy=allow_destroy,
        fio=fio,
        hosts=host_list(hosts, hosts_file),
        sut=SutOptions(sut, tuple(note or ())),
    )
    template_phase(planned[0])
    settings = KneeSettings(
        scale=scale.value,
        rule=KneeRule(
            min_gain=_percent_option(min_gain, "--min-gain"),
            slo_p99_ns=slo_ns,
            max_concurrency=max_concurrency,
        ),
        confirm=confirm,
        top=top,
    )
    check_knee(planned[0], settings)
    _search(
        ctx,
        planned,
        settings.as_dict(),
        lambda s: run_knee(s, settings),
        label=label,
        keep_files=keep_files,
    )


POINT_DURATION = "30s"


def _point_duration(duration: str | None, quick: bool) -> str | None:
    """Each search point runs 30 s unless told (the quick profile's 5 s with --quick):
    long enough to average out second-to-second noise, short enough for ten points."""
    return duration if duration or quick else POINT_DURATION


def _latency_limit(text: str, option: str) -> tuple[str, float]:
    try:
        return parse_latency_limit(text)
    except ValueError as exc:
        raise UserError(f"{option} {text}: {exc}") from None


def _fractions(text: str | None) -> tuple[float, ...]:
    if text is None:
        return default_fractions()
    try:
        values = [float(v.strip().rstrip("%")) for v in text.split(",") if v.strip()]
    except ValueError:
        raise UserError(
            f"--fractions {text}: use percentages of the maximum, e.g. 10,50,70,80,90,100"
        ) from None
    if not values or any(not 0 < v <= 100 for v in values):
        raise UserError(f"--fractions {text}: each must be above 0 and at most 100 (%)")
    if values != sorted(set(values)):
        raise UserError(f"--fractions {text}: list them once each, lowest first")
    return tuple(v / 100 for v in values)


@app.command()
def curve(
    ctx: typer.Context,
    target_arg: TargetArg = None,
    rw: Annotated[Rw, typer.Option(help="I/O pattern")] = Rw.randread,
    bs: BsOpt = None,
    iodepth: IodepthOpt = None,
    jobs: JobsOpt = None,
    fractions: Annotated[
        str | None, typer.Option(help="load points in % of the maximum (default 10,20,…,100)")
    ] = None,
    max_iops: Annotated[
        float | None, typer.Option(help="known maximum IOPS: skip the uncontrolled run")
    ] = None,
    tolerance: Annotated[
        float, typer.Option(help="a point is valid when it achieves within this % of its rate")
    ] = 5.0,
    cap: Annotated[
        str | None, typer.Option(help="stop past a latency, e.g. p99<=10ms or mean<=5ms")
    ] = None,
    duration: DurationOpt = None,
    target: TargetOpt = None,
    size: SizeOpt = None,
    read_pct: ReadPctOpt = None,
    engine: EngineOpt = None,
    set_: SetOpt = None,
    quick: QuickOpt = False,
    allow_destroy: AllowDestroyOpt = False,
    keep_files: KeepFilesOpt = False,
    label: LabelOpt = None,
    hosts: HostsOpt = None,
    hosts_file: HostsFileOpt = None,
    sut: SutOpt = None,
    note: NoteOpt = None,
    fio: FioOpt = None,
) -> None:
    """Load-point curve: the maximum, then fixed rates at fractions of it; SPEC's ORT."""
    settings = CurveSettings(
        fractions=_fractions(fractions),
        tolerance=_percent_option(tolerance, "--tolerance"),
        max_iops=max_iops,
        cap=_latency_limit(cap, "--cap") if cap else None,
    )
    if max_iops is not None and max_iops <= 0:
        raise UserError("--max-iops must be greater than zero")
    overrides = collect_overrides(
        set_ or [],
        size=size,
        bs=bs,
        iodepth=iodepth if iodepth else 32,
        jobs=jobs,
        duration=_point_duration(duration, quick),
        read_pct=read_pct,
        engine=engine,
    )
    planned = _adhoc_plan(
        name="curve",
        title=f"load-point curve: {rw.value}",
        rw=rw,
        targets=_targets(target_arg, target),
        overrides=overrides,
        quick=quick,
        allow_destroy=allow_destroy,
        fio=fio,
        hosts=host_list(hosts, hosts_file),
        sut=SutOptions(sut, tuple(note or ())),
    )
    template_phase(planned[0])
    _search(
        ctx,
        planned,
        settings.as_dict(),
        lambda s: run_curve(s, settings),
        label=label,
        keep_files=keep_files,
    )


@app.command()
def ort(
    table: Annotated[
        str,
        typer.Argument(
            help="load-point table, - for standard input: a CSV with columns load, latency_ms, "
            "ops_per_s, or SPEC's Performance table as printed (Business Metric / Average "
            "Latency / Ops/Sec / MB/Sec; the whole report may be given)"
        ),
    ],
) -> None:
    """SPEC's overall response time of any load-point table (e.g. a published result)."""
    source = "standard input" if table == "-" else table
    parsed = parse_load_table(_read_table(table), source)
    rows = parsed.rows
    console.print(to_rich(ort_table(rows)))
    loads = [r.load for r in rows if r.load is not None]
    problems = spec_rules(loads) if len(loads) == len(rows) else []
    value = ort_of(rows)
    published = (
        f" (published: {parsed.published_ort_ms:g} ms)"
        if parsed.published_ort_ms is not None
        else ""
    )
    console.print(
        f"overall response time: [bold]{value:.2f} ms[/] over {len(rows)} points{published}"
    )
    for problem in problems:
        console.print(f"[yellow]not a valid SPEC load-point set:[/] {escape(problem)}")


_TABLE_LIMIT = 4_000_000  # bytes of a file, characters of stdin: a full disclosure report is ~30 k


def _read_table(name: str) -> str:
    """The table's text: a file or standard input, UTF-8, of a sane size."""
    if name != "-":  # a file: regular, bounded, UTF-8
        return read_input(name, "load-point table", limit_bytes=_TABLE_LIMIT)
    try:
        text = sys.stdin.read(_TABLE_LIMIT + 1)
    except OSError as exc:
        raise UserError(f"cannot read {name}: {exc.strerror}") from None
    except UnicodeDecodeError as exc:
        raise UserError(
            f"{name} is not UTF-8 text (byte {exc.start})",
            hint="give the table as text: a CSV or SPEC's report as printed",
        ) from None
    if len(text) > _TABLE_LIMIT:
        raise UserError(f"{name} is over {_TABLE_LIMIT:,} characters: not a load-point table")
    return text
