"""A/B across a sweep, in words (docs/methodology.md §3, seed 003).

Two runs of the same sweep (e.g. protocol A and B over block sizes, reads and
writes) are summarised per group as the range of the ratios B/A over the
group's points, the way a storage engineer writes it: "B delivered 23–41 %
more read throughput, at 71–81 % of the latency". Ranges, not means, because
the spread across block sizes is the finding; percentages are rounded to
whole numbers, so "the same" means within half a percent everywhere.

Only points whose difference is significant make a range; the others are
named as not significant (or not testable). Where B/A crosses 1 along the
sweep, each side is its own region with its own range ("B delivered 78–105 %
more read throughput at bs=64KiB–1MiB …; 20–30 % less at bs=4KiB–16KiB …").
When no point could be tested at all (no repeats), the ranges describe the
measured points and say that they are untested.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from iorig.analyze.compare import PhaseComparison, verdict_text
from iorig.analyze.search import SearchResult, SweepResult
from iorig.model import Change, Metric


@dataclass(frozen=True)
class PointPair:
    group: str  # the other coordinates: "read", or "rw=read,iodepth=1"
    point: str  # e.g. "bs=4k"
    throughput_a: float
    throughput_b: float
    lat_mean_ns_a: float
    lat_mean_ns_b: float
    significant: bool | None = None  # None: not testable (e.g. no repeats)
    # how a sentence names the group: the words before "throughput" ("read";
    # None: the group itself) and the values that are not words ("iodepth=1")
    what: str | None = None
    condition: str = ""
    headline: Metric = Metric.IOPS  # what the throughputs are (the point's headline)


@dataclass(frozen=True)
class Region:
    """Consecutive points where B stays on one side of A."""

    first: str  # e.g. "bs=64KiB"
    last: str
    points: int
    throughput_ratio_min: float  # B / A
    throughput_ratio_max: float
    lat_ratio_min: float  # B / A of mean latency
    lat_ratio_max: float

    @property
    def where(self) -> str:
        """ "bs=64KiB–1MiB", or "bs=64KiB" for one point."""
        if self.first == self.last:
            return self.first
        return f"{self.first}–{self.last.split('=', 1)[-1]}"


@dataclass(frozen=True)
class GroupSummary:
    group: str
    points: int
    testable: int  # points with a significance verdict
    significant: int
    regions: tuple[Region, ...]  # of the significant points (of all when none was testable)
    not_significant: tuple[str, ...] = ()  # tested, no significant difference
    untested: tuple[str, ...] = ()  # not testable, while others were
    what: str | None = None  # as PointPair's
    condition: str = ""


def _ratio(b: float, a: float, what: str, pair: PointPair) -> float:
    if a <= 0:
        raise ValueError(f"{pair.group} {pair.point}: {what} of A is {a}, cannot form B/A")
    return b / a


def _regions(members: Sequence[PointPair]) -> tuple[Region, ...]:
    runs: list[list[tuple[PointPair, float, float]]] = []
    for p in members:
        tput = _ratio(p.throughput_b, p.throughput_a, "throughput", p)
        lat = _ratio(p.lat_mean_ns_b, p.lat_mean_ns_a, "mean latency", p)
        if runs and (runs[-1][-1][1] >= 1.0) == (tput >= 1.0):
            runs[-1].append((p, tput, lat))
        else:
            runs.append([(p, tput, lat)])
    return tuple(
        Region(
            first=run[0][0].point,
            last=run[-1][0].point,
            points=len(run),
            throughput_ratio_min=min(t for _, t, _ in run),
            throughput_ratio_max=max(t for _, t, _ in run),
            lat_ratio_min=min(lat for _, _, lat in run),
            lat_ratio_max=max(lat for _, _, lat in run),
        )
        for run in runs
    )


def ratio_ranges(pairs: Sequence[PointPair]) -> list[GroupSummary]:
    """Per group, in first-seen order: regions of B/A over the significant points."""
    groups: dict[str, list[PointPair]] = {}
    for pair in pairs:
        groups.setdefault(pair.group, []).append(pair)
    out: list[GroupSummary] = []
    for group, members in groups.items():
        tested = [p for p in members if p.significant is not None]
        basis = [p for p in members if p.significant] if tested else list(members)
        out.append(
            GroupSummary(
                group=group,
                points=len(members),
                testable=len(tested),
                significant=sum(p.significant is True for p in members),
                regions=_regions(basis),
                not_significant=tuple(p.point for p in members if p.significant is False),
                untested=tuple(p.point for p in members if p.significant is None and tested),
                what=members[0].what,
                condition=members[0].condition,
            )
        )
    return out


def _whole(percent: float) -> int:
    """Half away from zero (round() would send 12.5 to 12 and 13.5 to 14)."""
    return int(math.copysign(math.floor(abs(percent) + 0.5), percent))


def _span(lo: int, hi: int) -> str:
    return f"{lo} %" if lo == hi else f"{lo}–{hi} %"


def _throughput_clause(region: Region, what: str, label_a: str) -> str:
    lo = _whole((region.throughput_ratio_min - 1.0) * 100)
    hi = _whole((region.throughput_ratio_max - 1.0) * 100)
    if lo == hi == 0:
        return f"the same {what} as {label_a}"
    if lo >= 0:
        return f"up to {hi} % more {what}" if lo == 0 else f"{_span(lo, hi)} more {what}"
    if hi <= 0:
        return f"up to {-lo} % less {what}" if hi == 0 else f"{_span(-hi, -lo)} less {what}"
    return f"between {-lo} % less and {hi} % more {what}"


def _latency_clause(region: Region) -> str:
    lo, hi = _whole(region.lat_ratio_min * 100), _whole(region.lat_ratio_max * 100)
    if lo == hi == 100:
        return "at the same latency"
    return f"at {_span(lo, hi)} of the latency"


def _listed(points: tuple[str, ...]) -> str:
    values = [p.split("=", 1)[-1] for p in points]
    key = points[0].split("=", 1)[0] + "=" if "=" in points[0] else ""
    return key + ", ".join(values)


def _significance_clause(summary: GroupSummary) -> str:
    n, tested, sig = summary.points, summary.testable, summary.significant
    if tested == 0:
        return "significance not tested (use --repeat 3 or longer phases)"
    testable = "" if tested == n else "testable "
    rest = "" if tested == n else f" ({n} in all)"
    if tested == 1:
        verdict = "significant" if sig else "not significant"
        text = verdict if tested == n else f"{verdict} at the one testable point{rest}"
    elif tested == 2 and sig in (0, 2):
        which = f"either {testable}point" if sig == 0 else f"both {testable}points"
        text = f"{'not ' if sig == 0 else ''}significant at {which}{rest}"
    elif sig == 0:
        text = f"not significant at any of the {tested} {testable}points{rest}"
    elif sig == tested:
        text = f"significant at all {tested} {testable}points{rest}"
    else:
        text = f"significant at {sig} of {tested} {testable}points{rest}"
    if summary.not_significant and sig:
        text += f"; no significant difference at {_listed(summary.not_significant)}"
    if summary.untested:
        text += f"; not testable at {_listed(summary.untested)}"
    return text


def describe(summary: GroupSummary, label_a: str, label_b: str) -> str:
    """One sentence, e.g. "B delivered 23–41 % more read throughput, at 71–81 % of
    the latency; significant at 7 of 9 points", or for a group that is not
    a word "With iodepth=1, B delivered …"."""
    words = summary.group if summary.what is None else summary.what
    what = f"{words} throughput" if words else "throughput"
    condition = summary.condition
    if not summary.regions:  # tested everywhere, significant nowhere
        where = f" with {condition}" if condition else ""
        return f"{label_b}: no significant difference in {what} from {label_a}{where}; " + (
            _significance_clause(summary)
        )
    whole = len(summary.regions) == 1 and summary.regions[0].points == summary.points
    clauses = []
    for region in summary.regions:
        where = "" if whole else f" at {region.where}"
        clauses.append(
            f"{_throughput_clause(region, what, label_a)}{where}, {_latency_clause(region)}"
        )
    lead = f"With {condition}, {label_b}" if condition else label_b
    return f"{lead} delivered {'; '.join(clauses)}; {_significance_clause(summary)}"


@dataclass(frozen=True)
class SweepComparison:
    """One run against the baseline across the points of a sweep (seed 003)."""

    label_a: str
    label_b: str
    x_axis: str
    pairs: tuple[PointPair, ...]
    verdicts: tuple[str, ...]  # per pair: the comparison's verdict text
    summaries: tuple[GroupSummary, ...]
    group_title: str = ""  # what a pair's group holds: "rw", "test, rw, iodepth"; "": nothing

    def sentences(self) -> list[str]:
        return [describe(s, self.label_a, self.label_b) for s in self.summaries]


def _word(value: str) -> bool:
    """Whether a parameter's value reads as a word ("read", "libaio"), not
    a number or size ("1", "4KiB")."""
    return value[:1].isalpha()


def sweep_comparisons(
    labels: Sequence[str],
    phases: Sequence[PhaseComparison],
    sweeps: Sequence[SearchResult | None],
) -> list[SweepComparison]:
    """Per-point ratios of each run against the baseline, when all runs are
    sweeps over the same parameters. Empty otherwise."""
    found = [s for s in sweeps if isinstance(s, SweepResult)]
    if len(found) != len(sweeps) or len({sw.axes for sw in found}) != 1:
        return []
    base = found[0]
    by_name = {p.phase.name: p for p in base.points}
    several_tests = len({p.test for p in base.points}) > 1
    out = []
    for i in range(1, len(sweeps)):
        pairs, verdicts = [], []
        for phase in phases:
            a, b, diff = phase.entries[0], phase.entries[i], phase.differences[i]
            point = by_name.get(phase.name)
            if a is None or b is None or point is None or a.level <= 0 or a.lat_mean_ns <= 0:
                continue
            others = base.axes[1:]
            group = (
                point.coords[others[0]]
                if len(others) == 1
                else ",".join(f"{k}={point.coords[k]}" for k in others)
            )
            if several_tests:  # several measured phases per point
                group = f"{point.test} {group}".strip()
            # a value that is a word reads as one ("read throughput"); a
            # number needs its name ("with iodepth=1", not "1 throughput")
            words = [point.test] if several_tests else []
            words += [point.coords[k] for k in others if _word(point.coords[k])]
            condition = ", ".join(
                f"{k}={point.coords[k]}" for k in others if not _word(point.coords[k])
            )
            significant = None
            if diff is not None and diff.verdict is not Change.UNTESTABLE:
                significant = diff.significant
            pairs.append(
                PointPair(
                    group=group,
                    point=f"{base.x_axis}={point.coords[base.x_axis]}",
                    throughput_a=a.level,
                    throughput_b=b.level,
                    lat_mean_ns_a=a.lat_mean_ns,
                    lat_mean_ns_b=b.lat_mean_ns,
                    significant=significant,
                    headline=a.headline,
                    what=" ".join(words),
                    condition=condition,
                )
            )
            verdicts.append(verdict_text(diff))
        if pairs:
            out.append(
                SweepComparison(
                    labels[0],
                    labels[i],
                    base.x_axis,
                    tuple(pairs),
                    tuple(verdicts),
                    tuple(ratio_ranges(pairs)),
                    ", ".join((["test"] if several_tests else []) + list(base.axes[1:])),
                )
            )
    return out
