"""Pass/fail verdicts on measured phases (Jetstress-style requirements,
docs/methodology.md §4). Pure: criteria from the resolved scenario, figures from the
stored phases.

A criterion's figure is computed over the workloads it names (every host's
share included) and one direction: rates add up, latency means are weighted
by I/O counts, percentiles come from the merged histograms, and
``lat_mean_max`` is the worst one-second mean of the combined per-second
series. Repeats of a phase are pooled (rates averaged over repeats).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from iorig.model import (
    ALL,
    Outcome,
    PhaseKind,
    PhaseResult,
    PhaseStatus,
    ScopeResult,
    histogram,
)
from iorig.model.combine import combine_series, latency_range
from iorig.scenario.schema import Criterion


@dataclass(frozen=True)
class Verdict:
    name: str
    phase: str
    metric: str
    bound: str  # "min", "max", or "info" (reported, judges nothing)
    limit: float  # IOPS, bytes/s or ns (NaN for "info")
    value: float
    passed: bool
    # Room left: for a minimum, value / limit − 1 ("exceeded the target by
    # 247 %"); for a maximum, 1 − value / limit (share of the limit unused).
    margin: float
    host: str | None = None  # a per-host criterion's host; None: over every host

    @property
    def outcome(self) -> Outcome:
        if self.bound == "info":
            return Outcome.INFO
        return Outcome.PASS if self.passed else Outcome.FAIL


@dataclass(frozen=True)
class Judgement:
    """A run's verdict: its outcome, and the sentence that gives it ("PASS",
    "FAIL on h2", "PASS at threads=8 (1 of 3)", "FAIL: data lost …")."""

    outcome: Outcome
    text: str

    @classmethod
    def of(cls, outcome: Outcome, detail: str = "") -> Judgement:
        """``detail`` follows the outcome's word: " on h2", ": data lost …"."""
        return cls(outcome, f"{outcome}{detail}")


def criteria_of(resolved: dict[str, Any]) -> list[Criterion]:
    """The criteria of a stored run's resolved scenario (already validated)."""
    return [Criterion.model_construct(**c) for c in resolved.get("criteria", [])]


def _selected(
    phase: PhaseResult, workloads: list[str] | None, host: str | None = None
) -> list[ScopeResult]:
    if host is not None:  # one host's share: its workloads, or its whole aggregate
        if workloads is None:
            return [s for s in phase.host_scopes if s.scope.host == host]
        return [s for s in phase.workload_scopes(workloads) if s.scope.host == host]
    if workloads is None:
        return [phase.aggregate] if phase.aggregate is not None else []
    return [s for s in phase.workload_scopes(workloads) if s.status is PhaseStatus.OK]


def figure(criterion: Criterion, repeats: Sequence[PhaseResult], host: str | None = None) -> float:
    """The criterion's metric over the selected scopes of a phase's repeats
    (one host's share when ``host`` is given)."""
    ddir = criterion.ddir if criterion.ddir != "all" else ALL
    totals = []
    series = []
    rates: list[float] = []
    for phase in repeats:
        scopes = _selected(phase, criterion.workloads, host)
        parts = [s.totals[ddir] for s in scopes if ddir in s.totals]
        rates.append(sum(getattr(t, criterion.metric, 0.0) for t in parts))
        totals += parts
        per_second = [s.series[ddir] for s in scopes if ddir in s.series]
        if per_second:
            series.append(combine_series(ddir, per_second))
    metric = criterion.metric
    if metric in ("iops", "bytes_per_s"):
        return float(np.mean(rates)) if rates else math.nan
    ios = sum(t.ios for t in totals)
    if ios == 0:
        return math.nan
    if metric == "lat_mean":
        return sum(t.lat_mean_ns * t.ios for t in totals) / ios
    if metric == "lat_max":
        return max(t.lat_max_ns for t in totals)
    if metric == "lat_mean_max":
        seconds = [v for s in series for v in s.lat_mean_ns.tolist() if not math.isnan(v)]
        return max(seconds) if seconds else math.nan
    p = float(metric[1:])
    merged = histogram.merge(t.hist for t in totals)
    return histogram.percentiles(merged, (p,), latency_range(totals))[p]


def figure_seconds(
    criterion: Criterion, repeats: Sequence[PhaseResult], host: str | None = None
) -> np.ndarray:
    """The criterion's metric second by second, the repeats one after
    another: a rate, or the mean latency of each second (NaN without
    completions). Empty for a metric no second has (a percentile, a maximum):
    those are one figure per run."""
    if criterion.metric not in ("iops", "bytes_per_s", "lat_mean"):
        return np.zeros(0)
    ddir = criterion.ddir if criterion.ddir != "all" else ALL
    values = []
    for phase in repeats:
        scopes = _selected(phase, criterion.workloads, host)
        per_second = [s.series[ddir] for s in scopes if ddir in s.series]
        if per_second:
            combined = combine_series(ddir, per_second)
            name = "lat_mean_ns" if criterion.metric == "lat_mean" else criterion.metric
            values.append(np.asarray(getattr(combined, name), dtype=float))
    return np.concatenate(values) if values else np.zeros(0)


def latency_columns(criteria: Sequence[Criterion]) -> list[tuple[str, Criterion]]:
    """The mean-latency criteria (judged or only reported) with a short label
    each ("db read lat"), for tables that show them beside other figures:
    Jetstress reports database read and write and log write latency per
    thread count and per instance."""
    out = []
    for c in criteria:
        if c.metric == "lat_mean":
            who = "+".join(c.workloads) if c.workloads else "all"
            ddir = f" {c.ddir}" if c.ddir != "all" else ""
            out.append((f"{who}{ddir} lat", c))
    return out


def _matches(criterion: Criterion, phase: PhaseResult) -> bool:
    if criterion.phase is None:
        return True
    # sweep points are named "<phase>:<point>"
    return phase.name == criterion.phase or phase.name.startswith(criterion.phase + ":")


def evaluate(criteria: Sequence[Criterion], phases: Sequence[PhaseResult]) -> list[Verdict]:
    """One verdict per criterion and measured phase it applies to."""
    groups: dict[str, list[PhaseResult]] = {}
    for phase in phases:
        if phase.kind is PhaseKind.MEASURE and phase.scopes:
            groups.setdefault(phase.name, []).append(phase)
    out = []
    for name, repeats in groups.items():
        for c in criteria:
            if not _matches(c, repeats[0]):
                continue
            for host in _judged_hosts(c, repeats):
                out.append(_judge(c, name, figure(c, repeats, host), host))
    return out


def _judged_hosts(criterion: Criterion, repeats: Sequence[PhaseResult]) -> list[str | None]:
    """None (every host together), or each host of a multi-host phase for a
    per-host criterion: a host that stored nothing is judged on nothing (NaN
    fails), not left out."""
    hosts = list(dict.fromkeys(s.scope.host for p in repeats for s in p.host_scopes))
    if criterion.per != "host" or len(hosts) < 2:
        return [None]
    return hosts


def _judge(c: Criterion, phase: str, value: float, host: str | None) -> Verdict:
    limit = c.limit
    if c.bound == "info":
        passed, margin = True, math.nan
    elif math.isnan(value):
        passed, margin = False, math.nan
    elif c.bound == "min":
        passed, margin = value >= limit, (value / limit - 1 if limit else math.inf)
    else:
        passed, margin = value <= limit, (1 - value / limit if limit else -math.inf)
    return Verdict(c.name, phase, c.metric, c.bound, limit, value, passed, margin, host)


def overall(verdicts: Sequence[Verdict]) -> Judgement | None:
    """ "PASS" or "FAIL" for a single measured phase; for several (sweep points,
    a thread search) "PASS" when all pass, else which pass ("PASS at
    performance:threads=8, …" or "FAIL at every point"). None without criteria."""
    verdicts = [v for v in verdicts if v.bound != "info"]
    if not verdicts:
        return None
    by_phase: dict[str, bool] = {}
    for v in verdicts:
        by_phase[v.phase] = by_phase.get(v.phase, True) and v.passed
    if all(by_phase.values()):
        return Judgement.of(Outcome.PASS)
    if len(by_phase) == 1:
        hosts = list(dict.fromkeys(v.host for v in verdicts if not v.passed and v.host))
        return Judgement.of(Outcome.FAIL, f" on {', '.join(hosts)}" if hosts else "")
    passing = [name for name, ok in by_phase.items() if ok]
    if not passing:
        return Judgement.of(Outcome.FAIL, " at every point")
    return Judgement.of(
        Outcome.PASS, f" at {', '.join(passing)} ({len(passing)} of {len(by_phase)})"
    )
