"""Turn parsed fio output and logs into per-workload, per-host and aggregate
results. Pure functions: merging is exact (sums of counts, histogram bins
added, means weighted by their sample counts); nothing is averaged that
should not be.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from iorig.fio import histogram
from iorig.fio.parse import DDIRS, HistLogEntry, JobStats, LogSample
from iorig.results import ALL, ALL_HOSTS, ALL_WORKLOADS, ScopeResult, Series, Totals


@dataclass(frozen=True)
class JobLogs:
    """The per-second logs of one fio job (one thread of a section, one host)."""

    iops: tuple[LogSample, ...] = ()
    bw: tuple[LogSample, ...] = ()
    clat: tuple[LogSample, ...] = ()
    hist: tuple[HistLogEntry, ...] = field(default=(), repr=False)


@dataclass(frozen=True)
class SectionData:
    """Everything fio reported for one job section on one host."""

    workload: str
    host: str
    jobs: tuple[JobStats, ...]
    logs: tuple[JobLogs, ...]


# ---------------------------------------------------------------- totals


def _combine_totals(ddir: str, parts: Sequence[Totals]) -> Totals | None:
    parts = [p for p in parts if p.ios > 0]
    if not parts:
        return None
    ios = sum(p.ios for p in parts)
    mean = sum(p.lat_mean_ns * p.ios for p in parts) / ios
    # Pooled standard deviation: within-part variance plus spread of part means.
    var = sum(p.ios * (p.lat_stddev_ns**2 + (p.lat_mean_ns - mean) ** 2) for p in parts) / ios
    return Totals(
        ddir=ddir,
        ios=ios,
        io_bytes=sum(p.io_bytes for p in parts),
        iops=sum(p.iops for p in parts),
        bytes_per_s=sum(p.bytes_per_s for p in parts),
        lat_mean_ns=mean,
        lat_min_ns=min(p.lat_min_ns for p in parts),
        lat_max_ns=max(p.lat_max_ns for p in parts),
        lat_stddev_ns=math.sqrt(var),
        slat_mean_ns=sum(p.slat_mean_ns * p.ios for p in parts) / ios,
        total_lat_mean_ns=sum(p.total_lat_mean_ns * p.ios for p in parts) / ios,
        hist=histogram.merge(p.hist for p in parts),
    )


def _job_totals(job: JobStats) -> dict[str, Totals]:
    out = {}
    for ddir, d in job.dirs.items():
        out[ddir] = Totals(
            ddir=ddir,
            ios=d.ios,
            io_bytes=d.io_bytes,
            iops=d.iops,
            bytes_per_s=d.bytes_per_s,
            lat_mean_ns=d.clat_mean_ns,
            lat_min_ns=d.clat_min_ns,
            lat_max_ns=d.clat_max_ns,
            lat_stddev_ns=d.clat_stddev_ns,
            slat_mean_ns=d.slat_mean_ns,
            total_lat_mean_ns=d.lat_mean_ns,
            hist=d.hist,
        )
    return out


def merge_totals(per_job: Iterable[Mapping[str, Totals]]) -> dict[str, Totals]:
    """Per-direction totals over jobs, plus the ``all`` direction."""
    per_job = list(per_job)
    out: dict[str, Totals] = {}
    for ddir in DDIRS:
        combined = _combine_totals(ddir, [t[ddir] for t in per_job if ddir in t])
        if combined:
            out[ddir] = combined
    if out:
        combined_all = _combine_totals(ALL, list(out.values()))
        if combined_all:
            out[ALL] = combined_all
    return out


# ---------------------------------------------------------------- series


def _by_second(samples: Iterable[LogSample], ddir: str) -> dict[int, float]:
    """Window end (whole seconds) -> value; the first sample of a second wins,
    which drops fio's extra flush of a partial last window."""
    out: dict[int, float] = {}
    for s in samples:
        if s.ddir == ddir:
            second = round(s.t_ms / 1000)
            if second >= 1 and second not in out:
                out[second] = s.value
    return out


def _complete_seconds(by_second: Mapping[int, float]) -> int:
    n = 0
    while n + 1 in by_second:
        n += 1
    return n


def _empty_series(ddir: str) -> Series:
    return Series(
        ddir,
        np.zeros(0, dtype=np.int64),
        np.zeros(0),
        np.zeros(0),
        np.zeros(0),
        np.zeros((0, histogram.NR_BINS), dtype=np.uint64),
    )


def _ddir_series(ddir: str, logs: Sequence[JobLogs], horizon_s: int | None = None) -> Series | None:
    """Seconds 1..n summed over jobs. Without ``horizon_s`` n is the last second
    every job logged without a gap. With it (the seconds every job ran, for
    rate-limited jobs that log nothing in a second without completions), a
    second a job did not log inside the horizon counts as zero for it."""
    jobs = []
    for log in logs:
        iops = _by_second(log.iops, ddir)
        if iops:
            jobs.append((log, iops))
    if not jobs:
        return None
    if horizon_s is not None:
        # fio often does not flush the last window when a job ends, and a paced
        # job logs a window late or not at all: count up to the last second
        # most jobs logged, never past the time every job ran
        last = sorted(max(iops) for _, iops in jobs)
        n = min(horizon_s, last[(len(last) - 1) // 2])
        jobs = [(log, {s: iops.get(s, 0.0) for s in range(1, n + 1)}) for log, iops in jobs]
    else:
        n = min(_complete_seconds(iops) for _, iops in jobs)
    if n == 0:
        return _empty_series(ddir)
    seconds = np.arange(1, n + 1, dtype=np.int64)
    iops_sum = np.zeros(n)
    bytes_sum = np.zeros(n)
    lat_weighted = np.zeros(n)
    lat_weight = np.zeros(n)
    hist = np.zeros((n, histogram.NR_BINS), dtype=np.uint64)
    for log, iops in jobs:
        bw = _by_second(log.bw, ddir)
        clat = _by_second(log.clat, ddir)
        for i, second in enumerate(seconds.tolist()):
            rate = iops[second]
            iops_sum[i] += rate
            bytes_sum[i] += bw.get(second, 0.0) * 1024  # fio logs KiB/s
            if second in clat and rate > 0:
                lat_weighted[i] += clat[second] * rate
                lat_weight[i] += rate
        seen: set[int] = set()
        for entry in log.hist:
            second = round(entry.t_ms / 1000)
            if entry.ddir == ddir and 1 <= second <= n and second not in seen:
                seen.add(second)
                hist[second - 1] += entry.counts
    with np.errstate(invalid="ignore", divide="ignore"):
        lat = np.where(lat_weight > 0, lat_weighted / lat_weight, np.nan)
    return Series(ddir, seconds, iops_sum, bytes_sum, lat, hist)


def combine_series(ddir: str, parts: Sequence[Series]) -> Series:
    """Sum series second by second over the seconds all parts have."""
    parts = [p for p in parts if p is not None]
    if not parts:
        return _empty_series(ddir)
    n = min(len(p) for p in parts)
    if n == 0:
        return _empty_series(ddir)
    iops = np.sum([p.iops[:n] for p in parts], axis=0)
    weights = np.array([np.where(np.isnan(p.lat_mean_ns[:n]), 0.0, p.iops[:n]) for p in parts])
    lats = np.array([np.nan_to_num(p.lat_mean_ns[:n]) for p in parts])
    total_weight = weights.sum(axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        lat = np.where(total_weight > 0, (weights * lats).sum(axis=0) / total_weight, np.nan)
    return Series(
        ddir,
        parts[0].t_s[:n].copy(),
        iops,
        np.sum([p.bytes_per_s[:n] for p in parts], axis=0),
        lat,
        np.sum([p.hist[:n] for p in parts], axis=0, dtype=np.uint64),
    )


def merge_series(logs: Sequence[JobLogs], horizon_s: int | None = None) -> dict[str, Series]:
    out: dict[str, Series] = {}
    for ddir in DDIRS:
        series = _ddir_series(ddir, logs, horizon_s)
        if series is not None:
            out[ddir] = series
    if out:
        out[ALL] = combine_series(ALL, list(out.values()))
    return out


# ---------------------------------------------------------------- scopes


def _horizon(jobs: Sequence[JobStats]) -> int | None:
    """Whole seconds every job ran, when the jobs are rate-limited or
    flow-controlled (they may log nothing in a second without completions);
    None otherwise, so that free-running jobs keep the strict gap rule."""
    runtimes = [j.job_runtime_ms for j in jobs]
    if not runtimes or min(runtimes) <= 0 or not any(j.paced for j in jobs):
        return None
    return min(runtimes) // 1000


def build_scope(workload: str, host: str, sections: Sequence[SectionData]) -> ScopeResult:
    jobs = [job for s in sections for job in s.jobs]
    logs = [log for s in sections for log in s.logs]
    cpu = [j.usr_cpu_pct + j.sys_cpu_pct for j in jobs]
    return ScopeResult(
        workload=workload,
        host=host,
        jobs=len(jobs),
        totals=merge_totals(_job_totals(j) for j in jobs),
        series=merge_series(logs, _horizon(jobs)),
        usr_cpu_pct=float(np.mean([j.usr_cpu_pct for j in jobs])) if jobs else 0.0,
        sys_cpu_pct=float(np.mean([j.sys_cpu_pct for j in jobs])) if jobs else 0.0,
        busiest_job_cpu_pct=max(cpu, default=0.0),
        errors=sum(1 for j in jobs if j.error),
    )


def shift_series(series: Series, seconds: int) -> Series:
    """The same samples ``seconds`` later on the time axis."""
    return replace(series, t_s=series.t_s + seconds)


def combine_aligned(ddir: str, parts: Sequence[Series]) -> Series:
    """Sum series second by second over the seconds every part covers, by
    their ``t_s`` (parts may start at different seconds, e.g. hosts)."""
    parts = [p for p in parts if len(p)]
    if not parts:
        return _empty_series(ddir)
    first = max(int(p.t_s[0]) for p in parts)
    last = min(int(p.t_s[-1]) for p in parts)
    if last < first:
        return _empty_series(ddir)
    cut = [_window(p, first, last) for p in parts]
    return combine_series(ddir, cut)


def _window(series: Series, first: int, last: int) -> Series:
    keep = (series.t_s >= first) & (series.t_s <= last)
    return Series(
        series.ddir, series.t_s[keep], series.iops[keep], series.bytes_per_s[keep],
        series.lat_mean_ns[keep], series.hist[keep] if len(series.hist) else series.hist,
    )  # fmt: skip


def merge_hosts(hosts: Sequence[ScopeResult], shifts_s: Mapping[str, int]) -> ScopeResult:
    """The aggregate over hosts: rates add up, latency histograms merge, and the
    per-second series are summed on wall-clock seconds (each host's series
    shifted by when it started relative to the first)."""
    totals = merge_totals([{d: t for d, t in h.totals.items() if d != ALL} for h in hosts])
    series = {}
    for ddir in dict.fromkeys(d for h in hosts for d in h.series):
        parts = [shift_series(h.series[ddir], shifts_s.get(h.host, 0)) for h in hosts
                 if ddir in h.series]  # fmt: skip
        series[ddir] = combine_aligned(ddir, parts)
    jobs = sum(h.jobs for h in hosts)
    return ScopeResult(
        workload=ALL_WORKLOADS,
        host=ALL_HOSTS,
        jobs=jobs,
        totals=totals,
        series=series,
        usr_cpu_pct=sum(h.usr_cpu_pct * h.jobs for h in hosts) / jobs if jobs else 0.0,
        sys_cpu_pct=sum(h.sys_cpu_pct * h.jobs for h in hosts) / jobs if jobs else 0.0,
        busiest_job_cpu_pct=max((h.busiest_job_cpu_pct for h in hosts), default=0.0),
        errors=sum(h.errors for h in hosts),
    )


def build_scopes(
    sections: Sequence[SectionData], shifts_s: Mapping[str, int] | None = None
) -> tuple[ScopeResult, ...]:
    """Aggregate first, then per host (when several), then per workload × host.

    With several hosts, ``shifts_s`` (host -> seconds after the first host
    started) aligns their per-second series on wall-clock seconds."""
    hosts = sorted({s.host for s in sections})
    if len(hosts) > 1:
        per_host = [
            build_scope(ALL_WORKLOADS, h, [s for s in sections if s.host == h]) for h in hosts
        ]
        scopes = [merge_hosts(per_host, shifts_s or {}), *per_host]
    else:
        scopes = [build_scope(ALL_WORKLOADS, ALL_HOSTS, sections)]
    keys = list(dict.fromkeys((s.workload, s.host) for s in sections))
    scopes += [
        build_scope(w, h, [s for s in sections if (s.workload, s.host) == (w, h)]) for w, h in keys
    ]
    return tuple(scopes)
