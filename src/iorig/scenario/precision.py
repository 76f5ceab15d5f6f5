"""``--precision``: a scenario's measure phases run until their median is
known to ±N % (``until: precise``, with their duration as the maximum), and
its timed warm-ups until steady (SNIA), so that no phase runs longer than its
answer needs. Phases the rule cannot serve keep their schedule, each named in
a note."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from pydantic import ValidationError

from iorig.errors import UserError
from iorig.model import PhaseKind
from iorig.scenario.loading import ResolvedScenario
from iorig.scenario.schema import DEFAULT_PRECISE_MIN_S, PRECISE_MIN_S, Phase, SteadyRule
from iorig.units import parse_percent

STEADY = SteadyRule()  # the PTS defaults: rounds of 10 s, a window of 5


def parse_precision(text: str) -> float:
    """'2%' or '2' → 2.0, refused outside (0, 50] with the fix."""
    try:
        value = parse_percent(text)
    except ValueError as exc:
        raise UserError(f"--precision {text!r}: {exc}", hint="e.g. --precision 2%") from None
    if not 0 < value <= 50:
        raise UserError(
            f"--precision {text!r}: the half-width must be above 0 % and at most 50 %",
            hint="e.g. --precision 2% (the median known to ±2 %)",
        )
    return value


def _phase(phase: Phase, pct: float, notes: list[str]) -> dict[str, Any]:
    data = phase.model_dump()
    if phase.until == "done":
        notes.append(
            f"--precision: {phase.name!r} runs until its workloads are through (a training "
            "phase: its epochs); it is judged by what it did, not by a median"
        )
        return data
    if not phase.enabled or phase.until not in ("duration", "precise"):
        return data
    if phase.kind is PhaseKind.MEASURE:
        if phase.events:
            notes.append(
                f"--precision: {phase.name!r} has events at set times; it keeps its duration"
            )
            return data
        duration = phase.duration or 0.0
        if duration < PRECISE_MIN_S:
            notes.append(
                f"--precision: {phase.name!r} lasts {duration:g} s, too short for an interval "
                f"(at least {PRECISE_MIN_S} s); it keeps its duration"
            )
            return data
        least = phase.min if phase.min is not None else min(DEFAULT_PRECISE_MIN_S, duration)
        return data | {"until": "precise", "precision": pct, "min": least}
    if phase.kind is PhaseKind.WARMUP and phase.until == "duration" and not phase.events:
        needed = STEADY.round * STEADY.window
        if (phase.duration or 0.0) < needed:
            notes.append(
                f"--precision: warm-up {phase.name!r} lasts {phase.duration or 0:g} s, shorter "
                f"than a steady-state window ({needed:g} s); it keeps its duration"
            )
            return data
        return data | {"until": "steady"}
    return data


def with_precision(resolved: ResolvedScenario, pct: float) -> ResolvedScenario:
    """``resolved`` with every measure phase until precise at ±``pct`` % (its
    duration the maximum) and every timed warm-up until steady (its duration
    the maximum)."""
    notes: list[str] = []
    scenario = resolved.scenario
    phases = []
    for phase in scenario.phases:
        try:  # each phase validated again, as --event does (the scenario's rules hold still)
            phases.append(Phase.model_validate(_phase(phase, pct, notes)))
        except ValidationError as exc:
            problems = "; ".join(e["msg"].removeprefix("Value error, ") for e in exc.errors())
            raise UserError(f"--precision for phase {phase.name!r}: {problems}") from None
    changed = scenario.model_copy(update={"phases": phases})
    if not any(p.until == "precise" for p in changed.phases):
        raise UserError(
            f"--precision: no measure phase of {scenario.name!r} can run until precise",
            hint="; ".join(notes) or "the scenario has no timed measure phase",
        )
    return replace(resolved, scenario=changed, notes=(*resolved.notes, *notes))
