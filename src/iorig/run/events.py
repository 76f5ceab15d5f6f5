"""What a run reports while it goes (for a progress view) and how it ended."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from iorig.fio.status import LiveRates
from iorig.model import EventRecord, PhaseResult, RunStatus
from iorig.model.live import LiveSecond
from iorig.run.plan import Plan, PlannedPhase


@dataclass(frozen=True)
class RunStarted:
    run_id: str
    plan: Plan
    label: str | None = None  # the run's --label
    # the phases in the order they will run, where the plan says them (not
    # a search's, which it decides as it goes)
    schedule: tuple[tuple[PlannedPhase, int], ...] | None = None
    search_kind: str | None = None  # the search the run is ("knee", "accelerators" …)


@dataclass(frozen=True)
class PhaseStarted:
    phase: PlannedPhase
    repeat: int
    index: int
    total: int | None  # None while a search decides its phases as it goes


@dataclass(frozen=True)
class PhaseProgress:
    phase: PlannedPhase
    repeat: int
    elapsed_s: float
    fraction: float | None  # 0..1 when the phase's length is known
    rates: LiveRates | None
    live: tuple[LiveSecond, ...] = ()  # the seconds read since the last progress
    rule: str | None = None  # the stop rule's state, in words, where it runs live
    events: tuple[EventRecord, ...] = ()  # the phase's events done so far


@dataclass(frozen=True)
class PhaseFinished:
    phase: PlannedPhase
    result: PhaseResult


Event = RunStarted | PhaseStarted | PhaseProgress | PhaseFinished


@dataclass(frozen=True)
class RunOutcome:
    run_id: str
    status: RunStatus
    error: str | None
    phases: tuple[PhaseResult, ...]
    recovery: Path | None = None  # the database stayed unwritable: the run is in this file
