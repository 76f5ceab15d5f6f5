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
class LoggedSums:
    """One job's one direction: how many one-window rates fio has sampled so
    far (the values its IOPS and bandwidth logs hold) and their sums, from
    the status's ``iops_samples``/``iops_mean`` and ``bw_samples``/``bw_mean``."""

    key: tuple[int, str]  # the job's place in the status, the direction
    iops_n: int
    iops_sum: float
    bw_n: int
    bw_sum_kib: float  # fio's bandwidth figures are KiB/s


@dataclass(frozen=True)
class Snapshot:
    t_ms: int
    elapsed_s: float
    ios: int
    io_bytes: int
    lat_sum_ns: float  # sum of completion latencies so far
    runtime_ms: int = 0  # the longest-running job's time doing I/O so far
    dirs: Mapping[str, DirCounts] = field(default_factory=dict)  # the directions with I/O
    logged: tuple[LoggedSums, ...] = ()


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
    logged = tuple(_logged(i, job, ddir) for i, job in enumerate(jobs) for ddir in DDIRS)
    runtime_ms = max((int(j.get("job_runtime", 0) or 0) for j in jobs), default=0)
    return Snapshot(
        int(doc.get("timestamp_ms", 0)),
        elapsed,
        sum(d.ios for d in dirs.values()),
        sum(d.io_bytes for d in dirs.values()),
        sum(d.lat_sum_ns for d in dirs.values()),
        runtime_ms,
        dirs,
        tuple(sums for sums in logged if sums is not None),
    )


def _logged(index: int, job: dict, ddir: str) -> LoggedSums | None:
    d = job.get(ddir)
    if not isinstance(d, dict):
        return None
    try:
        iops_n, bw_n = int(d.get("iops_samples", 0)), int(d.get("bw_samples", 0))
        iops_mean, bw_mean = float(d.get("iops_mean", 0.0)), float(d.get("bw_mean", 0.0))
    except (TypeError, ValueError):  # fio's output is data: no samples rather than a failure
        return None
    if iops_n <= 0 and bw_n <= 0:
        return None
    return LoggedSums((index, ddir), iops_n, iops_mean * iops_n, bw_n, bw_mean * bw_n)


class LoggedSeconds:
    """The per-second rates fio's own logs will hold, as the status reveals
    them: each status's sample counts and means give the sum of the samples
    added since the last one, which is the new second's rate itself when
    one was added (the same figure the IOPS and bandwidth logs get, where
    the job logs one-second averages). A phase's second k is the sum over
    its jobs and directions of their k-th samples, given once every one
    that samples has one. fio samples nothing in a ramp; counts that go
    back all the same set ``lost`` and give nothing more. Status counts
    differenced instead move by a whole burst of completions either way
    whenever one falls on a window's edge: 1,801 to 2,199 against 2,000 to
    2,002 logged each second, at a 2,000 IOPS cap on a device in memory."""

    def __init__(self) -> None:
        self._last: dict[tuple[int, str], LoggedSums] = {}
        self._values: dict[tuple[int, str], list[tuple[float, float]]] = {}
        self.given = 0  # seconds handed out so far
        self.lost = False  # the samples went back: what follows cannot be placed

    def feed(self, snap: Snapshot) -> list[tuple[float, float]]:
        """The seconds (IOPS, bytes/s) this status completes, oldest first."""
        if self.lost:
            return []
        for sums in snap.logged:
            last = self._last.get(sums.key)
            if last is not None and (sums.iops_n < last.iops_n or sums.bw_n < last.bw_n):
                self.lost = True
                return []
            if last is None:
                last = LoggedSums(sums.key, 0, 0.0, 0, 0.0)
            added = min(sums.iops_n - last.iops_n, sums.bw_n - last.bw_n)
            if added <= 0:
                continue
            # more than one sample since the last status: their mean for each
            iops = (sums.iops_sum - last.iops_sum) / (sums.iops_n - last.iops_n)
            kib = (sums.bw_sum_kib - last.bw_sum_kib) / (sums.bw_n - last.bw_n)
            self._values.setdefault(sums.key, []).extend([(iops, kib * 1024)] * added)
            self._last[sums.key] = LoggedSums(
                sums.key,
                last.iops_n + added,
                last.iops_sum + iops * added,
                last.bw_n + added,
                last.bw_sum_kib + kib * added,
            )
        complete = min((len(v) for v in self._values.values()), default=0)
        seconds = [
            (
                sum(max(v[k][0], 0.0) for v in self._values.values()),
                sum(max(v[k][1], 0.0) for v in self._values.values()),
            )
            for k in range(self.given, complete)
        ]
        self.given = max(self.given, complete)
        return seconds


def io_started_at(snap: Snapshot) -> float | None:
    """Unix seconds when the jobs began I/O (the status's time less the
    longest job's runtime): second 0 of the phase's per-second logs. None
    before any job has run or without the status's clock."""
    if snap.runtime_ms <= 0 or snap.t_ms <= 0:
        return None
    return (snap.t_ms - snap.runtime_ms) / 1000


def jobs_began(known: float | None, previous: Snapshot | None, current: Snapshot) -> float | None:
    """The jobs' start from every status so far (``earliest``), except that
    a job's clock that went back restarted it: fio counts a job's runtime
    from its creation while it lays out its file, and again from its first
    I/O (a 1 GiB layout: runtime 1,001 ms, then 562 ms a second later), so
    the statuses before put the start 1.4 s early."""
    estimate = io_started_at(current)
    if previous is not None and 0 < current.runtime_ms < previous.runtime_ms:
        return estimate
    return earliest(known, estimate)


def earliest(known: float | None, estimate: float | None) -> float | None:
    """The jobs' start from every status so far: each status's clock is
    read after its runtimes, later the busier fio is (a fresh clone's
    first status put second 0 about 0.1 s late), so the earliest estimate
    is the best."""
    if known is None or estimate is None:
        return estimate if known is None else known
    return min(known, estimate)


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
