"""One timeline per run: every phase that ran (prefill, warm-up, measured,
idle, verify; repeats too) on one wall-clock axis, as data for the HTML
chart and the terminal sparklines. Pure: no drawing, no printing.

The axis is seconds since the run's first phase started. A phase's
per-second point ``i`` sits at ``phase.origin + t_s[i]`` on that axis
(the end of its one-second window; ``origin`` is exact where fio's logs
carry wall-clock times, fio servers; else the phase's start, which fio's
jobs follow within their start-up). Throughput is in one metric for the whole run so that
phases compare: the headline of its measured phases when they share one,
else bytes/s (IOPS of 8 KiB and of 1 MiB I/O are not comparable; bytes/s
of any phase are). Latency is the p99 of each second, from that second's
histogram row (None for a second without completions: no latency, but a
throughput of 0). Traces are broken (a None point) at every phase boundary
and wherever a phase skips seconds, so a chart never joins figures across
an idle gap or a missing second.
"""

from __future__ import annotations

import itertools
import math
from collections import Counter
from dataclasses import dataclass

import numpy as np

from iorig.model import (
    ALL,
    EventStatus,
    Metric,
    PhaseKind,
    PhaseResult,
    PhaseStatus,
    ScopeResult,
    SecondHists,
    StoredRun,
)

P99 = 99.0
_GAP_S = 1.5  # consecutive points further apart than this are not joined


@dataclass(frozen=True)
class Samples:
    """One scope's per-second figures of one phase, on the run's axis."""

    x_s: tuple[float, ...]  # seconds since the run's first phase started
    throughput: tuple[float, ...]  # in the timeline's metric (IOPS or bytes/s)
    p99_ns: tuple[float | None, ...]  # None: no completion that second


@dataclass(frozen=True)
class Mark:
    """An event that happened, where it happened."""

    x_s: float  # on the run's axis
    offset_s: float  # since its phase started
    label: str
    status: EventStatus
    phase: str


@dataclass(frozen=True)
class PhaseSpan:
    """A phase's band on the axis, its figures per scope and its events."""

    name: str
    label: str  # the name, with "#n" when the run repeats it
    kind: PhaseKind
    status: PhaseStatus
    repeat: int
    start_s: float
    end_s: float
    samples: dict[str | None, Samples]  # None: the aggregate, else a host
    marks: tuple[Mark, ...]

    @property
    def duration_s(self) -> float:
        return max(0.0, self.end_s - self.start_s)


@dataclass(frozen=True)
class Trace:
    """One scope across the whole run, broken (None) between segments."""

    host: str | None  # None: the aggregate (every host)
    x_s: tuple[float | None, ...]
    throughput: tuple[float | None, ...]
    p99_ns: tuple[float | None, ...]
    phase: tuple[str | None, ...]  # the label of each point's phase


@dataclass(frozen=True)
class Timeline:
    origin: float  # unix seconds of x = 0: the first phase's start
    metric: Metric
    phases: tuple[PhaseSpan, ...]
    hosts: tuple[str, ...]  # hosts with their own traces (multi-host runs), as first seen

    @property
    def marks(self) -> list[Mark]:
        return [m for p in self.phases for m in p.marks]

    @property
    def max_throughput(self) -> float:
        """The aggregate's highest second of the run (0.0 without any)."""
        values = [v for p in self.phases if None in p.samples for v in p.samples[None].throughput]
        return max(values, default=0.0)

    def traces(self) -> list[Trace]:
        """The aggregate first, then each host."""
        return [self._trace(host) for host in (None, *self.hosts)]

    def _trace(self, host: str | None) -> Trace:
        x: list[float | None] = []
        y: list[float | None] = []
        p99: list[float | None] = []
        labels: list[str | None] = []
        for phase in self.phases:
            s = phase.samples.get(host)
            if s is None or not s.x_s:
                continue
            # a new phase, or seconds missing in this one, breaks the line
            cuts = [0, *(np.flatnonzero(np.diff(s.x_s) > _GAP_S) + 1).tolist(), len(s.x_s)]
            for a, b in itertools.pairwise(cuts):
                if x:
                    for column in (x, y, p99, labels):
                        column.append(None)
                x += s.x_s[a:b]
                y += s.throughput[a:b]
                p99 += s.p99_ns[a:b]
                labels += [phase.label] * (b - a)
        return Trace(host, tuple(x), tuple(y), tuple(p99), tuple(labels))


def run_metric(phases: tuple[PhaseResult, ...] | list[PhaseResult]) -> Metric:
    """The measured phases' shared headline, else bytes/s (see the module)."""
    found = {p.headline for p in phases if p.kind is PhaseKind.MEASURE}
    return found.pop() if len(found) == 1 else Metric.BYTES_PER_S


def p99_per_second(hists: SecondHists, seconds: int) -> list[float | None]:
    """The p99 (ns) of each second's histogram row: percentiles of a second
    come from its own row, never from averaging. None for an empty or
    missing row."""
    p99 = hists.percentile_each(P99).tolist()[:seconds]
    return [None if math.isnan(v) else v for v in p99] + [None] * (seconds - len(p99))


def _samples(scope: ScopeResult, start_s: float, metric: Metric) -> Samples | None:
    series = scope.series.get(ALL)
    if series is None or len(series) == 0:
        return None
    values = np.asarray(series.values(metric), dtype=float)
    return Samples(
        x_s=tuple((start_s + series.t_s.astype(float)).tolist()),
        throughput=tuple(np.where(np.isnan(values), 0.0, values).tolist()),
        p99_ns=tuple(p99_per_second(series.hist, len(series))),
    )


def _marks(phase: PhaseResult, origin: float) -> tuple[Mark, ...]:
    """The events that happened (skipped ones never started), where the
    events table and their impact place them on the phase's axis."""
    placed = [(at, e) for e in phase.events if (at := phase.event_at_s(e)) is not None]
    return tuple(
        Mark(phase.origin - origin + at, at, e.label, e.status, phase.name)
        for at, e in sorted(placed, key=lambda p: p[0])
    )


def build_timeline(stored: StoredRun) -> Timeline:
    """Every phase of ``stored`` in the order it ran, on one axis."""
    # in the order they ran (stored by scenario position, repeats together)
    phases = sorted(stored.phases, key=lambda p: p.started_at)
    origin = min((p.started_at for p in phases), default=stored.run.started_at)
    metric = run_metric(phases)
    multi_host = len(stored.run.hosts) > 1
    hosts: dict[str, None] = {}
    names = Counter(p.name for p in phases)
    spans = []
    for p in phases:
        start = p.started_at - origin
        scopes: list[tuple[str | None, ScopeResult]] = []
        if p.aggregate is not None:
            scopes.append((None, p.aggregate))
        if multi_host:
            scopes += [(s.scope.host, s) for s in p.host_scopes]
        samples = {}
        for host, scope in scopes:
            found = _samples(scope, p.origin - origin, metric)
            if found is not None:
                samples[host] = found
                if host is not None:
                    hosts[host] = None
        spans.append(
            PhaseSpan(
                p.name,
                p.name if names[p.name] == 1 else f"{p.name} #{p.repeat + 1}",
                p.kind,
                p.status,
                p.repeat,
                start,
                p.ended_at - origin,
                samples,
                _marks(p, origin),
            )
        )
    return Timeline(origin, metric, tuple(spans), tuple(hosts))
