"""Checkpointing as MLPerf Storage measures it (docs/methodology.md §11):
what a checkpoint phase wrote or read, and how long each process took, as
stored results. Figures are computed in ``iorig.analyze.checkpoint``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

CheckpointOp = Literal["write", "read"]


@dataclass(frozen=True)
class CheckpointModel:
    """A checkpoint of ``checkpoint_bytes`` (all hosts together) written and
    read back by ``processes`` processes per host, each its own shard,
    ``repetitions`` times; writes end with an fsync counted in their time."""

    model: str  # llama3-8b, llama3-70b, llama3-405b, llama3-1t
    processes: int  # per host
    checkpoint_bytes: int  # as emulated, all hosts
    nominal_bytes: int  # MLPerf's checkpoint size
    repetitions: int
    scale: float
    direct: bool
    fsync: bool


@dataclass(frozen=True)
class ProcessTime:
    """One process's share of a checkpoint phase: fio's runtime of its job
    (an fsync at the end included) and the bytes it moved."""

    host: str
    index: int  # on its host, from 0
    io_bytes: int
    duration_s: float


@dataclass(frozen=True)
class CheckpointRecord:
    """One checkpoint write or read (one phase) and its processes."""

    model: CheckpointModel
    op: CheckpointOp
    repetition: int  # from 1
    processes: tuple[ProcessTime, ...]
