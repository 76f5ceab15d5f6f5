"""Checkpoint throughput as MLPerf Storage states it (docs/methodology.md §11):
each checkpoint's size over its slowest process's time, the spread across
processes, and the mean over repetitions with its interval."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from iorig.analyze.stats import mean_interval
from iorig.model.checkpoint import CheckpointModel, CheckpointOp, CheckpointRecord

CONFIDENCE = 0.95


@dataclass(frozen=True)
class CheckpointFigures:
    """One checkpoint written or read (one phase)."""

    phase: str
    op: CheckpointOp
    repetition: int
    io_bytes: int  # what every process moved
    slowest_s: float
    median_s: float
    fastest_s: float
    slowest: str  # host/index of the slowest process
    cov: float  # of the processes' times
    complete: bool  # every process moved its whole shard

    @property
    def bytes_per_s(self) -> float:
        """MLPerf's figure: the checkpoint over the slowest process's time."""
        return self.io_bytes / self.slowest_s if self.slowest_s > 0 else 0.0


@dataclass(frozen=True)
class CheckpointSummary:
    """Every repetition of one direction, and their mean with its interval."""

    op: CheckpointOp
    checkpoints: tuple[CheckpointFigures, ...]
    mean_bytes_per_s: float
    interval: tuple[float, float] | None  # 95 %, over repetitions; None with one
    lowest_bytes_per_s: float
    highest_bytes_per_s: float

    @property
    def levels(self) -> list[float]:
        return [c.bytes_per_s for c in self.checkpoints if c.complete]


@dataclass(frozen=True)
class CheckpointAnalysis:
    model: CheckpointModel  # as the run wrote it (all hosts)
    hosts: int
    write: CheckpointSummary | None
    read: CheckpointSummary | None

    @property
    def summaries(self) -> list[CheckpointSummary]:
        return [s for s in (self.write, self.read) if s is not None]


def checkpoint_figures(phase: str, record: CheckpointRecord) -> CheckpointFigures | None:
    times = [p for p in record.processes if p.duration_s > 0]
    if not times:
        return None
    durations = np.array([p.duration_s for p in times])
    slowest = times[int(np.argmax(durations))]
    shard = record.model.checkpoint_bytes / max(1, len(record.processes))
    return CheckpointFigures(
        phase=phase,
        op=record.op,
        repetition=record.repetition,
        io_bytes=sum(p.io_bytes for p in record.processes),
        slowest_s=float(durations.max()),
        median_s=float(np.median(durations)),
        fastest_s=float(durations.min()),
        slowest=f"{slowest.host}/{slowest.index}",
        cov=float(durations.std() / durations.mean()) if durations.mean() > 0 else 0.0,
        complete=len(times) == len(record.processes)
        and all(p.io_bytes >= shard for p in record.processes),
    )


def _positive(interval: tuple[float, float] | None) -> tuple[float, float] | None:
    """A rate's interval: a few repetitions far apart reach below zero, which no rate is."""
    return None if interval is None else (max(0.0, interval[0]), interval[1])


def _summary(op: CheckpointOp, figures: Sequence[CheckpointFigures]) -> CheckpointSummary | None:
    mine = [f for f in figures if f.op == op]
    levels = [f.bytes_per_s for f in mine if f.complete]
    if not levels:
        return None
    return CheckpointSummary(
        op=op,
        checkpoints=tuple(mine),
        mean_bytes_per_s=float(np.mean(levels)),
        interval=_positive(mean_interval(levels, CONFIDENCE)),
        lowest_bytes_per_s=min(levels),
        highest_bytes_per_s=max(levels),
    )


def analyze_checkpoints(
    records: Sequence[tuple[str, CheckpointRecord]],
) -> CheckpointAnalysis | None:
    """A checkpoint run's figures from its phases' records (name, record)."""
    if not records:
        return None
    figures = [f for name, r in records if (f := checkpoint_figures(name, r)) is not None]
    hosts = len({p.host for _, r in records for p in r.processes}) or 1
    return CheckpointAnalysis(
        model=records[0][1].model,
        hosts=hosts,
        write=_summary("write", figures),
        read=_summary("read", figures),
    )
