"""Events: things done to the system under test at a set time of a phase
(a host stopped, a device throttled, a user's command run, a mark), as
they happened. Stored with their phase; their impact is computed from the
phase's per-second series when read (``iorig.analyze.impact``)."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from enum import StrEnum
from typing import Any


class EventAction(StrEnum):
    MARK = "mark"  # a note on the timeline, nothing done
    STOP_HOST = "stop-host"  # freeze a host's fio server (SIGSTOP through its iorig agent)
    START_HOST = "start-host"  # resume it (SIGCONT)
    THROTTLE = "throttle"  # cap a local block device (the kernel's block throttle)
    UNTHROTTLE = "unthrottle"  # remove that cap
    COMMAND = "command"  # a user's command, granted on the command line

    @property
    def disturbs(self) -> bool:
        """Whether its impact is measured: every event but the end of a
        disturbance (start-host, unthrottle), whose effect is the recovery
        of the event that began it."""
        return self not in (EventAction.START_HOST, EventAction.UNTHROTTLE)


class EventStatus(StrEnum):
    DONE = "done"  # performed (a command that exited 0)
    FAILED = "failed"  # tried and failed (a command's non-zero exit, an agent that refused)
    SKIPPED = "skipped"  # its time never came (the phase ended or was interrupted first)


@dataclass(frozen=True)
class EventRecord:
    """One event of a phase as it happened."""

    at_s: float  # when the scenario asked for it, seconds from the phase's start
    action: EventAction
    argument: str  # host, "TARGET to RATE", target, label or command name
    status: EventStatus
    started_at: float  # unix seconds: when iorig began it (0.0 when skipped)
    ended_at: float  # when it was done (a command's exit)
    detail: str = ""  # what happened: the agent's answer, the error, a command's output
    exit_code: int | None = None  # commands only
    command: str = ""  # commands only: the granted command line that ran

    @property
    def elapsed_s(self) -> float:
        return max(0.0, self.ended_at - self.started_at)

    @property
    def label(self) -> str:
        """How the event is named on a timeline and in tables."""
        return f"{self.action} {self.argument}".strip()

    def as_dict(self) -> dict[str, Any]:
        return asdict(self) | {"action": str(self.action), "status": str(self.status)}
