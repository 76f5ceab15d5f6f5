"""A/B (and A/B/C …) comparison of stored runs, phase by phase, with a
significance verdict for every difference.

The first run is the baseline. For each measured phase the runs share (by
name), the per-second series of the phase's headline metric gives seed 000's
median, maximum and minimum with their % change, and the merged histograms
give mean and p99 latency. Whether a difference is real is judged on the
phase's throughput level:

* with repeats (``iorig run --repeat N``, N ≥ 2 on both sides): Welch's t-test
  on the per-repeat throughputs — each repeat is a fresh fio run, so this
  includes run-to-run variation;
* two runs of one ``iorig ab`` (interleaved rounds): a paired t-test on the
  per-round ratios (``analyze/ab.py``);
* otherwise: Welch's t-test on batch means of the per-second series — a
  weaker verdict, because it only sees the variation within one run.

A difference whose confidence interval includes zero, or whose size is under
the practical threshold (default 2 %), is "no significant difference".
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from iorig.analyze.precision import limit_share
from iorig.analyze.stats import MIN_SECONDS, LimitShare, RatioTest, batch_means, welch_ratio
from iorig.model import (
    ALL,
    Change,
    InterfaceLimit,
    Metric,
    PhaseKind,
    PhaseResult,
    PhaseStatus,
    ScopeResult,
    SeriesStats,
    StoredRun,
    histogram,
    series_stats,
)
from iorig.model.combine import headline_scope, latency_range
from iorig.model.sut import NOT_DISCLOSED, flat_description

NO_DIFFERENCE = "no significant difference"
NOT_TESTABLE = "not testable"


@dataclass(frozen=True)
class RunPhase:
    """One measured phase of one run, all its repeats pooled."""

    name: str
    headline: Metric
    per_second: np.ndarray  # of the headline metric, all repeats' seconds
    repeat_levels: tuple[float, ...]  # the phase's throughput in each repeat
    iops: float
    bytes_per_s: float
    lat_mean_ns: float
    lat_p99_ns: float
    hist: np.ndarray
    job_hash: str
    engine: str
    fio_version: str
    status: PhaseStatus
    total_lat_mean_ns: float = math.nan  # slat + clat: time in flight, for Little's law
    point: dict = field(default_factory=dict)  # sweep / search coordinates
    lat_range_ns: tuple[float, float] | None = None  # fastest, slowest completion
    job_text: str = ""  # the phase's fio job file, when it was asked for

    @property
    def stats(self) -> SeriesStats:
        return series_stats(self.per_second)

    @property
    def level(self) -> float:
        return self.iops if self.headline is Metric.IOPS else self.bytes_per_s


def normalized_job_text(text: str) -> str:
    """Job text without comments (they carry the run id) or blank lines."""
    lines = [line.strip() for line in text.splitlines()]
    return "\n".join(line for line in lines if line and not line.startswith((";", "#")))


def job_hash(text: str) -> str:
    return hashlib.sha256(normalized_job_text(text).encode()).hexdigest()[:12]


def job_options(text: str) -> dict[str, str]:
    """A fio job file's options by where they are, ``[section] option``
    (``[section #2]`` for a name's second section, as a workload's flow
    groups have it), each valued as written ("" for a flag)."""
    out: dict[str, str] = {}
    section, seen = "", {}
    for line in normalized_job_text(text).splitlines():
        if line.startswith("[") and line.endswith("]"):
            name = line[1:-1]
            seen[name] = seen.get(name, 0) + 1
            section = name if seen[name] == 1 else f"{name} #{seen[name]}"
            continue
        option, _, value = line.partition("=")
        out[f"[{section}] {option.strip()}" if section else option.strip()] = value.strip()
    return out


def pool_phases(
    phases: Iterable[PhaseResult], job_texts: Mapping[str, str] | None = None
) -> dict[str, RunPhase]:
    """Measured phases by name in order of first appearance, repeats pooled.
    ``job_texts``: phase name -> its fio job file (for the definition hash)."""
    groups: dict[str, list[tuple[PhaseResult, ScopeResult]]] = {}
    for phase in phases:
        if phase.kind is PhaseKind.MEASURE and (scope := headline_scope(phase)) is not None:
            groups.setdefault(phase.name, []).append((phase, scope))
    out = {}
    for name, pairs in groups.items():
        repeats = [p for p, _ in pairs]
        totals = [s.totals[ALL] for _, s in pairs if ALL in s.totals]
        series = [s.series[ALL] for _, s in pairs if ALL in s.series]
        headline = repeats[0].headline
        per_second = np.concatenate([s.values(headline) for s in series]) if series else np.zeros(0)
        ios = sum(t.ios for t in totals)
        hist = histogram.merge(t.hist for t in totals)
        lat_mean = sum(t.lat_mean_ns * t.ios for t in totals) / ios if ios else math.nan
        in_flight = sum(t.total_lat_mean_ns * t.ios for t in totals) / ios if ios else math.nan
        n = len(totals) or 1
        out[name] = RunPhase(
            name=name,
            headline=headline,
            per_second=per_second,
            repeat_levels=tuple(t.level(headline) for t in totals),
            iops=sum(t.iops for t in totals) / n,
            bytes_per_s=sum(t.bytes_per_s for t in totals) / n,
            lat_mean_ns=lat_mean,
            lat_p99_ns=histogram.percentiles(hist, (99.0,), latency_range(totals))[99.0],
            lat_range_ns=latency_range(totals),
            hist=hist,
            job_hash=job_hash((job_texts or {}).get(name, "")),
            job_text=(job_texts or {}).get(name, ""),
            engine=repeats[0].engine,
            fio_version=repeats[0].fio_version,
            status=PhaseStatus.OK
            if all(p.status is PhaseStatus.OK for p in repeats)
            else repeats[-1].status,
            total_lat_mean_ns=in_flight,
            point=dict(repeats[0].point),
        )
    return out


@dataclass(frozen=True)
class Difference:
    """One run against the baseline in one phase."""

    change_median: float
    change_max: float
    change_min: float
    change_lat_mean: float
    change_lat_p99: float
    test: RatioTest | None
    method: str  # "repeats", "batch means", "paired rounds" (iorig ab) or "none"
    verdict: Change  # better, worse, same or untestable
    below_threshold: bool
    equivalent: bool = False  # paired rounds: the whole interval is within ±threshold

    @property
    def significant(self) -> bool:
        return self.verdict.significant


def _change(new: float, old: float) -> float:
    if not old or math.isnan(old) or math.isnan(new):
        return math.nan
    return (new - old) / old


def phase_limit_share(phase: RunPhase, limit: float, metric: Metric) -> LimitShare | None:
    """``phase`` against a limit, with its noise. None when the limit is not
    of the phase's kind: an IOPS rating is a small-block random figure, and a
    phase scored in bytes/s (sequential) is not held to it."""
    if metric is Metric.IOPS and phase.headline is not Metric.IOPS:
        return None
    level = phase.iops if metric is Metric.IOPS else phase.bytes_per_s
    return limit_share(level, phase.per_second, limit, phase.repeat_levels)


def _level_samples(a: RunPhase, b: RunPhase) -> tuple[list[float], list[float], str]:
    if len(a.repeat_levels) >= 2 and len(b.repeat_levels) >= 2:
        return list(a.repeat_levels), list(b.repeat_levels), "repeats"
    return batch_means(a.per_second), batch_means(b.per_second), "batch means"


def judge(
    test: RatioTest | None, threshold: float, higher_is_better: bool = True
) -> tuple[Change, bool]:
    """A change's verdict — better, worse, same or untestable — and
    whether a real change was "same" for being under the practical
    threshold. ``higher_is_better``: False for a latency."""
    if test is None:
        return Change.UNTESTABLE, False
    if not test.excludes_no_change():
        return Change.SAME, False
    if abs(test.change) < threshold:
        return Change.SAME, True
    return (Change.BETTER if (test.ratio > 1) == higher_is_better else Change.WORSE), False


def difference(a: RunPhase, b: RunPhase, threshold: float, confidence: float) -> Difference:
    sa, sb = a.stats, b.stats
    samples_a, samples_b, method = _level_samples(a, b)
    test = welch_ratio(samples_a, samples_b, confidence)
    verdict, below = judge(test, threshold)
    if test is None:
        method = method if samples_a and samples_b else "none"
    return Difference(
        change_median=_change(sb.median, sa.median),
        change_max=_change(sb.maximum, sa.maximum),
        change_min=_change(sb.minimum, sa.minimum),
        change_lat_mean=_change(b.lat_mean_ns, a.lat_mean_ns),
        change_lat_p99=_change(b.lat_p99_ns, a.lat_p99_ns),
        test=test,
        method=method,
        verdict=verdict,
        below_threshold=below,
    )


@dataclass(frozen=True)
class PhaseComparison:
    name: str
    headline: Metric
    entries: tuple[RunPhase | None, ...]  # one per run, in the runs' order
    differences: tuple[Difference | None, ...]  # vs the baseline; None for it or when absent

    def winner(self, labels: tuple[str, ...], figure: str) -> str:
        """The winner of one table ("median", "max", "min"), or why there is
        none: no significant difference, not testable, the figure moved
        against the throughput, or runs both better and worse.

        A run wins only where the level test says it differs from the
        baseline and the table's own figure moves the same way. Without a
        winner, the column never says "no significant difference" beside a
        difference the test found significant (a Minimum row said
        it beside "significant (CI +4.7…+39.4 %)"): that claim needs every
        test to find none.
        """
        best, best_change = None, 0.0
        baseline_beaten_by_all = True
        against, worse = False, []
        for i, diff in enumerate(self.differences):
            if diff is None or self.entries[i] is None:
                continue
            change = getattr(diff, f"change_{figure}")
            agrees = diff.significant and (change > 0) == (diff.verdict is Change.BETTER)
            if diff.significant and not agrees:
                against = True
            elif diff.verdict is Change.WORSE:
                worse.append(labels[i])
            if diff.verdict is not Change.WORSE or not agrees:
                baseline_beaten_by_all = False
            if diff.verdict is Change.BETTER and agrees and change > best_change:
                best, best_change = i, change
        if best is not None:
            return labels[best]
        others = [d for d in self.differences if d is not None]
        if others and baseline_beaten_by_all:
            return labels[0]
        if against:
            return against_text(figure)
        if worse:  # worse than the baseline, which the others do not beat either
            return f"no single winner ({', '.join(worse)} worse)"
        if any(d.verdict is Change.UNTESTABLE for d in others):
            return NOT_TESTABLE
        return NO_DIFFERENCE


def against_text(figure: str) -> str:
    """The winner cell where the throughput differs beyond the noise but the
    table's figure moved the other way."""
    return f"none: the {_FIGURE_NAMES[figure]} moved against the throughput"


_FIGURE_NAMES = {"median": "median", "max": "maximum", "min": "minimum"}


def compare_phases(
    per_run: Sequence[Mapping[str, RunPhase]],
    labels: Sequence[str],
    threshold: float,
    confidence: float,
) -> tuple[list[PhaseComparison], list[tuple[str, str]]]:
    """Phase by phase against the first run (the baseline); also which
    phases only one run has, as (phase, label)."""
    names = list(dict.fromkeys(n for phases in per_run for n in phases))
    compared, only_in = [], []
    for name in names:
        entries = tuple(p.get(name) for p in per_run)
        present = [i for i, e in enumerate(entries) if e is not None]
        if len(present) == 1:
            only_in.append((name, labels[present[0]]))
            continue
        base = entries[0]
        diffs = tuple(
            difference(base, e, threshold, confidence)
            if base is not None and e is not None
            else None
            for e in (None, *entries[1:])
        )
        headline = next(e.headline for e in entries if e is not None)
        compared.append(PhaseComparison(name, headline, entries, diffs))
    return compared, only_in


def unique_labels(labels: list[str]) -> tuple[str, ...]:
    seen: dict[str, int] = {}
    out = []
    for label in labels:
        seen[label] = seen.get(label, 0) + 1
        out.append(label if seen[label] == 1 else f"{label} ({seen[label]})")
    return tuple(out)


def definition_differences(
    runs: Sequence[StoredRun], per_run: Sequence[Mapping[str, RunPhase]], labels: Sequence[str]
) -> list[str]:
    """What differs between the runs' definitions, so nobody compares apples
    to oranges unknowingly."""
    notes = []

    def differ(what: str, values: list[str]) -> None:
        if len(set(values)) > 1:
            listed = "; ".join(f"{lab}: {v}" for lab, v in zip(labels, values, strict=True))
            notes.append(f"{what} differs — {listed}")

    differ("scenario", [f"{r.run.scenario} v{r.run.scenario_version}" for r in runs])
    differ("profile", [r.run.profile or "full" for r in runs])
    differ("fio version", [r.run.fio_version for r in runs])
    differ("target kind", [",".join(t["kind"] for t in r.run.targets) for r in runs])
    params = [r.run.params for r in runs]
    for name in dict.fromkeys(k for p in params for k in p):
        differ(f"parameter {name}", [p.get(name, {}).get("text", "(none)") for p in params])
    notes += _disclosure_differences(runs, labels)
    notes += sut_differences(runs, labels)
    by_phase: dict[str, dict[str, tuple[str, ...]]] = {}
    for name in dict.fromkeys(n for p in per_run for n in p):
        entries = [p.get(name) for p in per_run]
        if any(e is None for e in entries):
            continue
        differ(f"{name}: engine", [e.engine for e in entries if e])
        texts = [e.job_text for e in entries if e]
        if all(texts) and len({e.job_hash for e in entries if e}) > 1:
            by_phase[name] = option_differences(texts)
    return notes + _job_differences(by_phase, labels)


MAX_OPTION_LINES = 6  # per phase: past that, a count


def option_differences(texts: Sequence[str]) -> dict[str, tuple[str, ...]]:
    """The fio options whose values differ between job files, each with its
    value in every file ("(not set)" where a file has none)."""
    options = [job_options(t) for t in texts]
    keys = dict.fromkeys(k for o in options for k in o)
    values = {k: tuple(o.get(k, "(not set)") for o in options) for k in keys}
    return {k: v for k, v in values.items() if len(set(v)) > 1}


def _job_differences(
    by_phase: Mapping[str, Mapping[str, tuple[str, ...]]], labels: Sequence[str]
) -> list[str]:
    """One line per differing fio option, said once when every phase whose
    job files differ has it the same way (a target path), else per phase."""

    def line(where: str, option: str, values: tuple[str, ...]) -> str:
        listed = "; ".join(f"{lab}: {v or '(set)'}" for lab, v in zip(labels, values, strict=True))
        return f"{where}fio option {option} differs — {listed}"

    def bare(key: str) -> str:  # the option without its section
        return key.rsplit("] ", 1)[-1]

    shared: dict[tuple[str, tuple[str, ...]], int] = {}
    for diffs in by_phase.values():
        for key, values in dict.fromkeys((bare(k), v) for k, v in diffs.items()):
            shared[(key, values)] = shared.get((key, values), 0) + 1
    everywhere = [kv for kv, n in shared.items() if n == len(by_phase) > 1]
    notes = [line("every phase: ", k, v) for k, v in everywhere]
    for phase, diffs in by_phase.items():
        own = [(k, v) for k, v in diffs.items() if (bare(k), v) not in everywhere]
        notes += [line(f"{phase}: ", k, v) for k, v in own[:MAX_OPTION_LINES]]
        if len(own) > MAX_OPTION_LINES:
            notes.append(
                f"{phase}: … and {len(own) - MAX_OPTION_LINES} more fio options differ "
                "(iorig show RUN --jobs)"
            )
    return notes


# Facts that change between any two runs without saying anything about them.
_VOLATILE = ("memory.available_bytes", "fio.path")
MAX_DISCLOSURE_LINES = 20


def _disclosure_differences(runs: Sequence[StoredRun], labels: Sequence[str]) -> list[str]:
    flat = [r.run.disclosure.flat() for r in runs]
    keys = list(dict.fromkeys(k for f in flat for k in f))
    notes = []
    for key in keys:
        if key.endswith(_VOLATILE) or key.startswith(_VOLATILE):
            continue
        values = [f.get(key, "(not recorded)") for f in flat]
        if len(set(values)) > 1:
            listed = "; ".join(f"{lab}: {v}" for lab, v in zip(labels, values, strict=True))
            notes.append(f"system {key} differs — {listed}")
    if len(notes) > MAX_DISCLOSURE_LINES:
        hidden = len(notes) - MAX_DISCLOSURE_LINES
        more = f"… and {hidden} more (iorig show RUN --disclosure)"
        notes = [*notes[:MAX_DISCLOSURE_LINES], more]
    return notes


def sut_differences(runs: Sequence[StoredRun], labels: Sequence[str]) -> list[str]:
    """Where the users' descriptions of the systems under test differ: two
    runs as "cache: on → off", more as each run's value."""
    flat = [flat_description(r.run.sut) for r in runs]
    notes = []
    for key in dict.fromkeys(k for f in flat for k in f):
        values = [f.get(key, NOT_DISCLOSED) for f in flat]
        if len(set(values)) < 2:
            continue
        if len(values) == 2:
            notes.append(f"system under test: {key}: {values[0]} → {values[1]}")
        else:
            listed = "; ".join(f"{lab}: {v}" for lab, v in zip(labels, values, strict=True))
            notes.append(f"system under test: {key} differs — {listed}")
    if len(notes) > MAX_DISCLOSURE_LINES:
        hidden = len(notes) - MAX_DISCLOSURE_LINES
        notes = [
            *notes[:MAX_DISCLOSURE_LINES],
            f"… and {hidden} more (iorig show RUN --disclosure)",
        ]
    return notes


def shared_limit(runs: Sequence[StoredRun]) -> InterfaceLimit | None:
    """The interface limit all runs recorded, when it is the same for all."""
    limits = [r.run.disclosure.interface_limit for r in runs]
    if limits and limits[0] and all(lim == limits[0] for lim in limits):
        return limits[0]
    return None


def percent(value: float) -> str:
    if value is None or math.isnan(value):
        return "-"
    return f"{value * 100:+.2f}%"


def verdict_text(diff: Difference | None) -> str:
    """Short: the verdict with the CI of the change and the p-value."""
    if diff is None:
        return ""
    if diff.test is None:
        return "not testable: too few samples"
    return significance_text(diff.test, diff.verdict, diff.below_threshold, diff.equivalent)


def significance_text(
    test: RatioTest, verdict: Change, below_threshold: bool, equivalent: bool = False
) -> str:
    """ "significant (CI +3.2…+4.4%, p=6e-11)", "n.s. (…)", "n.s., under threshold (…)"."""
    t = test
    ci = f"CI {(t.ci_low - 1) * 100:+.1f}…{(t.ci_high - 1) * 100:+.1f}%, p={t.p_value:.2g}"
    if verdict is Change.SAME and equivalent:
        return f"n.s., equivalent ({ci})"
    if verdict is Change.SAME:
        return f"n.s., under threshold ({ci})" if below_threshold else f"n.s. ({ci})"
    return f"significant ({ci})"


METHOD_NOTES = {  # one sentence each, under a comparison's tables
    "repeats": "Significance by Welch's t-test on the throughput of each repeat (fresh fio runs).",
    "batch means": "Significance by Welch's t-test on batch means of the per-second samples "
    "within each run — weaker: it cannot see run-to-run variation; use --repeat N for a firmer "
    "verdict.",
    "paired rounds": "Significance by a paired t-test on the log ratios of the per-round medians "
    "of an interleaved A/B (iorig ab: A and B in a random order in every round, so drift "
    "cancels).",
    "none": f"Not testable where a run has too few samples to test: fewer than {MIN_SECONDS} "
    "seconds of per-second samples and no repeats (a longer duration, or --repeat N, gives the "
    "test something to work on).",
}
