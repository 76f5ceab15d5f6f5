"""Turn parsed fio output and logs into per-workload, per-host and aggregate
results (``iorig.model``). Pure functions; the merging itself is
``iorig.model.combine``'s.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from iorig.fio.parse import HistLogEntry, JobStats, LogSample
from iorig.model import AGGREGATE, ALL, DDIRS, Scope, ScopeResult, Series, Totals, histogram
from iorig.model.combine import combine_series, empty_series, merge_hosts, merge_totals


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
        return empty_series(ddir)
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


def build_scope(scope: Scope, sections: Sequence[SectionData]) -> ScopeResult:
    jobs = [job for s in sections for job in s.jobs]
    logs = [log for s in sections for log in s.logs]
    cpu = [j.usr_cpu_pct + j.sys_cpu_pct for j in jobs]
    return ScopeResult(
        scope=scope,
        jobs=len(jobs),
        totals=merge_totals(_job_totals(j) for j in jobs),
        series=merge_series(logs, _horizon(jobs)),
        usr_cpu_pct=float(np.mean([j.usr_cpu_pct for j in jobs])) if jobs else 0.0,
        sys_cpu_pct=float(np.mean([j.sys_cpu_pct for j in jobs])) if jobs else 0.0,
        busiest_job_cpu_pct=max(cpu, default=0.0),
        errors=sum(1 for j in jobs if j.error),
    )


def build_scopes(
    sections: Sequence[SectionData], shifts_s: Mapping[str, int] | None = None
) -> tuple[ScopeResult, ...]:
    """Aggregate first, then per host (when several), then per workload × host.

    With several hosts, ``shifts_s`` (host -> seconds after the first host
    started) aligns their per-second series on wall-clock seconds."""
    hosts = sorted({s.host for s in sections})
    if len(hosts) > 1:
        per_host = [build_scope(Scope(host=h), [s for s in sections if s.host == h]) for h in hosts]
        scopes = [merge_hosts(per_host, shifts_s or {}), *per_host]
    else:
        scopes = [build_scope(AGGREGATE, sections)]
    keys = list(dict.fromkeys((s.workload, s.host) for s in sections))
    scopes += [
        build_scope(Scope(w, h), [s for s in sections if (s.workload, s.host) == (w, h)])
        for w, h in keys
    ]
    return tuple(scopes)
