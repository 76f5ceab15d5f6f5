"""AI training as MLPerf Storage measures it (docs/methodology.md §11): the
accelerator model a training phase emulated, and when each simulated
accelerator's batches arrived, as stored results.

A phase's fio jobs read the data set as each accelerator's data loader
would; what is kept of them is, for every accelerator, the moment each of
its batches was complete (``AcceleratorTrace``). Utilisation, waits and
verdicts are computed from these in ``iorig.analyze.training``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

Loader = Literal["pytorch", "tensorflow"]


@dataclass(frozen=True)
class AcceleratorModel:
    """What each simulated accelerator does and how its data reaches it.

    Every accelerator has ``reader_threads`` fio jobs; per epoch each job
    reads ``files_per_job`` files of ``samples_per_file`` samples of
    ``sample_bytes`` (emulated sizes: rounded up to whole transfers), and
    the accelerator computes ``compute_s`` per batch of ``batch`` samples.
    ``pytorch`` loaders build each batch in one worker (batch k in worker
    k mod reader_threads); ``tensorflow`` loaders pool the readers' samples.
    """

    workload: str  # unet3d, resnet50, cosmoflow
    accelerator: str  # h100, a100
    accelerators: int  # per host
    epochs: int
    batch: int
    sample_bytes: int  # as emulated
    nominal_sample_bytes: int  # MLPerf's
    samples_per_file: int
    files_per_job: int
    reader_threads: int
    compute_s: float
    au_floor: float  # a fraction, 0.9 for 90 %
    loader: Loader
    scale: float
    direct: bool
    phase: str  # the training phase
    workload_label: str  # the fio section of the readers

    @property
    def batch_bytes(self) -> int:
        return self.batch * self.sample_bytes

    @property
    def demand_bytes_per_s(self) -> float:
        """What one accelerator consumes when it never waits: batch × sample ÷ compute."""
        return self.batch_bytes / self.compute_s

    @property
    def samples_per_epoch(self) -> int:
        """Per accelerator."""
        return self.reader_threads * self.files_per_job * self.samples_per_file

    @property
    def dataset_bytes(self) -> int:
        """The data set per host: every accelerator's files, as emulated."""
        return int(self.accelerators * self.samples_per_epoch * self.sample_bytes)

    @property
    def steps_per_epoch(self) -> int:
        """Batches per accelerator and epoch; a last partial batch is dropped
        (DLIO's drop_last). A PyTorch worker builds whole batches only."""
        if self.loader == "pytorch":
            per_worker = self.files_per_job * self.samples_per_file // self.batch
            return per_worker * self.reader_threads
        return self.samples_per_epoch // self.batch


@dataclass(frozen=True)
class AcceleratorTrace:
    """When each batch of one accelerator was complete: ``ready_ms[e, k]``
    is epoch e's batch k, in milliseconds on the phase's axis (the series'
    second 0); NaN for a batch never read (an interrupted phase)."""

    host: str
    index: int  # on its host, from 0
    ready_ms: np.ndarray

    @property
    def label(self) -> str:
        return f"{self.host}/{self.index}"


@dataclass(frozen=True)
class TrainingRecord:
    """A training phase's stored figures: the model and every accelerator's batches."""

    model: AcceleratorModel
    traces: tuple[AcceleratorTrace, ...]
