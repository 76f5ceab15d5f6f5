"""Accelerator utilisation of a training phase, as MLPerf Storage computes
it (docs/methodology.md §11), from when each simulated accelerator's
batches arrived (``iorig.model.training``).

Each accelerator takes its batches in order: step k starts when the step
before has ended and batch k is there, and computes for ``compute_s``; the
first step starts when the first batch is there. After every step the
accelerators wait for each other (DLIO's barrier, standing for the
all-reduce), so the slowest gates each step.

The readers ran on the accelerators' demand line (fio's rate), not ahead of
it as a real loader's prefetch lets it when the storage is fast: a batch
arrives just in time, and latency jitter a prefetch would absorb counts as
a wait. So near the knee the emulated AU is at most the real one; past it,
where the readers fall behind their line and read all the time, as a real
loader's do, it is the same (docs/methodology.md §11).

AU of an epoch = its steps' compute time ÷ its wall time, the first step
of every epoch left out of both (DLIO: the wall time runs from the end of
step 0 to the end of the last step). Figures are kept three ways: each
accelerator alone (no barrier: what its own data path allows), each host's
accelerators with a barrier, and all of them with one (MLPerf's figure).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from iorig.model import Outcome
from iorig.model.training import AcceleratorModel, AcceleratorTrace, TrainingRecord

WAIT_PERCENTILES = (50.0, 90.0, 99.0)


@dataclass(frozen=True)
class Steps:
    """A simulated consumption: per epoch and step, when it started and ended
    and how long the accelerators waited for data before it (ms)."""

    start_ms: np.ndarray  # (epochs, steps)
    end_ms: np.ndarray
    wait_ms: np.ndarray  # NaN for step 0 of each epoch (left out, as DLIO does)


def simulate(model: AcceleratorModel, ready: Sequence[np.ndarray]) -> Steps:
    """Steps of accelerators that wait for each other after every step."""
    epochs, steps = model.epochs, model.steps_per_epoch
    # a batch one accelerator never got (NaN) holds every one from that step on
    flat = np.max(np.stack(ready), axis=0).reshape(-1)
    compute_ms = model.compute_s * 1000.0
    start = np.full(flat.shape, np.nan)
    end = np.full(flat.shape, np.nan)
    wait = np.full(flat.shape, np.nan)
    previous = float(flat[0]) if flat.size else 0.0
    for k in range(flat.size):
        if np.isnan(flat[k]) or np.isnan(previous):
            break
        begin = max(previous, float(flat[k]))
        if k % steps:
            wait[k] = begin - previous
        start[k], end[k] = begin, begin + compute_ms
        previous = end[k]
    shape = (epochs, steps)
    return Steps(start.reshape(shape), end.reshape(shape), wait.reshape(shape))


def epoch_au(model: AcceleratorModel, steps: Steps) -> np.ndarray:
    """AU of each epoch (a fraction), NaN for an epoch not finished."""
    wall = steps.end_ms[:, -1] - steps.end_ms[:, 0]
    compute = (model.steps_per_epoch - 1) * model.compute_s * 1000.0
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(wall > 0, compute / wall, np.nan)


@dataclass(frozen=True)
class EpochFigures:
    epoch: int  # from 1
    au: float | None  # with every accelerator's barrier; None: not finished
    samples_per_s: float | None  # all accelerators
    bytes_per_s: float | None  # what the accelerators consumed
    wait_p_ms: dict[float, float]  # percentiles of each step's wait for data
    wait_max_ms: float | None


@dataclass(frozen=True)
class AcceleratorFigures:
    host: str
    index: int
    au: tuple[float | None, ...]  # per epoch, this accelerator alone (no barrier)
    wait_s: float  # its own time waiting for data, alone, steps after the first


@dataclass(frozen=True)
class HostFigures:
    host: str
    au: tuple[float | None, ...]  # per epoch, its accelerators with a barrier
    samples_per_s: float | None  # mean over finished epochs


@dataclass(frozen=True)
class TrainingAnalysis:
    model: AcceleratorModel
    phase: str  # the stored phase's name ("train", "train:accelerators=4")
    hosts: int
    epochs: tuple[EpochFigures, ...]
    accelerators: tuple[AcceleratorFigures, ...]
    host_figures: tuple[HostFigures, ...]
    au_mean: float | None  # MLPerf's figure: the mean over epochs
    samples_per_s: float | None  # mean over finished epochs
    bytes_per_s: float | None
    outcome: Outcome
    why: str  # the first epoch and accelerator that fell short, or what is missing

    @property
    def accelerators_total(self) -> int:
        return self.model.accelerators * self.hosts

    @property
    def mlperf_outcome(self) -> Outcome | None:
        """MLPerf's own rule: the mean AU over the epochs at or above the floor."""
        if self.au_mean is None:
            return None
        return Outcome.PASS if self.au_mean >= self.model.au_floor else Outcome.FAIL


def _opt(value: float) -> float | None:
    return None if not np.isfinite(value) else float(value)


def _epoch_figures(model: AcceleratorModel, steps: Steps, count: int) -> list[EpochFigures]:
    aus = epoch_au(model, steps)
    out = []
    for e in range(model.epochs):
        wall_s = (steps.end_ms[e, -1] - steps.end_ms[e, 0]) / 1000.0
        finished = bool(np.isfinite(wall_s) and wall_s > 0)
        rate = (model.steps_per_epoch - 1) * model.batch * count / wall_s if finished else None
        waits = steps.wait_ms[e][np.isfinite(steps.wait_ms[e])]
        out.append(
            EpochFigures(
                epoch=e + 1,
                au=_opt(aus[e]),
                samples_per_s=rate,
                bytes_per_s=None if rate is None else rate * model.sample_bytes,
                wait_p_ms={
                    p: float(v)
                    for p, v in zip(
                        WAIT_PERCENTILES,
                        np.percentile(waits, WAIT_PERCENTILES) if waits.size else [],
                        strict=False,
                    )
                },
                wait_max_ms=float(waits.max()) if waits.size else None,
            )
        )
    return out


def analyze_training(record: TrainingRecord, phase: str = "") -> TrainingAnalysis:
    model = record.model
    traces = record.traces
    hosts = list(dict.fromkeys(t.host for t in traces))
    # no accelerator's readers logged anything (fio failed at its start)
    nothing = np.full((model.epochs, model.steps_per_epoch), np.nan)
    overall = simulate(model, [t.ready_ms for t in traces] or [nothing])
    epochs = _epoch_figures(model, overall, len(traces))
    alone = []
    for t in traces:
        own = simulate(model, [t.ready_ms])
        alone.append(
            AcceleratorFigures(
                t.host,
                t.index,
                tuple(_opt(a) for a in epoch_au(model, own)),
                float(np.nansum(own.wait_ms)) / 1000.0,
            )
        )
    host_figures = []
    for h in hosts:
        mine = [t.ready_ms for t in traces if t.host == h]
        figures = _epoch_figures(model, simulate(model, mine), len(mine))
        rates = [f.samples_per_s for f in figures if f.samples_per_s is not None]
        host_figures.append(
            HostFigures(h, tuple(f.au for f in figures), float(np.mean(rates)) if rates else None)
        )
    finished = [f for f in epochs if f.au is not None]
    au_mean = float(np.mean([f.au for f in finished])) if finished else None
    rates = [f.samples_per_s for f in finished if f.samples_per_s is not None]
    samples_per_s = float(np.mean(rates)) if rates else None
    outcome, why = _verdict(model, epochs, alone, traces)
    return TrainingAnalysis(
        model=model,
        phase=phase or model.phase,
        hosts=len(hosts),
        epochs=tuple(epochs),
        accelerators=tuple(alone),
        host_figures=tuple(host_figures),
        au_mean=au_mean,
        samples_per_s=samples_per_s,
        bytes_per_s=None if samples_per_s is None else samples_per_s * model.sample_bytes,
        outcome=outcome,
        why=why,
    )


def _verdict(
    model: AcceleratorModel,
    epochs: Sequence[EpochFigures],
    alone: Sequence[AcceleratorFigures],
    traces: Sequence[AcceleratorTrace],
) -> tuple[Outcome, str]:
    """PASS when every epoch's AU is at or above the floor (stricter than
    MLPerf, which judges the mean over epochs); FAIL names the first epoch
    short of it and the accelerator that got its data latest."""
    floor = model.au_floor
    for f in epochs:
        if f.au is not None and f.au < floor:
            i = f.epoch - 1
            own = [a.au[i] if a.au[i] is not None else -1.0 for a in alone]
            worst = int(np.argmin(own))
            who = traces[worst].label if len(traces) > 1 else "the accelerator"
            alone_au = alone[worst].au[i]
            detail = f" (alone {alone_au:.1%})" if alone_au is not None and len(traces) > 1 else ""
            return Outcome.FAIL, (
                f"epoch {f.epoch}: AU {f.au:.1%} below the floor {floor:.0%}; "
                f"the accelerator with the least data: {who}{detail}"
            )
    unfinished = [f.epoch for f in epochs if f.au is None]
    if unfinished:
        return Outcome.INCOMPLETE, (
            f"epoch{'s' if len(unfinished) > 1 else ''} {', '.join(map(str, unfinished))} "
            "did not finish: no verdict on them"
        )
    return Outcome.PASS, f"every epoch's AU at or above the floor {floor:.0%}"
