"""A results database for the output-layout goldens, built from the test
builders with fixed figures: twenty runs whose names, labels and targets are
long enough to crowd an 80-column terminal (a sweep's list of medians, a
"transactional" scenario, a label with spaces), two of them comparable."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from tests import builders

from iorig.model import Metric, StoredRun
from iorig.store import Store

START = 1_767_225_600.0  # 2026-01-01 00:00 UTC (the goldens run with TZ=UTC)
PHASES = (
    ("random-read", Metric.IOPS, 118_000.0),
    ("random-write", Metric.IOPS, 61_500.0),
    ("sequential-read", Metric.BYTES_PER_S, 2.62e9),
)
SCENARIOS = ("transactional", "peak", "sweep", "adhoc")
TARGET = {
    "role": "data",
    "kind": "directory",
    "given": "/mnt/nvme0n1/iorig-scratch/",
    "path": "/mnt/nvme0n1/iorig-scratch/iorig-data.dat",
    "size_bytes": 16 << 30,
}


def _series(level: float, seed: int, seconds: int = 30) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return level * (1 + 0.01 * rng.standard_normal(seconds))


def _run(index: int) -> StoredRun:
    scenario = SCENARIOS[index % len(SCENARIOS)]
    scale = 1 + index / 100
    if scenario == "sweep":
        points = [(bs, qd) for bs in (4, 64) for qd in (1, 8, 32)]
        phases = [
            builders.phase(
                f"measure:bs={bs}KiB,iodepth={qd}", _series(9e4 * scale / bs, index + qd), seq=n + 1
            )
            for n, (bs, qd) in enumerate(points)
        ]
    else:
        phases = [
            builders.phase(name, _series(level * scale, index * 10 + n), headline, seq=n + 1)
            for n, (name, headline, level) in enumerate(PHASES)
        ]
    started = START + index * 3600
    return builders.stored(
        f"{index:02d}c0ffee{index:04d}"[:12],
        "with passthrough, cache off" if index % 5 == 0 else None,
        phases,
        scenario=scenario,
        title=f"{scenario} benchmark on the lab array",
        targets=[TARGET],
        started_at=started,
        ended_at=started + 96.5088,
    )


def build(path: Path) -> list[str]:
    """The database at ``path``; the run ids, oldest first."""
    runs = [_run(i) for i in range(20)]
    with Store(path) as store:
        store.add_runs(runs)
    return [r.run.id for r in runs]
