"""Events as a scenario (or ``run --event``) asks for them: when, in which
phase, and what to do. Pure parsing and checks that need nothing but the
text; the checks against hosts, targets and grants are ``run.actions``'."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Annotated

from pydantic import BaseModel, BeforeValidator, ConfigDict, ValidationError, field_validator

from iorig.model import EventAction
from iorig.units import format_bytes, parse_duration, parse_percent, parse_rate

Duration = Annotated[float, BeforeValidator(parse_duration)]
_NAME = r"[A-Za-z0-9][A-Za-z0-9_.-]{0,62}"
_HOST = r"[A-Za-z0-9_.:@/\[\]-]{1,255}"  # a number, or a host as --hosts lists it
GRAMMAR = (
    "stop-host HOST, start-host HOST (HOST: a host of --hosts, or its number 1, 2, …), "
    "throttle TARGET to RATE (RATE: 20MiB/s or 500iops), unthrottle TARGET, mark TEXT, "
    "run NAME (a command granted with --event-command NAME='…')"
)
_PATTERNS = {
    EventAction.STOP_HOST: re.compile(rf"stop-host\s+({_HOST})"),
    EventAction.START_HOST: re.compile(rf"start-host\s+({_HOST})"),
    EventAction.THROTTLE: re.compile(rf"throttle\s+({_NAME})\s+to\s+(\S+)"),
    EventAction.UNTHROTTLE: re.compile(rf"unthrottle\s+({_NAME})"),
    EventAction.MARK: re.compile(r"mark\s+(.{1,200})"),
    EventAction.COMMAND: re.compile(rf"run\s+({_NAME})"),
}
MAX_IOPS = 2**32 - 1  # what the block throttle takes


@dataclass(frozen=True)
class Action:
    """What an event does, parsed."""

    action: EventAction
    subject: str  # host, target role, mark text or command name
    iops: int | None = None  # throttle: one of iops or bytes_per_s
    bytes_per_s: int | None = None

    @property
    def argument(self) -> str:
        if self.action is EventAction.THROTTLE:
            rate = f"{self.iops} IOPS" if self.iops else f"{format_bytes(self.bytes_per_s or 0)}/s"
            return f"{self.subject} to {rate}"
        return self.subject


def _rate(text: str) -> tuple[int | None, int | None]:
    if m := re.fullmatch(r"(\d{1,10})\s*iops", text, re.IGNORECASE):
        iops = int(m.group(1))
        if not 1 <= iops <= MAX_IOPS:
            raise ValueError(f"throttle rate {text!r}: IOPS must be between 1 and {MAX_IOPS}")
        return iops, None
    rate = parse_rate(text)
    if not 4096 <= rate <= 2**62:
        raise ValueError(f"throttle rate {text!r} must be at least 4KiB/s")
    return None, int(rate)


def parse_action(text: str) -> Action:
    """``stop-host 2``, ``throttle data to 20MiB/s`` … as an Action, or a
    ValueError that lists what is accepted."""
    text = " ".join(str(text).split())
    for action, pattern in _PATTERNS.items():
        if m := pattern.fullmatch(text):
            if action is EventAction.THROTTLE:
                iops, bps = _rate(m.group(2))
                return Action(action, m.group(1), iops, bps)
            return Action(action, m.group(1))
    raise ValueError(f"not an event action: {text!r:.80}; use one of: {GRAMMAR}")


class EventSpec(BaseModel):
    """``{at: 20s, do: "stop-host 2"}`` in a phase's ``events:``."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False, defer_build=True)
    at: Duration
    """when, from the phase's start"""
    do: str
    """what happens: `stop-host HOST`, `start-host HOST`, `throttle TARGET to RATE`,
    `unthrottle TARGET`, `mark TEXT` or `run NAME`"""

    @field_validator("do")
    @classmethod
    def _parses(cls, value: str) -> str:
        parse_action(value)
        return " ".join(value.split())

    @property
    def action(self) -> Action:
        return parse_action(self.do)


class ImpactRule(BaseModel):
    """How an event's impact is measured (a scenario's ``impact:``): the
    baseline is the median of ``baseline`` seconds before the event; the
    series has recovered once it stays within ±``tolerance`` of it for
    ``settle`` seconds."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False, defer_build=True)
    baseline: Duration = 10.0
    """seconds before the event whose median is the baseline"""
    tolerance: Annotated[float, BeforeValidator(parse_percent)] = 10.0
    """how close to the baseline counts as recovered"""
    settle: Duration = 10.0
    """how long the series must stay within the tolerance"""

    @field_validator("baseline", "settle", "tolerance")
    @classmethod
    def _positive(cls, value: float) -> float:
        if not value > 0:
            raise ValueError("must be greater than zero")
        return value


def check_phase_events(events: list[EventSpec], duration_s: float | None) -> None:
    """Within a phase: every event inside its duration, a start-host after a
    stop-host of the same host, an unthrottle after a throttle."""
    if duration_s is None:
        raise ValueError("events need a phase that runs for a duration (warmup or measure)")
    open_: dict[tuple[EventAction, str], float] = {}
    ends = {
        EventAction.START_HOST: EventAction.STOP_HOST,
        EventAction.UNTHROTTLE: EventAction.THROTTLE,
    }
    for spec in sorted(events, key=lambda e: e.at):
        if spec.at >= duration_s:
            raise ValueError(
                f"event {spec.do!r} at {spec.at:g}s is not inside the phase's {duration_s:g}s"
            )
        action = spec.action
        if action.action in ends:
            begun = (ends[action.action], action.subject)
            if begun not in open_:
                raise ValueError(
                    f"event {spec.do!r} at {spec.at:g}s has no earlier "
                    f"'{ends[action.action]} {action.subject}' in the phase"
                )
            del open_[begun]
        elif action.action in ends.values():
            key = (action.action, action.subject)
            if key in open_:
                raise ValueError(f"event {spec.do!r} at {spec.at:g}s repeats an unfinished one")
            open_[key] = spec.at


_CLI_EVENT = re.compile(r"(?P<phase>[a-z0-9][a-z0-9_-]{0,62})@(?P<at>[^=\s]+)=(?P<do>.+)")


def parse_cli_event(text: str) -> tuple[str, EventSpec]:
    """``--event PHASE@AT=ACTION`` (``mixed@20s=stop-host 2``) as (phase, spec)."""
    m = _CLI_EVENT.fullmatch(text.strip())
    if not m:
        raise ValueError(
            f"--event {text!r:.80}: expected PHASE@TIME=ACTION, e.g. measure@20s='stop-host 2'"
        )
    try:
        spec = EventSpec(at=m.group("at"), do=m.group("do"))  # type: ignore[arg-type]
    except ValidationError as exc:  # pydantic's own text names no option: say which part
        part = {"at": f"time {m.group('at')!r}", "do": f"action {m.group('do')!r:.80}"}
        problems = "; ".join(
            f"{part.get(str(e['loc'][0]), 'event') if e['loc'] else 'event'}: "
            f"{e['msg'].removeprefix('Value error, ')}"
            for e in exc.errors()
        )
        raise ValueError(f"--event {text!r:.80}: {problems}") from None
    return m.group("phase"), spec
