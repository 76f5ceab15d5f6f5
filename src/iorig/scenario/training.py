"""AI training the way MLPerf Storage runs it (docs/methodology.md §11): the
workloads' published parameters, a scenario's ``training:`` section, and
the phases it stands for.

A ``training:`` section names a workload and an accelerator; the phases
are made from it before the scenario is validated (``expand``): a
``datagen`` phase writes the data set as files of the workload's samples,
one set of files per reader job, and a ``train`` phase reads them as the
data loaders would, each reader job paced at its share of its
accelerator's demand (batch × sample ÷ compute time), every completion
logged, one pass over its files per epoch.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from typing import Any

from iorig.model.training import AcceleratorModel, Loader
from iorig.scenario.schema import TRANSFER_ALIGN, TrainingSpec, round_up

DATAGEN_PHASE = "datagen"
TRAIN_PHASE = "train"
LOADER_WORKLOAD = "loader"
MLPERF_STEPS = 500  # MLPerf's data set holds at least 500 steps of every accelerator
MLPERF_MEMORY_TIMES = 5  # … and at least 5 × the client's memory
LIMIT_TIMES = 20  # a training phase is stopped at 20 × its time at full utilisation


@dataclass(frozen=True)
class Workload:
    """One of MLPerf Storage's training workloads (its workload configurations, v2.0)."""

    sample_bytes: int
    sample_stdev_bytes: int
    samples_per_file: int
    batch: int
    reader_threads: int
    compute_s: dict[str, float]  # by accelerator
    au_floor: float
    loader: Loader
    transfer_bytes: int  # iorig's read size (DLIO: transfer_size for TFRecord)
    file_format: str


WORKLOADS: dict[str, Workload] = {
    "unet3d": Workload(
        146_600_628, 68_341_808, 1, 7, 4, {"h100": 0.323, "a100": 0.636}, 0.90,
        "pytorch", 4 << 20, "npz",
    ),
    "resnet50": Workload(
        114_660, 0, 1_251, 400, 8, {"h100": 0.224, "a100": 0.435}, 0.90,
        "tensorflow", 256 << 10, "tfrecord",
    ),
    "cosmoflow": Workload(
        2_828_486, 71_311, 1, 1, 4, {"h100": 0.00350, "a100": 0.00551}, 0.70,
        "tensorflow", 256 << 10, "tfrecord",
    ),
}  # fmt: skip


def profile(spec: TrainingSpec) -> Workload:
    return WORKLOADS[spec.workload]


def reader_threads(spec: TrainingSpec) -> int:
    return spec.reader_threads or profile(spec).reader_threads


def file_bytes(spec: TrainingSpec) -> tuple[int, int]:
    """Each file's size as emulated and the read size: a file is whole reads
    of at most ``transfer`` bytes, so it is rounded up to them."""
    p = profile(spec)
    sample = max(1, round(p.sample_bytes * spec.scale))
    content = sample * p.samples_per_file
    transfer = min(spec.transfer or p.transfer_bytes, round_up(content, TRANSFER_ALIGN))
    return round_up(content, transfer), transfer


def accelerator_model(spec: TrainingSpec) -> AcceleratorModel:
    """The accelerator model of a run. ``spec.dataset`` must be set
    (``expand`` sets it from MLPerf's rule)."""
    p = profile(spec)
    size, _ = file_bytes(spec)
    return AcceleratorModel(
        workload=spec.workload,
        accelerator=spec.accelerator,
        accelerators=spec.accelerators,
        epochs=spec.epochs,
        batch=p.batch,
        sample_bytes=size / p.samples_per_file,
        nominal_sample_bytes=p.sample_bytes,
        samples_per_file=p.samples_per_file,
        files_per_job=files_per_job(spec),
        reader_threads=reader_threads(spec),
        compute_s=p.compute_s[spec.accelerator],
        au_floor=(spec.au_floor / 100) if spec.au_floor is not None else p.au_floor,
        loader=p.loader,
        scale=spec.scale,
        direct=spec.direct,
        phase=TRAIN_PHASE,
        workload_label=LOADER_WORKLOAD,
    )


def files_per_job(spec: TrainingSpec) -> int:
    """Files each reader job reads per epoch: the data set split over the
    host's readers, at least two steps per accelerator, and for a PyTorch
    loader whole batches per worker."""
    p = profile(spec)
    size, _ = file_bytes(spec)
    threads = reader_threads(spec)
    files = max(1, math.ceil(spec.dataset / (spec.accelerators * threads * size)))
    per_batch = math.ceil(p.batch / p.samples_per_file)
    if p.loader == "pytorch":
        if p.batch % p.samples_per_file == 0:
            files = round_up(files, per_batch)
        least = per_batch * (1 if threads > 1 else 2)
    else:
        least = math.ceil(2 * p.batch / (threads * p.samples_per_file))
    return max(files, least)


def memory_bytes() -> int:
    """This machine's memory, for MLPerf's data-set rule."""
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def mlperf_dataset(spec: TrainingSpec, memory: int) -> int:
    """MLPerf's data set per host: at least 500 steps of every accelerator
    and 5 × the host's memory (so it is not read from the page cache), scaled."""
    size, _ = file_bytes(spec)
    sample = size / profile(spec).samples_per_file
    steps = MLPERF_STEPS * profile(spec).batch * spec.accelerators * sample
    return math.ceil(max(steps, MLPERF_MEMORY_TIMES * memory * spec.scale))


def expand(body: dict[str, Any], memory: int | None = None) -> dict[str, Any]:
    """A scenario body whose ``training:`` section is turned into its
    targets and phases. Raises ValueError (pydantic's) for a bad section."""
    spec = TrainingSpec.model_validate(body["training"])
    if not spec.dataset:
        spec = spec.model_copy(update={"dataset": mlperf_dataset(spec, memory or memory_bytes())})
    model = accelerator_model(spec)
    size, transfer = file_bytes(spec)
    threads = reader_threads(spec)
    jobs = spec.accelerators * threads
    per_job_bytes_per_s = math.ceil(model.demand_bytes_per_s / threads)
    full_speed_s = model.epochs * model.steps_per_epoch * model.compute_s
    files = {
        "target": spec.target,
        "fileset": "samples",
        "jobs": jobs,
        "files": model.files_per_job,
        "file_size": size,
        "bs": transfer,
        "direct": spec.direct,
    }
    out = dict(body)
    out["training"] = spec.model_dump(mode="json")
    out.setdefault(
        "targets",
        {
            spec.target: {
                "fileset": True,
                "size": jobs * model.files_per_job * size,
                "description": f"the {spec.workload} data set",
            }
        },
    )
    out["phases"] = [
        {
            "name": DATAGEN_PHASE,
            "kind": "prefill",
            "description": f"write the {spec.workload} data set: {model.files_per_job} files "
            f"of {size} bytes per reader",
            # written back before training: fio drops a file's cached pages as it
            # opens it (every epoch), which it cannot do while they are dirty
            "workloads": [
                files
                | {"name": "samples", "rw": "write", "iodepth": 4, "fsync_at_end": not spec.direct}
            ],
        },
        {
            "name": TRAIN_PHASE,
            "kind": "measure",
            "until": "done",
            "duration": max(60.0, LIMIT_TIMES * full_speed_s),
            "description": f"{model.epochs} epochs, {spec.accelerators} × {spec.accelerator} "
            f"per host, {threads} readers each at "
            f"{per_job_bytes_per_s} bytes/s",
            "workloads": [
                files
                | {
                    "name": LOADER_WORKLOAD,
                    "rw": "read",
                    "engine": "psync",
                    "rate": per_job_bytes_per_s,
                    "loops": model.epochs,
                    "whole_files": True,
                    "completions": True,
                }
            ],
        },
    ]
    return out
