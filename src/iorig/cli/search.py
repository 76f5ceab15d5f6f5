"""Commands that search rather than run a fixed list: sweep (a grid of
parameter values), knee (the concurrency where throughput stops paying),
curve (load points at fractions of the maximum) and ort (SPEC's overall
response time of any load-point table)."""

from __future__ import annotations

import sys
from enum import StrEnum
from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape

from iorig.cli.common import (
    app,
    console,
    prepare_run,
    run_search,
)
from iorig.cli.options import Rw, run_options
from iorig.errors import UserError
from iorig.units import parse_latency_limit
from iorig.untrusted import read_input

if TYPE_CHECKING:
    from iorig.run.backend import PhaseBackend
    from iorig.run.plan import Plan
    from iorig.run.request import RunRequest


class Scale(StrEnum):
    iodepth = "iodepth"
    jobs = "jobs"


def _adhoc_plan(
    request: RunRequest, *, name: str, title: str, rw: Rw, overrides: dict[str, str]
) -> tuple[Plan, PhaseBackend]:
    from iorig.scenario.adhoc import adhoc_source
    from iorig.scenario.loading import resolve

    source = adhoc_source(rw.value, name=name, title=title)
    resolved = resolve(source, "quick" if request.quick else None, overrides)
    return prepare_run(resolved, request)


def _percent_option(value: float, option: str) -> float:
    if not 0 < value < 100:
        raise UserError(f"{option} is a percentage between 0 and 100, e.g. 10")
    return value / 100


@app.command()
@run_options("target", "scenario", "adhoc", "hosts", "min_rate", "record", "fio", "metrics")
def knee(
    ctx: typer.Context,
    rw: Annotated[Rw, typer.Option(help="I/O pattern")] = Rw.randread,
    scale: Annotated[
        Scale, typer.Option(help="what to raise: iodepth (one job) or jobs (each --iodepth deep)")
    ] = Scale.iodepth,
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
    *,
    request: RunRequest,
) -> None:
    """Find the knee: the concurrency where more outstanding I/O stops paying."""
    from iorig.analyze.knee import KneeRule
    from iorig.run.searches import KneeSettings, check_knee, run_knee, template_phase

    raised, kept = ("iodepth", "jobs") if scale is Scale.iodepth else ("jobs", "iodepth")
    if raised in request.workload:
        raise UserError(f"--{scale.value} is what the knee search raises; do not fix it")
    slo_ns = None
    if slo is not None:
        stat, slo_ns = _latency_limit(slo, "--slo")
        if stat != "p99":
            raise UserError("--slo takes a p99 limit, e.g. --slo p99<=1ms")
    overrides = request.overrides(
        duration=_point_duration(request.workload.get("duration"), request.quick),
        **{kept: request.workload.get(kept) or 1},
    )
    planned = _adhoc_plan(
        request,
        name="knee",
        title=f"knee search: {rw.value}, raising {scale.value}",
        rw=rw,
        overrides=overrides,
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
    run_search(ctx.obj, planned, request, settings.as_dict(), lambda s: run_knee(s, settings))


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
    from iorig.analyze.loadpoints import default_fractions

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
@run_options("target", "scenario", "adhoc", "hosts", "min_rate", "record", "fio", "metrics")
def curve(
    ctx: typer.Context,
    rw: Annotated[Rw, typer.Option(help="I/O pattern")] = Rw.randread,
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
    *,
    request: RunRequest,
) -> None:
    """Load-point curve: the maximum, then fixed rates at fractions of it; SPEC's ORT."""
    from iorig.run.searches import CurveSettings, run_curve, template_phase

    settings = CurveSettings(
        fractions=_fractions(fractions),
        tolerance=_percent_option(tolerance, "--tolerance"),
        max_iops=max_iops,
        cap=_latency_limit(cap, "--cap") if cap else None,
    )
    if max_iops is not None and max_iops <= 0:
        raise UserError("--max-iops must be greater than zero")
    overrides = request.overrides(
        iodepth=request.workload.get("iodepth") or 32,
        duration=_point_duration(request.workload.get("duration"), request.quick),
    )
    planned = _adhoc_plan(
        request, name="curve", title=f"load-point curve: {rw.value}", rw=rw, overrides=overrides
    )
    template_phase(planned[0])
    run_search(ctx.obj, planned, request, settings.as_dict(), lambda s: run_curve(s, settings))


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
    from iorig.analyze.loadpoints import ort_of, rate_falls, spec_rules
    from iorig.analyze.loadtable import parse_load_table
    from iorig.report.tables.model import to_rich
    from iorig.report.tables.searches import ort_table

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
    for fall in rate_falls([(r.load, r.ops_per_s) for r in rows]):
        console.print(f"[yellow]note:[/] {escape(fall)}")


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
