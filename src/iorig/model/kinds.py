"""The closed vocabularies of iorig's results: phase kinds, statuses, the
headline metric and I/O directions. StrEnums, so they are stored and printed
as the plain words they stand for."""

from __future__ import annotations

from enum import StrEnum


class PhaseKind(StrEnum):
    PRECONDITION = "precondition"
    PREFILL = "prefill"
    WARMUP = "warmup"
    MEASURE = "measure"
    IDLE = "idle"
    VERIFY = "verify"

    @property
    def size_based(self) -> bool:
        """Goes over its working set once instead of running for a duration."""
        return self in (PhaseKind.PRECONDITION, PhaseKind.PREFILL, PhaseKind.VERIFY)

    @property
    def writes_once(self) -> bool:
        """Writes its whole working set (what later reads may rely on)."""
        return self in (PhaseKind.PRECONDITION, PhaseKind.PREFILL)


class RunStatus(StrEnum):
    RUNNING = "running"
    OK = "ok"
    FAILED = "failed"
    ABORTED = "aborted"


class PhaseStatus(StrEnum):
    OK = "ok"
    FAILED = "failed"
    ABORTED = "aborted"


class Metric(StrEnum):
    """A phase's headline: IOPS for random work, bytes/s for sequential."""

    IOPS = "iops"
    BYTES_PER_S = "bytes_per_s"


DDIRS = ("read", "write", "trim")
ALL = "all"  # the direction that combines read, write and trim
