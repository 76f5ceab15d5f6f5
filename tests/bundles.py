"""Bundles of many runs for import tests and bench/bundle_import.py: each
run the size of a real one (one measured phase with per-second histograms,
a job file and fio's JSON output), so that 10,000 of them make the 258 MB
bundle of issue 27, built in batches without holding them all."""

from __future__ import annotations

import json
import random
from dataclasses import replace
from pathlib import Path

import numpy as np
from tests import builders

from iorig.model import histogram
from iorig.model.secondhists import SecondHists
from iorig.store import Store

SECONDS = 20  # per-second rows of the measured phase
BATCH = 100
JOBS = 8
PCTS = (1, 5, 10, 20, 30, 40, 50, 60, 70, 80, 90, 95, 99, 99.5, 99.9, 99.95, 99.99)


def _output(rng: random.Random, seconds: int) -> str:
    """fio's JSON output of JOBS jobs, with a status snapshot per second."""
    snapshots = [
        {
            "time": 1700000000 + s,
            "jobs": [
                {
                    "read": {
                        "io_bytes": rng.randrange(1 << 30),
                        "iops": rng.uniform(1e4, 2e4),
                        "lat_ns": {
                            "mean": rng.uniform(5e4, 9e4),
                            "percentile": {str(p): rng.randrange(10**6) for p in PCTS},
                        },
                    }
                }
                for _ in range(JOBS)
            ],
        }
        for s in range(seconds)
    ]
    return json.dumps({"fio version": "fio-3.33", "snapshots": snapshots})


def stored_run(index: int, seconds: int = SECONDS, seed: int = 0):
    rng = random.Random(seed * 1_000_003 + index)
    level = np.array([rng.uniform(9000, 11000) for _ in range(seconds)])
    hist = np.zeros((seconds, histogram.NR_BINS), np.uint64)
    for row in hist:  # latencies spread over a few dozen bins, as fio's are
        bins = [rng.randrange(500, 900) for _ in range(40)]
        row[bins] = [rng.randrange(1, 5000) for _ in bins]
    phase = builders.phase("randread", level)
    agg = phase.scopes[0]
    sparse = SecondHists.from_dense(hist)
    series = {d: replace(s, hist=sparse) for d, s in agg.series.items()}
    phase = replace(
        phase,
        scopes=(replace(agg, series=series),),
        job_text="[global]\nioengine=libaio\ndirect=1\n[randread]\nrw=randread\nbs=4k\n",
        fio_output=_output(rng, seconds),
    )
    return builders.stored(f"{index:012x}", None, [phase], started_at=float(index))


def many_runs(path: Path, count: int, *, seconds: int = SECONDS, seed: int = 0) -> Path:
    """A results file at ``path`` holding ``count`` runs (ids 000000000001…)."""
    with Store(path) as store:
        for first in range(1, count + 1, BATCH):
            last = min(first + BATCH, count + 1)
            store.add_runs([stored_run(i, seconds, seed) for i in range(first, last)])
    return path
