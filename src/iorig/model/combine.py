"""Pure operations that combine results: totals over jobs or hosts, series
second by second, and the spread of a figure across hosts. Merging is exact
(sums of counts, histogram bins added, means weighted by their sample
counts); nothing is averaged that should not be.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace

import numpy as np

from iorig.model import histogram
from iorig.model.kinds import ALL, DDIRS, PhaseStatus
from iorig.model.results import AGGREGATE, PhaseResult, Scope, ScopeResult, Series, Totals
from iorig.model.secondhists import SecondHists

# ---------------------------------------------------------------- totals


def combine_totals(ddir: str, parts: Sequence[Totals]) -> Totals | None:
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


def merge_totals(per_part: Iterable[Mapping[str, Totals]]) -> dict[str, Totals]:
    """Per-direction totals over parts (jobs, hosts), plus the ``all`` direction."""
    per_part = list(per_part)
    out: dict[str, Totals] = {}
    for ddir in DDIRS:
        combined = combine_totals(ddir, [t[ddir] for t in per_part if ddir in t])
        if combined:
            out[ddir] = combined
    if out:
        combined_all = combine_totals(ALL, list(out.values()))
        if combined_all:
            out[ALL] = combined_all
    return out


def latency_range(parts: Iterable[Totals]) -> tuple[float, float] | None:
    """The fastest and slowest completion over parts that did I/O: a
    percentile of their merged histogram lies within them."""
    done = [p for p in parts if p.ios > 0]
    if not done:
        return None
    return min(p.lat_min_ns for p in done), max(p.lat_max_ns for p in done)


# ---------------------------------------------------------------- series


def empty_series(ddir: str) -> Series:
    return Series(
        ddir,
        np.zeros(0, dtype=np.int64),
        np.zeros(0),
        np.zeros(0),
        np.zeros(0),
        SecondHists.empty(),
    )


def combine_series(ddir: str, parts: Sequence[Series]) -> Series:
    """Sum series second by second over the seconds all parts have."""
    parts = [p for p in parts if p is not None]
    if not parts:
        return empty_series(ddir)
    n = min(len(p) for p in parts)
    if n == 0:
        return empty_series(ddir)
    if len(parts) == 1:  # a host of one workload, a direction that is all of "all"
        return replace(parts[0], ddir=ddir)  # shared: a day's series is tens of MB
    iops = np.sum([p.iops[:n] for p in parts], axis=0)
    hist = SecondHists.add([p.hist for p in parts], n)
    if len(hist) == n:  # a second's mean from its merged histogram, like its percentiles
        lat = hist.mean_each()
    else:  # a part without histograms: the rate-weighted mean of the parts'
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
        hist,
    )


def shift_series(series: Series, seconds: int) -> Series:
    """The same samples ``seconds`` later on the time axis."""
    return replace(series, t_s=series.t_s + seconds)


def window(series: Series, first: int, last: int) -> Series:
    """The seconds ``first`` … ``last`` (by ``t_s``) of a series."""
    keep = (series.t_s >= first) & (series.t_s <= last)
    return Series(
        series.ddir,
        series.t_s[keep],
        series.iops[keep],
        series.bytes_per_s[keep],
        series.lat_mean_ns[keep],
        series.hist.take(keep) if len(series.hist) == len(series) else SecondHists.empty(),
    )


def first_seconds(series: Series, seconds: int) -> Series:
    """The series' first ``seconds`` seconds."""
    if not len(series):
        return series
    return window(series, int(series.t_s[0]), int(series.t_s[0]) + seconds - 1)


def drop_last(series: Series, seconds: int) -> Series:
    """The series without its last ``seconds`` seconds."""
    if not len(series):
        return series
    return window(series, int(series.t_s[0]), int(series.t_s[-1]) - seconds)


def combine_aligned(ddir: str, parts: Sequence[Series]) -> Series:
    """Sum series second by second over the seconds every part covers, by
    their ``t_s`` (parts may start at different seconds, e.g. hosts)."""
    parts = [p for p in parts if len(p)]
    if not parts:
        return empty_series(ddir)
    first = max(int(p.t_s[0]) for p in parts)
    last = min(int(p.t_s[-1]) for p in parts)
    if last < first:
        return empty_series(ddir)
    return combine_series(ddir, [window(p, first, last) for p in parts])


# ---------------------------------------------------------------- hosts


def merge_hosts(hosts: Sequence[ScopeResult], shifts_s: Mapping[str, int]) -> ScopeResult:
    """The aggregate over hosts: rates add up, latency histograms merge, and the
    per-second series are summed on wall-clock seconds (each host's series
    shifted by when it started relative to the first)."""
    totals = merge_totals([{d: t for d, t in h.totals.items() if d != ALL} for h in hosts])
    series = {}
    for ddir in dict.fromkeys(d for h in hosts for d in h.series):
        parts = [
            shift_series(h.series[ddir], shifts_s.get(h.scope.host or "", 0))
            for h in hosts
            if ddir in h.series
        ]
        series[ddir] = combine_aligned(ddir, parts)
    jobs = sum(h.jobs for h in hosts)
    return ScopeResult(
        scope=AGGREGATE,
        jobs=jobs,
        totals=totals,
        series=series,
        usr_cpu_pct=sum(h.usr_cpu_pct * h.jobs for h in hosts) / jobs if jobs else 0.0,
        sys_cpu_pct=sum(h.sys_cpu_pct * h.jobs for h in hosts) / jobs if jobs else 0.0,
        busiest_job_cpu_pct=max((h.busiest_job_cpu_pct for h in hosts), default=0.0),
        errors=sum(h.errors for h in hosts),
    )


# ---------------------------------------------------------------- headline


def headline_scope(phase: PhaseResult, host: str | None = None) -> ScopeResult | None:
    """What a phase's headline figures count (its summary, the run list,
    comparisons): the aggregate, or ``host``'s share of a multi-host phase;
    only the workloads the scenario named where it named some (Exchange's
    database threads, not its log and maintenance streams, as Jetstress
    reports transactional IOPS; docs/methodology.md §4)."""
    whole = (
        phase.aggregate
        if host is None
        else next((s for s in phase.host_scopes if s.scope.host == host), None)
    )
    of = phase.headline_of
    if of is None or whole is None:
        return whole
    parts = [
        s
        for s in phase.workload_scopes(list(of.workloads))
        if s.status is PhaseStatus.OK and (host is None or s.scope.host == host)
    ]
    if not parts:
        return None
    hosts = list(dict.fromkeys(s.scope.host for s in parts))
    each = [_workloads_of(Scope(host=h), [s for s in parts if s.scope.host == h]) for h in hosts]
    if len(each) == 1:
        return replace(each[0], scope=whole.scope)
    return merge_hosts(each, of.host_shifts_s)


def _workloads_of(scope: Scope, parts: Sequence[ScopeResult]) -> ScopeResult:
    """Workloads of one host together: their series share the host's axis."""
    jobs = sum(p.jobs for p in parts)
    ddirs = dict.fromkeys(d for p in parts for d in p.series)
    return ScopeResult(
        scope=scope,
        jobs=jobs,
        totals=merge_totals([{d: t for d, t in p.totals.items() if d != ALL} for p in parts]),
        series={d: combine_series(d, [p.series[d] for p in parts if d in p.series]) for d in ddirs},
        usr_cpu_pct=sum(p.usr_cpu_pct * p.jobs for p in parts) / jobs if jobs else 0.0,
        sys_cpu_pct=sum(p.sys_cpu_pct * p.jobs for p in parts) / jobs if jobs else 0.0,
        busiest_job_cpu_pct=max((p.busiest_job_cpu_pct for p in parts), default=0.0),
        errors=sum(p.errors for p in parts),
    )
