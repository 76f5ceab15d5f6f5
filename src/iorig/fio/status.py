"""Live rates from fio's ``--status-interval`` snapshots (cumulative counters)."""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from iorig.model import histogram
from iorig.model.kinds import DDIRS


@dataclass(frozen=True)
class DirCounts:
    """One direction's cumulative counters over every job of a snapshot."""

    ios: int
    io_bytes: int
    lat_sum_ns: float
    hist: np.ndarray  # completion latencies in fio's bins (json+ status only)


@dataclass(frozen=True)
class Snapshot:
    t_ms: int
    elapsed_s: float
    ios: int
    io_bytes: int
    lat_sum_ns: float  # sum of completion latencies so far
    runtime_ms: int = 0  # the longest-running job's time doing I/O so far
    dirs: Mapping[str, DirCounts] = field(default_factory=dict)  # the directions with I/O


@dataclass(frozen=True)
class LiveRates:
    elapsed_s: float
    io_bytes: int
    iops: float
    bytes_per_s: float
    lat_mean_ns: float


def snapshot(doc: dict) -> Snapshot:
    jobs = doc.get("client_stats") or doc.get("jobs") or []
    jobs = [j for j in jobs if j.get("jobname") != "All clients"]
    dirs: dict[str, DirCounts] = {}
    for ddir in DDIRS:
        ios = io_bytes = 0
        lat_sum = 0.0
        hists = []
        for job in jobs:
            d = job.get(ddir) or {}
            n = int(d.get("total_ios", 0))
            ios += n
            io_bytes += int(d.get("io_bytes", 0))
            clat = d.get("clat_ns") or {}
            lat_sum += float(clat.get("mean", 0.0)) * n
            if isinstance(bins := clat.get("bins"), dict) and bins:
                # fio's output is data: bins it cannot have written give no
                # live percentiles, never a failed run
                with contextlib.suppress(ValueError, TypeError):
                    hists.append(histogram.from_json_bins(bins))
        if ios or io_bytes:
            dirs[ddir] = DirCounts(ios, io_bytes, lat_sum, histogram.merge(hists))
    elapsed = max((float(j.get("elapsed", 0)) for j in jobs), default=0.0)
    runtime_ms = max((int(j.get("job_runtime", 0) or 0) for j in jobs), default=0)
    return Snapshot(
        int(doc.get("timestamp_ms", 0)),
        elapsed,
        sum(d.ios for d in dirs.values()),
        sum(d.io_bytes for d in dirs.values()),
        sum(d.lat_sum_ns for d in dirs.values()),
        runtime_ms,
        dirs,
    )


def io_started_at(snap: Snapshot) -> float | None:
    """Unix seconds when the jobs began I/O (the status's time less the
    longest job's runtime): second 0 of the phase's per-second logs. None
    before any job has run or without the status's clock."""
    if snap.runtime_ms <= 0 or snap.t_ms <= 0:
        return None
    return (snap.t_ms - snap.runtime_ms) / 1000


def rates(previous: Snapshot | None, current: Snapshot) -> LiveRates:
    """Rates over the last interval (or since the start for the first snapshot)."""
    if previous is None or current.t_ms <= previous.t_ms:
        seconds = max(current.elapsed_s, 1e-3)
        d_ios, d_bytes, d_lat = current.ios, current.io_bytes, current.lat_sum_ns
    else:
        seconds = (current.t_ms - previous.t_ms) / 1000
        d_ios = current.ios - previous.ios
        d_bytes = current.io_bytes - previous.io_bytes
        d_lat = current.lat_sum_ns - previous.lat_sum_ns
    return LiveRates(
        elapsed_s=current.elapsed_s,
        io_bytes=current.io_bytes,
        iops=d_ios / seconds,
        bytes_per_s=d_bytes / seconds,
        lat_mean_ns=d_lat / d_ios if d_ios > 0 else float("nan"),
    )
