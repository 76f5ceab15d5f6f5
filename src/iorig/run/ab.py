"""Interleaved A/B (``iorig ab``): two runs, one per side, whose
measured phases alternate in rounds.

Each side's setup (everything before its first measured phase: prefill,
warm-up) runs once, A's then B's. Then, round by round, the stretch from the
first to the last measured phase runs once per side, in an order drawn from
``random.Random(seed)`` — randomized multiple interleaved trials (Abedi &
Brecht, ICPE 2017) — each phase a fresh fio process started through the
side's ``RunSession``, stored with ``repeat`` = the round. What comes after
the last measured phase (a verify) runs once per side at the end.

Both runs carry an ``AbLink`` (the A/B's id, their side, the other run and
the order of every round so far), rewritten after each round. A signal stops
the phase running and starts no other: the completed rounds stay, and both
runs end ``aborted`` (never ``running``).
"""

from __future__ import annotations

import contextlib
import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from iorig.analyze.ab import keep_going, level_pairs
from iorig.analyze.abrounds import MAX_ROUNDS
from iorig.errors import UserError
from iorig.model import AbLink, Finding, PhaseKind
from iorig.run.backend import PhaseBackend
from iorig.run.events import Event, RunOutcome
from iorig.run.plan import Plan, PlannedPhase
from iorig.run.session import RunSession, signals_call
from iorig.store import Store, Unwritable, new_run_id

SideKey = Literal["a", "b"]


@dataclass(frozen=True)
class Side:
    key: SideKey
    plan: Plan
    backend: PhaseBackend
    label: str | None = None


@dataclass(frozen=True)
class AbSettings:
    rounds: int | None = None  # None: auto (until decided, or max_rounds)
    max_rounds: int = MAX_ROUNDS
    seed: int = 0
    threshold: float = 0.02
    confidence: float = 0.95


@dataclass(frozen=True)
class AbOutcome:
    id: str
    seed: int
    a: RunOutcome
    b: RunOutcome
    first: tuple[SideKey, ...]  # per round started, the side that ran first
    rounds: int  # rounds both sides completed

    @property
    def outcomes(self) -> tuple[RunOutcome, RunOutcome]:
        return self.a, self.b


def stretches(plan: Plan) -> tuple[list[PlannedPhase], list[PlannedPhase], list[PlannedPhase]]:
    """(setup, round, tail): before the first measured phase, from the first
    to the last measured phase, after the last one."""
    measured = [i for i, p in enumerate(plan.phases) if p.kind is PhaseKind.MEASURE]
    if not measured:
        return list(plan.phases), [], []
    first, last = measured[0], measured[-1]
    return (
        list(plan.phases[:first]),
        list(plan.phases[first : last + 1]),
        list(plan.phases[last + 1 :]),
    )


def check_sides(a: Plan, b: Plan) -> None:
    """Refuse what cannot be interleaved, before anything runs."""
    for key, plan in (("A", a), ("B", b)):
        _, block, _ = stretches(plan)
        if not block:
            raise UserError(
                f"side {key}: scenario {plan.resolved.scenario.name!r} has no measured phase "
                "to compare",
                hint="an A/B interleaves measure phases; choose a scenario with one",
            )
        if any(p.point for p in plan.phases) or plan.resolved.sweep:
            raise UserError(
                f"side {key}: a sweep or search cannot be interleaved (each round runs one "
                "configuration per side)",
                hint="fix the swept parameter per side, e.g. --a iodepth=1 --b iodepth=32",
            )
    names_a = [p.name for p in stretches(a)[1] if p.kind is PhaseKind.MEASURE]
    names_b = [p.name for p in stretches(b)[1] if p.kind is PhaseKind.MEASURE]
    if not set(names_a) & set(names_b):
        raise UserError(
            f"A and B share no measured phase (A: {', '.join(names_a)}; B: "
            f"{', '.join(names_b)}): there is nothing to pair",
            hint="run the same scenario on both sides, with different targets or parameters",
        )


def run_ab(
    sides: tuple[Side, Side],
    store: Store,
    settings: AbSettings,
    *,
    command: str,
    on_event: Callable[[SideKey, Event], None] = lambda side, e: None,
    keep_files: bool = False,
) -> AbOutcome:
    """Run both sides' setup once, then rounds in a seeded random order."""
    ab_id = new_run_id()
    rng = random.Random(settings.seed)
    first: list[SideKey] = []
    with contextlib.ExitStack() as stack:
        sessions = {
            side.key: stack.enter_context(
                RunSession(
                    side.plan,
                    store,
                    side.backend,
                    command=command,
                    keep_files=keep_files,
                    label=side.label,
                    on_event=lambda e, k=side.key: on_event(k, e),
                )
            )
            for side in sides
        }
        sa, sb = sessions["a"], sessions["b"]

        def interrupt() -> None:  # each session's own handler only stops its side
            sa.interrupt()
            sb.interrupt()

        stack.enter_context(signals_call(interrupt))
        note = (
            f"interleaved A/B {ab_id}: run {sa.run_id} is A, run {sb.run_id} is B; the "
            f"order of each round drawn by random.Random({settings.seed})"
        )
        _link(store, sessions, ab_id, first, note)
        for key in ("a", "b"):
            for phase in stretches(sessions[key].plan)[0]:
                if not _stopped(sessions):
                    sessions[key].run_phase(phase, 0)
        done = 0
        while not _stopped(sessions) and _another(settings, sa, sb, done):
            order: tuple[SideKey, SideKey] = ("a", "b") if rng.random() < 0.5 else ("b", "a")
            first.append(order[0])
            for key in order:
                for phase in stretches(sessions[key].plan)[1]:
                    if not _stopped(sessions):
                        sessions[key].run_phase(phase, done)
            _link(store, sessions, ab_id, first)
            if not _stopped(sessions):
                done += 1
        for key in ("a", "b"):
            for phase in stretches(sessions[key].plan)[2]:
                if not _stopped(sessions):
                    sessions[key].run_phase(phase, 0)
        _fail_together(sa, sb)
    return AbOutcome(ab_id, settings.seed, sa.outcome, sb.outcome, tuple(first), done)


def _stopped(sessions: dict[str, RunSession]) -> bool:
    return any(s.stopped for s in sessions.values())


def _another(settings: AbSettings, a: RunSession, b: RunSession, done: int) -> bool:
    if settings.rounds is not None:
        return done < settings.rounds
    pairs = {name: (x, y) for name, (_, x, y) in level_pairs(a.results, b.results).items()}
    return keep_going(
        pairs,
        rounds=done,
        max_rounds=settings.max_rounds,
        confidence=settings.confidence,
        threshold=settings.threshold,
    )


def _link(
    store: Store,
    sessions: dict[str, RunSession],
    ab_id: str,
    first: list[SideKey],
    note: str | None = None,
) -> None:
    """Write both runs' links (and, once, the note that records the seed); a
    database that takes nothing more keeps the runs unlinked (their recovery
    files hold the results)."""
    a, b = sessions["a"].run_id, sessions["b"].run_id
    for run_id, side, peer in ((a, "a", b), (b, "b", a)):
        with contextlib.suppress(Unwritable):
            store.set_ab(run_id, AbLink(ab_id, side, peer, tuple(first)))  # type: ignore[arg-type]
            if note is not None:
                store.add_warnings(run_id, [Finding("ab", note, "", None, "info")])


def _fail_together(a: RunSession, b: RunSession) -> None:
    """A side that failed ends the A/B: the other side fails with it (its
    rounds have nothing to be paired with)."""
    for this, other, name in ((a, b, "A"), (b, a, "B")):
        if this.error and not this.interrupted:
            other.fail(f"the A/B stopped: side {name} failed ({this.error})")
