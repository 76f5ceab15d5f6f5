"""Sweeps: one run over a grid of parameter values (seed 003's block sizes ×
read/write, docs/methodology.md §3).

A sweep expands a scenario: the phases before its first measured phase
(prefill, warm-up) run once, then the stretch from the first to the last
measured phase runs once per grid point, with the point's values substituted
like ``--set``, then the phases after it (a checksum, say) run once. Points
are the Cartesian product of the swept values, the first parameter varying
slowest. Each point's phases are named after their phase and the point
(``measure:bs=4KiB,rw=read``) so that two sweep runs match point by point in
``compare``, and each stored phase records its coordinates.
"""

from __future__ import annotations

import itertools
from dataclasses import replace

from iorig.errors import UserError
from iorig.model import PhaseKind
from iorig.scenario.loading import ResolvedScenario, ScenarioSource, resolve
from iorig.scenario.schema import Phase, coerce_parameter, value_text

MAX_POINTS = 1000


def parse_grid(items: list[str]) -> dict[str, list[str]]:
    """``["bs=4k,8k", "rw=read,write"]`` -> ``{"bs": ["4k", "8k"], "rw": [...]}``."""
    grid: dict[str, list[str]] = {}
    for item in items:
        name, sep, values = item.partition("=")
        name = name.strip()
        parts = [v.strip() for v in values.split(",")]
        if not sep or not name or not all(parts):
            raise UserError(
                f"--param {item!r}: expected name=value1,value2,…",
                hint="e.g. --param bs=4k,8k,16k --param rw=read,write",
            )
        if name in grid:
            raise UserError(f"--param {name} is given twice", hint="list all its values once")
        grid[name] = parts
    return grid


def point_label(point: dict[str, str]) -> str:
    return ",".join(f"{name}={text}" for name, text in point.items())


def resolve_with_sweep(  # noqa: C901, PLR0912
    source: ScenarioSource,
    profile: str | None = None,
    overrides: dict[str, str] | None = None,
    grid: dict[str, list[str]] | None = None,
) -> ResolvedScenario:
    """Resolve a scenario; expand it when it (or ``grid``) sweeps parameters.

    ``grid`` (from ``--param``) replaces the scenario's own ``sweep``.
    """
    overrides = overrides or {}
    base = resolve(source, profile, overrides)
    loadpoints = base.scenario.loadpoints
    if grid:
        raw = grid
    elif base.scenario.sweep:
        raw = {k: [str(v) for v in vs] for k, vs in base.scenario.sweep.items()}
    elif loadpoints is not None and loadpoints.parameter not in overrides:
        raw = {loadpoints.parameter: [str(v) for v in loadpoints.loads()]}
    else:
        raw = {}
    if not raw:
        return base
    specs = base.scenario.parameters
    texts: dict[str, tuple[str, ...]] = {}
    for name, values in raw.items():
        if name not in specs:
            raise UserError(
                f"cannot sweep {name!r}: scenario {base.scenario.name!r} has no such parameter",
                hint=f"its parameters: {', '.join(specs) or 'none'}",
            )
        if name in overrides:
            raise UserError(
                f"{name} is both swept and set with --set/an option",
                hint="give it either as a fixed value or as a list to sweep, not both",
            )
        typed = []
        for value in values:
            try:
                typed.append(value_text(specs[name], coerce_parameter(specs[name], value)))
            except ValueError as exc:
                raise UserError(f"sweep {name}={value}: {exc}") from None
        if len(set(typed)) != len(typed):
            raise UserError(f"sweep {name}: a value is listed twice ({', '.join(values)})")
        texts[name] = tuple(typed)
    points = [dict(zip(texts, combo, strict=True)) for combo in itertools.product(*texts.values())]
    if len(points) > MAX_POINTS:
        raise UserError(
            f"the sweep has {len(points)} points; iorig runs at most {MAX_POINTS} in one run",
            hint="sweep fewer values, or split the grid over several runs",
        )
    resolved_points = [resolve(source, profile, overrides | point) for point in points]
    first = resolved_points[0]
    for point, r in zip(points, resolved_points, strict=True):
        if r.scenario.targets != first.scenario.targets:
            raise UserError(
                f"sweeping {', '.join(point)} changes the size of a target ({point_label(point)})",
                hint="a sweep shares one prefilled target; run separate runs for other sizes",
            )
    phases = first.scenario.phases
    measured = [i for i, p in enumerate(phases) if p.kind is PhaseKind.MEASURE and p.enabled]
    if not measured:
        raise UserError(
            f"scenario {first.scenario.name!r} has no measure phase to sweep",
            hint="a sweep repeats the measured phases once per point",
        )
    # prefill and warm-up run once; the stretch from the first to the last
    # measured phase once per point; what follows (e.g. a checksum) once at the end
    start, stop = measured[0], measured[-1] + 1
    expanded: list[Phase] = list(phases[:start])
    phase_points: dict[str, dict[str, str]] = {}
    for point, r in zip(points, resolved_points, strict=True):
        label = point_label(point)
        for phase in r.scenario.phases[start:stop]:
            name = f"{phase.name}:{label}"
            # model_copy skips validation: the names are unique by construction
            expanded.append(phase.model_copy(update={"name": name}))
            phase_points[name] = dict(point)
    expanded += phases[stop:]
    scenario = first.scenario.model_copy(update={"phases": expanded})
    origins = dict(first.param_origins) | {name: "sweep" for name in texts}
    return replace(
        first,
        scenario=scenario,
        param_origins=origins,
        sweep=texts,
        phase_points=phase_points,
    )


def search_settings(resolved: ResolvedScenario) -> dict | None:
    """What a sweep run stores about its grid (None for an ordinary run); a
    sweep over a scenario's load-point metric is a load-point run."""
    if not resolved.sweep:
        return None
    grid = {k: list(v) for k, v in resolved.sweep.items()}
    lp = resolved.scenario.loadpoints
    if lp is not None and list(grid) == [lp.parameter]:
        return {
            "kind": "loadpoints",
            "grid": grid,
            "parameter": lp.parameter,
            "name": lp.name,
            "tolerance": lp.tolerance / 100,
            "latency_cap_ns": lp.latency_cap_ns,
        }
    return {"kind": "sweep", "grid": grid}
