"""The closed vocabularies of iorig's results: phase kinds, statuses, the
headline metric, I/O directions, and the words of every verdict. StrEnums,
so they are stored and printed as the plain words they stand for."""

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


class Change(StrEnum):
    """How a figure compares with the baseline's, judged against the noise:
    the one vocabulary of compare, A/B rounds, sweeps and verdict
    comparisons (docs/methodology.md §7)."""

    BETTER = "better"
    WORSE = "worse"
    SAME = "same"  # no difference the test can tell, or one under the practical threshold
    EQUIVALENT = "equivalent"  # paired rounds: the whole interval within ±threshold
    UNDECIDED = "undecided"  # paired rounds: neither, yet (more rounds would tell)
    UNTESTABLE = "untestable"  # too few samples to test

    @property
    def significant(self) -> bool:
        return self in (Change.BETTER, Change.WORSE)


class Outcome(StrEnum):
    """A requirement's verdict, or a run's: the one vocabulary of criteria,
    application workloads, searches and their comparisons."""

    PASS = "PASS"
    FAIL = "FAIL"
    INCOMPLETE = "INCOMPLETE"  # interrupted: proves nothing either way
    INFO = "info"  # reported beside the verdicts, judging nothing
