"""What the verdicts of application workloads (Exchange, integrity,
availability: any run with criteria or a data check) are made of, compared
run by run: each requirement's figure on every run with its
change against the baseline and whether that change exceeds the noise, its
limit and result, and every run's verdict, overall and per host. Pure: from
analysed runs.

A requirement's figure is the one its verdict judged (``criteria.figure``:
transactional IOPS over the database workload, a read latency …), not the
phase's total over every stream. Whether its change is real is decided as
``compare`` decides a phase's throughput: Welch's t-test on the figure of
each repeat when both runs have two or more, else on batch means of its
per-second values (a rate, or each second's mean latency). A percentile, a
maximum or the worst second is one figure per run: without repeats it is
not testable. A data check has no noise to test: one lost block fails it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from iorig.analyze.compare import judge
from iorig.analyze.criteria import (
    Verdict,
    criteria_of,
    figure,
    figure_seconds,
    overall,
)
from iorig.analyze.integrity import DataCheck
from iorig.analyze.stats import RatioTest, batch_means, welch_ratio
from iorig.model import Change, Outcome, PhaseKind, PhaseResult, StoredRun
from iorig.scenario.schema import Criterion

HIGHER_IS_BETTER = frozenset({"iops", "bytes_per_s"})  # the rest are latencies
DATA = "data"  # the metric of a data check's row (integrity.data_verdict)
DATA_NAME = "Every block reads back as last written"
ONE_FIGURE = "one figure per run (--repeat N tests it)"


class Judged(Protocol):
    """What this module reads of an analysed run (``analysis.RunAnalysis``)."""

    @property
    def stored(self) -> StoredRun: ...

    @property
    def verdicts(self) -> tuple[Verdict, ...]: ...

    @property
    def verdict(self) -> str | None: ...

    @property
    def data(self) -> DataCheck | None: ...


@dataclass(frozen=True)
class FigureChange:
    """One run's requirement figure against the baseline's."""

    change: float  # (run − baseline) / baseline; NaN when either is unknown
    test: RatioTest | None
    method: str  # "repeats", "batch means" or "none"
    verdict: Change  # better, worse, same or untestable (by the metric's direction)
    below_threshold: bool  # a real change under the practical threshold
    why: str = ""  # untestable: why

    @property
    def significant(self) -> bool:
        return self.verdict.significant


@dataclass(frozen=True)
class RequirementRow:
    """One requirement (on one phase, and one host where it is judged per
    host) across the runs."""

    name: str
    phase: str
    host: str | None
    metric: str  # a criterion's metric, or "data"
    bound: str  # "min", "max" or "info"
    verdicts: tuple[Verdict | None, ...]  # one per run; None where a run lacks it
    changes: tuple[FigureChange | None, ...]  # vs the baseline; None for it, or without a figure

    @property
    def higher_is_better(self) -> bool:
        return self.metric in HIGHER_IS_BETTER


@dataclass(frozen=True)
class RunVerdict:
    verdict: str | None  # the run's own: "PASS", "FAIL on h1", "FAIL: data lost …"; None without
    hosts: tuple[tuple[str, str], ...]  # (host, its verdict) where requirements are per host


@dataclass(frozen=True)
class VerdictComparison:
    runs: tuple[RunVerdict, ...]  # in the runs' order
    requirements: tuple[RequirementRow, ...]
    data: tuple[DataCheck | None, ...]  # each run's data check (the data row's figures)
    threshold: float

    @property
    def methods(self) -> set[str]:
        return {c.method for r in self.requirements for c in r.changes if c is not None}


def _key(v: Verdict) -> tuple[str, str, str | None]:
    # a data check's name carries its counts: it is the same requirement on every run
    return (DATA if v.metric == DATA else v.name, v.phase, v.host)


def host_verdicts(verdicts: Sequence[Verdict]) -> tuple[tuple[str, str], ...]:
    """Each host's own verdict on the requirements judged per host."""
    hosts = list(dict.fromkeys(v.host for v in verdicts if v.host))
    out = []
    for host in hosts:
        found = overall([v for v in verdicts if v.host == host])
        # "FAIL on h2" on h2's own row says no more than "FAIL"
        text = "-" if found is None else found.text
        out.append((host, Outcome.FAIL if text == f"{Outcome.FAIL} on {host}" else text))
    return tuple(out)


def _repeats(stored: StoredRun, phase: str) -> list[PhaseResult]:
    return [p for p in stored.phases if p.kind is PhaseKind.MEASURE and p.name == phase]


def _criterion(stored: StoredRun, name: str) -> Criterion | None:
    return next((c for c in criteria_of(stored.run.resolved) if c.name == name), None)


def _relative(new: float, old: float) -> float:
    if math.isnan(new) or math.isnan(old) or not old:
        return math.nan
    return (new - old) / old


def figure_change(
    base: tuple[Criterion, Sequence[PhaseResult]],
    other: tuple[Criterion, Sequence[PhaseResult]],
    host: str | None,
    change: float,
    threshold: float,
    confidence: float,
) -> FigureChange:
    """The test of one requirement's figure, ``other`` against ``base``
    (each: its criterion and the phase's repeats)."""
    (ca, ra), (cb, rb) = base, other
    higher = ca.metric in HIGHER_IS_BETTER
    if len(ra) >= 2 and len(rb) >= 2:
        a, b = [figure(ca, [r], host) for r in ra], [figure(cb, [r], host) for r in rb]
        method = "repeats"
    elif ca.metric in ("iops", "bytes_per_s", "lat_mean"):
        a = batch_means(figure_seconds(ca, ra, host).tolist())
        b = batch_means(figure_seconds(cb, rb, host).tolist())
        method = "batch means" if a and b else "none"
    else:
        return FigureChange(change, None, "none", Change.UNTESTABLE, False, ONE_FIGURE)
    test = welch_ratio(
        [v for v in a if not math.isnan(v)], [v for v in b if not math.isnan(v)], confidence
    )
    verdict, below = judge(test, threshold, higher)
    return FigureChange(change, test, method, verdict, below, "" if test else "too few samples")


def verdict_comparison(
    runs: Sequence[Judged], threshold: float, confidence: float
) -> VerdictComparison | None:
    """The runs' requirements side by side (the first run is the baseline);
    None when no run has a verdict."""
    if not any(r.verdicts or r.verdict is not None for r in runs):
        return None
    by_run = [{_key(v): v for v in r.verdicts} for r in runs]
    keys = list(dict.fromkeys(k for found in by_run for k in found))
    rows = []
    for key in keys:
        verdicts = tuple(found.get(key) for found in by_run)
        first = next(v for v in verdicts if v is not None)
        changes = tuple(
            None if i == 0 else _row_change(runs[0], run, verdicts[0], v, threshold, confidence)
            for i, (run, v) in enumerate(zip(runs, verdicts, strict=True))
        )
        name = DATA_NAME if first.metric == DATA else first.name
        rows.append(
            RequirementRow(
                name, first.phase, first.host, first.metric, first.bound, verdicts, changes
            )
        )
    return VerdictComparison(
        runs=tuple(RunVerdict(r.verdict, host_verdicts(r.verdicts)) for r in runs),
        requirements=tuple(rows),
        data=tuple(r.data for r in runs),
        threshold=threshold,
    )


def _row_change(
    base: Judged,
    run: Judged,
    base_verdict: Verdict | None,
    verdict: Verdict | None,
    threshold: float,
    confidence: float,
) -> FigureChange | None:
    if base_verdict is None or verdict is None or verdict.metric == DATA:
        return None
    ca = _criterion(base.stored, base_verdict.name)
    cb = _criterion(run.stored, verdict.name)
    if ca is None or cb is None:
        return None
    change = _relative(verdict.value, base_verdict.value)
    return figure_change(
        (ca, _repeats(base.stored, base_verdict.phase)),
        (cb, _repeats(run.stored, verdict.phase)),
        verdict.host,
        change,
        threshold,
        confidence,
    )
