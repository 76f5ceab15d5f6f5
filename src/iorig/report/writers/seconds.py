"""Every second of a run as CSV (``--format seconds``): the exact figures
behind the timeline and phase charts, which draw long series reduced
(docs/methodology.md §10).

One row per second of each phase (prefill, warm-up and repeats included),
scope and direction: throughput, bandwidth, the second's mean latency and
its p99 (from the second's own histogram). A scope or direction that holds
the same seconds as another is left out: the workload on a host that ran
only it (its host's, or with one host the aggregate's), and ``all`` where
a scope did one direction only. A day on sixteen hosts is 1.5 million rows.
Several runs (``compare``, ``report A B``) are written one after another.
"""

from __future__ import annotations

import csv
import io
from collections import Counter
from collections.abc import Iterator

import numpy as np

from iorig.analyze.analysis import Comparison, RunAnalysis
from iorig.model import ALL, PhaseResult, ScopeKind, ScopeResult, StoredRun
from iorig.report.options import RenderOptions
from iorig.report.writers.jsoncsv import csv_text

COLUMNS = (
    "run_id",
    "phase",
    "repeat",
    "kind",
    "scope",
    "host",
    "workload",
    "ddir",
    "t_s",
    "time_unix_s",
    "iops",
    "bytes_per_s",
    "lat_mean_ns",
    "lat_p99_ns",
)


def _distinct_scopes(phase: PhaseResult) -> Iterator[ScopeResult]:
    """The phase's scopes less those whose seconds another one holds."""
    workloads = Counter(s.scope.host for s in phase.workload_scopes())
    several_hosts = bool(phase.host_scopes)
    for scope in phase.scopes:
        alone = scope.scope.kind is ScopeKind.WORKLOAD and workloads[scope.scope.host] == 1
        if alone and (several_hosts or len(workloads) == 1):
            continue  # its host's seconds, or with one host the aggregate's
        yield scope


def _rows(run_id: str, phase: PhaseResult, scope: ScopeResult) -> Iterator[list[object]]:
    ddirs = [d for d in scope.series if d != ALL]
    for ddir, series in scope.series.items():
        if len(series) == 0 or (ddir == ALL and len(ddirs) == 1):
            continue
        p99 = series.hist.percentile_each(99.0)
        if p99.size != len(series):  # no histograms stored for these seconds
            p99 = np.full(len(series), np.nan)
        head = [
            run_id,
            csv_text(phase.name),
            phase.repeat,
            str(phase.kind),
            str(scope.scope.kind),
            csv_text(scope.scope.host or ""),
            csv_text(scope.scope.workload or ""),
            ddir,
        ]
        columns = zip(
            series.t_s.tolist(),
            (phase.origin + series.t_s).tolist(),
            series.iops.tolist(),
            series.bytes_per_s.tolist(),
            series.lat_mean_ns.tolist(),
            p99.tolist(),
            strict=True,
        )
        for t, at, iops, bw, mean, high in columns:
            yield [
                *head,
                t,
                f"{at:.3f}",
                _cell(iops),
                _cell(bw),
                _cell(mean),
                _cell(high),
            ]


def _cell(value: float) -> object:
    """A figure as written: whole numbers without ".0", none as empty."""
    if value != value:  # NaN: no completion that second
        return ""
    return int(value) if value.is_integer() else round(value, 3)


def seconds_csv(runs: list[StoredRun]) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(COLUMNS)
    for stored in runs:
        for phase in stored.phases:
            for scope in _distinct_scopes(phase):
                writer.writerows(_rows(stored.run.id, phase, scope))
    return out.getvalue()


class SecondsExporter:
    def run(self, analysis: RunAnalysis, options: RenderOptions) -> str:
        return seconds_csv([analysis.stored])

    def comparison(self, cmp: Comparison, options: RenderOptions) -> str:
        return seconds_csv([a.stored for a in cmp.runs])
