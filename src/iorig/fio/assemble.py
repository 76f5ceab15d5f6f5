"""Turn parsed fio output and logs into per-workload, per-host and aggregate
results (``iorig.model``). Pure functions; the merging itself is
``iorig.model.combine``'s.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from iorig.fio.parse import HistLog, JobStats, LogSample, SampleLog
from iorig.model import (
    AGGREGATE,
    ALL,
    DDIRS,
    Scope,
    ScopeResult,
    SecondHists,
    Series,
    Totals,
    histogram,
)
from iorig.model.combine import combine_series, empty_series, merge_hosts, merge_totals


@dataclass(frozen=True)
class JobLogs:
    """The per-second logs of one fio job (one thread of a section, one host).

    A second's mean latency is read from its histogram, not from an averaged
    latency log: fio's ``write_lat_log`` costs three samples per I/O (slat,
    clat, lat); at the generator's limit fio used 1.053 times bare fio's CPU
    per I/O with it, 1.02-1.04 without (bench/overhead.py,
    docs/methodology.md §10)."""

    # columns, whatever samples the caller gave (__post_init__)
    iops: SampleLog = field(default_factory=SampleLog.empty)
    bw: SampleLog = field(default_factory=SampleLog.empty)
    hist: HistLog = field(default_factory=HistLog.empty, repr=False)
    # a low-rate paced job logs every completion instead (see jobtext): its
    # averaged windows would close late and its last one would never be written
    completions: SampleLog = field(default_factory=SampleLog.empty, repr=False)
    # what the job's JSON says it did, by direction (I/Os, bytes) and its
    # runtime: a paced job's averaged windows are completed with them
    done: Mapping[str, tuple[int, int]] = field(default_factory=dict, repr=False)
    # and its latency histogram by direction: what no logged row holds is
    # its last, never written, window's (_with_unlogged)
    done_hist: Mapping[str, np.ndarray] = field(default_factory=dict, repr=False)
    runtime_ms: int = 0
    # when the job began on its host's axis (its logs' times count from the
    # host's first job, and fio starts a phase's jobs up to a third of a
    # second apart): its runtime is counted from here
    started_ms: int = 0

    def __post_init__(self) -> None:
        # columns, whatever the caller built the logs from
        for name in ("iops", "bw", "completions"):
            object.__setattr__(self, name, SampleLog.of(getattr(self, name)))
        object.__setattr__(self, "hist", HistLog.of(self.hist))

    def of_job(self, job: JobStats) -> JobLogs:
        """These logs with their job's totals."""
        done = {d: (s.ios, s.io_bytes) for d, s in job.dirs.items()}
        hists = {d: s.hist for d, s in job.dirs.items()}
        return replace(self, done=done, done_hist=hists, runtime_ms=job.job_runtime_ms)

    @classmethod
    def of(cls, kinds: Mapping[str, Sequence]) -> JobLogs:
        """A job's logs by kind as ``parse.read_logs`` gives them; a job with
        a completion-latency log but no IOPS log logged every completion."""
        if "clat" in kinds and "iops" not in kinds:
            return cls(completions=kinds["clat"])
        return cls(
            iops=kinds.get("iops", ()),
            bw=kinds.get("bw", ()),
            hist=kinds.get("clat_hist", HistLog.empty()),
        )


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


def _per_second(
    completions: Sequence[LogSample], ddir: str
) -> tuple[dict[int, float], dict[int, float], dict[int, tuple[np.ndarray, np.ndarray]]]:
    """Exact per-second figures of a job that logged every completion: I/Os,
    KiB (as fio's bw logs give them) and latency bins of each second (the
    second ending at k s holds completions in [k-1, k) s)."""
    rows = [(s.t_ms // 1000 + 1, s.value, s.bs) for s in completions if s.ddir == ddir]
    if not rows:
        return {}, {}, {}
    seconds = np.array([r[0] for r in rows], dtype=np.int64)
    lat = np.array([r[1] for r in rows], dtype=np.float64)
    size = np.array([r[2] for r in rows], dtype=np.float64)
    iops, kib, hist = {}, {}, {}
    for second in np.unique(seconds).tolist():
        mask = seconds == second
        iops[second] = float(mask.sum())
        kib[second] = float(size[mask].sum()) / 1024
        counts = histogram.from_values(lat[mask])
        bins = np.flatnonzero(counts)
        hist[second] = (bins, counts[bins])
    return iops, kib, hist


def _completed(
    samples: Iterable[LogSample],
    ddir: str,
    total: float,
    runtime_ms: int,
    scale: float = 1.0,
    started_ms: int = 0,
) -> dict[int, float]:
    """Per second, what a paced job did, from its averaged windows made whole.

    A slow paced job closes each window at its first completion after the
    second (so windows end at 1.09 s, 2.12 s …) and never writes its last
    one. Its cumulative count is rebuilt from the windows it wrote (rate ×
    window length, ``scale`` turning the logged unit into the counted one),
    ended at the job's JSON total at its runtime, and read at each whole
    second: the seconds then add up to what the job did. Its windows and
    seconds are on its host's axis, where it began at ``started_ms``."""
    windows = sorted({s.t_ms: s.value for s in samples if s.ddir == ddir}.items())
    ended_ms = started_ms + runtime_ms
    t, c = [float(started_ms)], [0.0]
    for t_ms, value in windows:
        if t[-1] < t_ms <= ended_ms:
            c.append(c[-1] + value * scale * (t_ms - t[-1]) / 1000)
            t.append(float(t_ms))
    if ended_ms > t[-1]:
        t.append(float(ended_ms))
        c.append(max(total, c[-1]))
    if c[-1] <= 0:
        return {}
    cumulative = np.asarray(c) * (total / c[-1])
    seconds = ended_ms // 1000
    at = np.interp(np.arange(seconds + 1) * 1000.0, np.asarray(t), cumulative)
    return {s + 1: float(v) for s, v in enumerate(np.diff(at))}


# a job's first one-second window rounds past its host's second 1 when the
# job began this long after the host's first job
LATE_START_MS = 500


def _from_second_one(by_second: dict[int, float], first: int) -> dict[int, float]:
    """Seconds from 1, those before ``first`` zero."""
    return {s: 0.0 for s in range(1, first)} | by_second


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
        # each job's histogram rows of given seconds: a function, not a table
        hists: Callable[[np.ndarray], SecondHists]
        if log.completions:
            iops, bw, by_second = _per_second(log.completions, ddir)
            hists = functools.partial(_rows_of, by_second)
        elif horizon_s is not None and ddir in log.done and log.runtime_ms >= 1000:
            ios, io_bytes = log.done[ddir]
            iops = _completed(log.iops, ddir, ios, log.runtime_ms, started_ms=log.started_ms)
            bw = _completed(
                log.bw, ddir, io_bytes / 1024, log.runtime_ms, started_ms=log.started_ms
            )
            hists = functools.partial(_with_unlogged, log, ddir)
        else:
            iops, bw = (s.by_second(ddir) for s in (log.iops, log.bw))
            hists = functools.partial(log.hist.by_second, ddir)
            if iops and log.started_ms >= LATE_START_MS:
                # a job that began past the half second has its first window
                # in its host's second 2 or later: it did nothing before
                iops, bw = (_from_second_one(v, min(iops)) for v in (iops, bw))
        if iops:
            jobs.append((iops, bw, hists))
    if not jobs:
        return None
    if horizon_s is not None:
        # fio often does not flush the last window when a job ends, and a paced
        # job logs a window late or not at all: count up to the last second
        # most jobs logged, never past the time every job ran
        last = sorted(max(job[0]) for job in jobs)
        n = max(0, min(horizon_s, last[(len(last) - 1) // 2]))
        jobs = [({s: iops.get(s, 0.0) for s in range(1, n + 1)}, *rest) for iops, *rest in jobs]
    else:
        n = min(_complete_seconds(job[0]) for job in jobs)
    if n == 0:
        return empty_series(ddir)
    seconds = np.arange(1, n + 1, dtype=np.int64)
    iops_sum = np.zeros(n)
    bytes_sum = np.zeros(n)
    job_hists = []
    each = seconds.tolist()
    for iops, bw, hists in jobs:
        iops_sum += [iops[second] for second in each]
        bytes_sum += [bw.get(second, 0.0) * 1024 for second in each]  # fio logs KiB/s
        # a second a job logged no histogram for adds nothing to the others'
        job_hists.append(hists(seconds))
    hist = SecondHists.add(job_hists, n)
    # a second's mean from its merged histogram, like its percentiles
    lat = hist.mean_each() if len(hist) == n else np.full(n, np.nan)
    return Series(ddir, seconds, iops_sum, bytes_sum, lat, hist)


def _with_unlogged(log: JobLogs, ddir: str, seconds: np.ndarray) -> SecondHists:
    """A paced job's rows of ``seconds``; where the last has none, the
    completions no logged row holds (the job's JSON histogram less its
    rows): fio never writes a paced job's last window, whose I/Os
    ``_completed`` counts from the same totals."""
    rows = log.hist.by_second(ddir, seconds)
    total = log.done_hist.get(ddir)
    if total is None or not len(rows) or rows.lengths()[-1] > 0:
        return rows
    logged = log.hist.of_ddir(ddir).rows.merged()
    rest = total.astype(np.int64) - (logged if logged.size else 0)
    if rest.size == 0 or (rest < 0).any() or not rest.any():
        return rows  # rows that are not the JSON's: nothing is made up
    bins = np.flatnonzero(rest)
    last = SecondHists.from_rows([(bins, rest[bins])])
    return SecondHists.concat([rows.head(len(rows) - 1), last])


def _rows_of(
    by_second: Mapping[int, tuple[np.ndarray, np.ndarray]], seconds: np.ndarray
) -> SecondHists:
    """The rows (bins, counts) of ``seconds``, empty where there are none."""
    return SecondHists.from_rows([by_second.get(s) for s in seconds.tolist()])


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


def _horizon(jobs: Sequence[JobStats], logs: Sequence[JobLogs] = ()) -> int | None:
    """Whole seconds every job ran (on their host's axis, each from its
    start), when the jobs are rate-limited or flow-controlled (they may log
    nothing in a second without completions); None otherwise, so that
    free-running jobs keep the strict gap rule."""
    runtimes = [j.job_runtime_ms for j in jobs]
    if not runtimes or min(runtimes) <= 0 or not any(j.paced for j in jobs):
        return None
    if logs and all(log.runtime_ms for log in logs):  # each with its job's runtime
        return min(log.started_ms + log.runtime_ms for log in logs) // 1000
    return min(runtimes) // 1000


def _with_totals(section: SectionData) -> list[JobLogs]:
    """A section's logs, each with its job's totals: fio numbers a section's
    jobs and their logs in the same order."""
    if len(section.jobs) != len(section.logs):
        return list(section.logs)
    return [log.of_job(job) for log, job in zip(section.logs, section.jobs, strict=True)]


def build_scope(scope: Scope, sections: Sequence[SectionData]) -> ScopeResult:
    jobs = [job for s in sections for job in s.jobs]
    logs = [log for s in sections for log in _with_totals(s)]
    cpu = [j.usr_cpu_pct + j.sys_cpu_pct for j in jobs]
    return ScopeResult(
        scope=scope,
        jobs=len(jobs),
        totals=merge_totals(_job_totals(j) for j in jobs),
        series=merge_series(logs, _horizon(jobs, logs)),
        usr_cpu_pct=float(np.mean([j.usr_cpu_pct for j in jobs])) if jobs else 0.0,
        sys_cpu_pct=float(np.mean([j.sys_cpu_pct for j in jobs])) if jobs else 0.0,
        busiest_job_cpu_pct=max(cpu, default=0.0),
        errors=sum(1 for j in jobs if j.error),
    )


def build_scopes(
    sections: Sequence[SectionData],
    shifts_s: Mapping[str, int] | None = None,
    *,
    per_host: bool = False,
) -> tuple[ScopeResult, ...]:
    """Aggregate first, then per host (when several, or ``per_host``: a run
    on several hosts of which only one brought results back), then per
    workload × host.

    With several hosts, ``shifts_s`` (host -> seconds after the first host
    started) aligns their per-second series on wall-clock seconds."""
    hosts = sorted({s.host for s in sections})
    if len(hosts) > 1 or per_host:
        each = [build_scope(Scope(host=h), [s for s in sections if s.host == h]) for h in hosts]
        scopes = [merge_hosts(each, shifts_s or {}), *each]
    else:
        scopes = [build_scope(AGGREGATE, sections)]
    keys = list(dict.fromkeys((s.workload, s.host) for s in sections))
    scopes += [
        build_scope(Scope(w, h), [s for s in sections if (s.workload, s.host) == (w, h)])
        for w, h in keys
    ]
    return tuple(scopes)
