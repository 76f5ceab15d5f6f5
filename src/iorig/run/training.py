"""When each simulated accelerator's batches arrived, from the completions
its reader jobs logged (docs/methodology.md §11).

A training phase's reader jobs log every completion (time, size). Job j
on a host reads for accelerator j // reader_threads as its worker
j mod reader_threads, each pass over its files (fio's loops) an epoch. A
batch is complete when the bytes it needs have been read:
- PyTorch: worker w builds batches w, w + W, … of each epoch from its own
  reads, in order;
- TensorFlow: the accelerator's readers' reads are pooled, in order of
  completion.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from iorig.fio.parse import SampleLog
from iorig.model.training import AcceleratorModel, AcceleratorTrace


def _cumulative(logs: Sequence[SampleLog]) -> tuple[np.ndarray, np.ndarray]:
    """Completion times (ms, ascending) and bytes read up to each, pooled."""
    reads = [s.of_ddir("read") for s in logs]
    t = np.concatenate([r.t_ms for r in reads] or [np.zeros(0)])
    size = np.concatenate([r.bs for r in reads] or [np.zeros(0)])
    order = np.argsort(t, kind="stable")
    return t[order].astype(np.float64), np.cumsum(size[order], dtype=np.float64)


def _ready_at(t_ms: np.ndarray, cum: np.ndarray, needed: np.ndarray) -> np.ndarray:
    """When ``cum`` first reached each of ``needed``; NaN where it never did."""
    at = np.searchsorted(cum, needed, side="left")
    out = np.full(needed.shape, np.nan)
    done = at < cum.size
    out[done] = t_ms[at[done]]
    return out


def accelerator_ready_ms(model: AcceleratorModel, workers: Sequence[SampleLog]) -> np.ndarray:
    """``ready_ms[e, k]`` of one accelerator from its workers' completions."""
    steps = model.steps_per_epoch
    per_worker_epoch = model.files_per_job * model.samples_per_file * model.sample_bytes
    ready = np.full((model.epochs, steps), np.nan)
    if model.loader == "pytorch":
        width = model.reader_threads
        per_worker = steps // width
        for w, log in enumerate(workers):
            t, cum = _cumulative([log])
            for e in range(model.epochs):
                needed = e * per_worker_epoch + model.batch_bytes * np.arange(1, per_worker + 1)
                ready[e, w::width] = _ready_at(t, cum, needed.astype(np.float64))
        return ready
    t, cum = _cumulative(workers)
    epoch_bytes = per_worker_epoch * len(workers)
    for e in range(model.epochs):
        needed = e * epoch_bytes + model.batch_bytes * np.arange(1, steps + 1)
        ready[e] = _ready_at(t, cum, needed.astype(np.float64))
    return ready


def traces(
    model: AcceleratorModel,
    jobs_by_host: Mapping[str, Sequence[SampleLog]],
    shift_ms: Mapping[str, float],
) -> tuple[AcceleratorTrace, ...]:
    """Every accelerator's batches, host by host: a host's reader jobs in
    job order, its times moved by ``shift_ms`` onto the phase's axis."""
    out = []
    width = model.reader_threads
    for host, jobs in jobs_by_host.items():
        for index in range(model.accelerators):
            mine = list(jobs[index * width : (index + 1) * width])
            if len(mine) < width:
                mine += [SampleLog.empty()] * (width - len(mine))  # a job that logged nothing
            ready = accelerator_ready_ms(model, mine) + shift_ms.get(host, 0.0)
            out.append(AcceleratorTrace(host, index, ready))
    return tuple(out)
