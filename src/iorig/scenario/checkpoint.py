"""Checkpointing the way MLPerf Storage runs it (docs/methodology.md §11):
the llama3 checkpoints' published sizes, a scenario's ``checkpoint:``
section, and the phases it stands for.

Every process writes one shard of the checkpoint to a file of its own
(sequential writes, an fsync at the end counted in its time), a new
directory per checkpoint; all checkpoints are written, then all read back
(fio drops each file's cached pages before reading it). The figure is the
checkpoint's size over the slowest process's time.
"""

from __future__ import annotations

import math
from typing import Any

from iorig.model.checkpoint import CheckpointModel, CheckpointOp, CheckpointRecord
from iorig.scenario.schema import TRANSFER_ALIGN, CheckpointSpec, round_up

GIB = 1 << 30
DEFAULT_TRANSFER = 4 << 20
SHARD_WORKLOAD = "shard"
MIN_BYTES_PER_S = 1 << 20  # a checkpoint phase slower than this on every process is hung

# MLPerf Storage v2.0's llama3 checkpoints: the size (its "GB" are GiB, as DLIO's
# checkpoint_size_GB reports them) and the closed division's process count
MODELS: dict[str, tuple[int, int]] = {
    "llama3-8b": (105 * GIB, 8),
    "llama3-70b": (912 * GIB, 64),
    "llama3-405b": (round(5.29 * 1024) * GIB, 512),
    "llama3-1t": (18 * 1024 * GIB, 1024),
}


def transfer_bytes(spec: CheckpointSpec) -> int:
    return spec.transfer or DEFAULT_TRANSFER


def shard_bytes(spec: CheckpointSpec) -> int:
    """One process's shard: MLPerf's checkpoint over its closed process count,
    scaled, in whole transfers (at least 4 KiB)."""
    size, processes = MODELS[spec.model]
    shard = max(TRANSFER_ALIGN, round(size / processes * spec.scale))
    return round_up(shard, min(transfer_bytes(spec), round_up(shard, TRANSFER_ALIGN)))


def processes(spec: CheckpointSpec) -> int:
    return spec.processes or MODELS[spec.model][1]


def checkpoint_model(spec: CheckpointSpec) -> CheckpointModel:
    """The checkpoint of one host (collect makes it every host's)."""
    size, _ = MODELS[spec.model]
    return CheckpointModel(
        model=spec.model,
        processes=processes(spec),
        checkpoint_bytes=shard_bytes(spec) * processes(spec),
        nominal_bytes=size,
        repetitions=spec.repetitions,
        scale=spec.scale,
        direct=spec.direct,
        fsync=spec.fsync,
    )


def phase_name(op: CheckpointOp, repetition: int) -> str:
    return f"{op}-{repetition}"


def planned_record(spec: CheckpointSpec, phase: str) -> CheckpointRecord | None:
    """What a checkpoint scenario's phase stands for (None for another name)."""
    op, _, number = phase.partition("-")
    if op not in ("write", "read") or not number.isdigit():
        return None
    repetition = int(number)
    if not 1 <= repetition <= spec.repetitions:
        return None
    return CheckpointRecord(checkpoint_model(spec), op, repetition, ())  # type: ignore[arg-type]


def expand(body: dict[str, Any]) -> dict[str, Any]:
    """A scenario body whose ``checkpoint:`` section is turned into its target
    and phases. Raises ValueError (pydantic's) for a bad section."""
    spec = CheckpointSpec.model_validate(body["checkpoint"])
    shard = shard_bytes(spec)
    transfer = min(transfer_bytes(spec), shard)
    count = processes(spec)
    limit_s = max(60.0, math.ceil(2 * shard / MIN_BYTES_PER_S))
    out = dict(body)
    out.setdefault(
        "targets",
        {
            spec.target: {
                "fileset": True,
                "size": spec.repetitions * count * shard,
                "description": f"{spec.repetitions} {spec.model} checkpoints",
            }
        },
    )

    def phase(op: CheckpointOp, repetition: int) -> dict[str, Any]:
        return {
            "name": phase_name(op, repetition),
            "kind": "measure",
            "until": "done",
            "duration": limit_s,
            "description": f"checkpoint {repetition}: {count} processes "
            + (
                f"write their {shard}-byte shards" + (", then fsync" if spec.fsync else "")
                if op == "write"
                else f"read their {shard}-byte shards back"
            ),
            "workloads": [
                {
                    "name": SHARD_WORKLOAD,
                    "target": spec.target,
                    "fileset": f"ckpt{repetition}",
                    "files": 1,
                    "file_size": shard,
                    "jobs": count,
                    "rw": op,
                    "bs": transfer,
                    "engine": "psync",
                    "direct": spec.direct,
                    "fsync_at_end": spec.fsync and op == "write",
                }
            ],
        }

    out["checkpoint"] = spec.model_dump(mode="json")
    out["phases"] = [phase("write", r) for r in range(1, spec.repetitions + 1)] + [
        phase("read", r) for r in range(1, spec.repetitions + 1)
    ]
    return out
