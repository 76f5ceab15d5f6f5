"""Interleaved A/B (``iorig ab``): the verdict of paired rounds.

In every round the measured phases of A and of B ran once each, in a random
order, each a fresh fio process (randomized multiple interleaved trials,
Abedi & Brecht, ICPE 2017). A round gives one pair of levels — the median
per second of the phase's headline metric on each side — so drift of the
system over time hits both sides of a pair alike and falls out of the
difference.

The test is Student's paired t on the logarithms of the per-round ratios
B/A: its interval is one for "B is x % of A" directly. A sign test or
Wilcoxon's signed-rank test would need no normality, but cannot reach
p < 0.05 with five pairs or fewer (the smallest two-sided p of a sign test
with n pairs is 2/2ⁿ, of Wilcoxon's 2/2ⁿ as well), and A/B runs are a few
rounds long. Ratios of capped or steady devices are close to log-normal.

Verdicts, with the practical threshold (default 2 %) as ``compare``'s:

* better / worse: the interval excludes no change and the change is at least
  the threshold (significant);
* equivalent: the whole interval lies within ±threshold;
* undecided: neither — the interval is reported ("the difference is between
  x and y").
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np

from iorig.analyze.abrounds import MIN_AUTO_ROUNDS
from iorig.analyze.compare import Difference, PhaseComparison
from iorig.analyze.stats import RESOLUTION, RatioTest, t_cdf, t_quantile
from iorig.model import ALL, Change, PhaseKind, PhaseResult, PhaseStatus, StoredRun
from iorig.model.combine import headline_scope

METHOD = "paired rounds"
EARLY_SHARE = 4  # the early looks of auto spend 1/EARLY_SHARE of α in all


@dataclass(frozen=True)
class PairedTest:
    """B against A from the per-round level pairs of one phase."""

    rounds: int  # pairs the test rests on
    ratio: float  # geometric mean of B/A over the rounds
    ci_low: float  # interval of the ratio
    ci_high: float
    p_value: float
    confidence: float
    threshold: float

    @property
    def change(self) -> float:
        return self.ratio - 1.0

    @property
    def verdict(self) -> Change:
        """better, worse, equivalent or undecided."""
        return classify(self.ci_low - 1.0, self.ci_high - 1.0, self.change, self.threshold)

    @property
    def significant(self) -> bool:
        return self.verdict.significant

    def as_ratio_test(self) -> RatioTest:
        return RatioTest(
            self.ratio,
            self.ci_low,
            self.ci_high,
            self.p_value,
            float(self.rounds - 1),
            self.rounds,
            self.rounds,
            self.confidence,
        )


def classify(low: float, high: float, change: float, threshold: float) -> Change:
    """The verdict of a change with interval [low, high] (fractions, 0.1 = +10 %)."""
    if -threshold < low and high < threshold:
        return Change.EQUIVALENT
    if (low > 0 or high < 0) and abs(change) >= threshold:
        return Change.BETTER if change > 0 else Change.WORSE
    return Change.UNDECIDED


_quantile = functools.lru_cache(maxsize=256)(t_quantile)  # auto asks the same few again


def paired_test(
    a: Sequence[float], b: Sequence[float], *, confidence: float = 0.95, threshold: float = 0.02
) -> PairedTest | None:
    """Paired t on log(b/a) of the rounds where both levels are positive;
    None with fewer than two such rounds. The spread of the log ratios is
    never taken below what two rounded rates can show (``RESOLUTION``): a
    cap repeats its figure to the I/O, and a spread of zero is no interval."""
    logs = np.array([math.log(y / x) for x, y in zip(a, b, strict=True) if x > 0 and y > 0])
    n = int(logs.size)
    if n < 2:
        return None
    floor = 2 * RESOLUTION**2 / 12.0  # two uniform rounding errors
    se = math.sqrt(max(float(logs.var(ddof=1)), floor) / n)
    mean = float(logs.mean())
    df = n - 1
    q = _quantile(0.5 + confidence / 2.0, df)
    p = 2.0 * (1.0 - t_cdf(abs(mean / se), df))
    return PairedTest(
        n,
        math.exp(mean),
        math.exp(mean - q * se),
        math.exp(mean + q * se),
        max(0.0, min(1.0, p)),
        confidence,
        threshold,
    )


def look_confidence(confidence: float, max_rounds: int, min_rounds: int = MIN_AUTO_ROUNDS) -> float:
    """The confidence of each early look of ``--rounds auto`` (after rounds
    ``min_rounds`` … ``max_rounds - 1``). Looking again and again would make
    "significant" likelier than the stated level when A and B are the same,
    so the early looks spend a quarter of α between them (Bonferroni); the
    verdict after the last round is the ordinary one, as ``compare`` gives
    it. Measured over 1,000 simulated A/Bs of equal sides: about 5 % false
    "significant" in all (tests/test_ab_stats.py)."""
    looks = max(1, max_rounds - min_rounds)
    return 1.0 - (1.0 - confidence) / (EARLY_SHARE * looks)


def keep_going(
    pairs: Mapping[str, tuple[Sequence[float], Sequence[float]]],
    *,
    rounds: int,
    max_rounds: int,
    confidence: float,
    threshold: float,
    min_rounds: int = MIN_AUTO_ROUNDS,
) -> bool:
    """``--rounds auto``: another round is needed — fewer than ``min_rounds``
    done, or some phase is neither significant nor equivalent at the
    stricter confidence of a look — and ``max_rounds`` is not reached."""
    if rounds >= max_rounds:
        return False
    if rounds < min_rounds:
        return True
    strict = look_confidence(confidence, max_rounds, min_rounds)
    for a, b in pairs.values():
        test = paired_test(a, b, confidence=strict, threshold=threshold)
        if test is None or test.verdict is Change.UNDECIDED:
            return True
    return False


def round_level(phase: PhaseResult) -> float:
    """A round's level: the median per second of the headline metric, or
    fio's phase mean when there is no per-second series."""
    scope = headline_scope(phase)
    if scope is None:
        return math.nan
    series = scope.series.get(ALL)
    if series is not None:
        values = np.asarray(series.values(phase.headline), dtype=float)
        values = values[~np.isnan(values)]
        if values.size:
            return float(np.median(values))
    totals = scope.totals.get(ALL)
    return totals.level(phase.headline) if totals is not None else math.nan


def round_levels(phases: Iterable[PhaseResult]) -> dict[str, dict[int, float]]:
    """Measured phase -> round -> level, of the phases that completed."""
    out: dict[str, dict[int, float]] = {}
    for p in phases:
        if p.kind is PhaseKind.MEASURE and p.status is PhaseStatus.OK and not p.point:
            level = round_level(p)
            if not math.isnan(level):
                out.setdefault(p.name, {})[p.repeat] = level
    return out


def level_pairs(
    a: Iterable[PhaseResult], b: Iterable[PhaseResult]
) -> dict[str, tuple[tuple[int, ...], list[float], list[float]]]:
    """Phase -> (rounds, A's levels, B's levels) over the rounds both sides completed."""
    la, lb = round_levels(a), round_levels(b)
    out = {}
    for name, of_a in la.items():
        of_b = lb.get(name, {})
        rounds = tuple(sorted(set(of_a) & set(of_b)))
        out[name] = (rounds, [of_a[r] for r in rounds], [of_b[r] for r in rounds])
    return out


@dataclass(frozen=True)
class AbPhase:
    name: str
    rounds: tuple[int, ...]
    a: tuple[float, ...]  # the baseline's level per round
    b: tuple[float, ...]
    test: PairedTest | None


@dataclass(frozen=True)
class AbComparison:
    """Two runs of one ``iorig ab``, the baseline's side first."""

    id: str
    sides: tuple[str, str]  # the baseline's side ("a" or "b"), the other's
    first: tuple[str, ...]  # per round, the side ("a"/"b") that ran first
    phases: tuple[AbPhase, ...]


def linked(base: StoredRun, other: StoredRun) -> bool:
    """The two runs are the two sides of one interleaved A/B."""
    x, y = base.run.ab, other.run.ab
    return (
        x is not None
        and y is not None
        and x.id == y.id
        and x.peer == other.run.id
        and y.peer == base.run.id
        and x.side != y.side
    )


def ab_comparison(
    base: StoredRun, other: StoredRun, *, confidence: float, threshold: float
) -> AbComparison:
    assert base.run.ab is not None and other.run.ab is not None
    phases = tuple(
        AbPhase(
            name,
            rounds,
            tuple(a),
            tuple(b),
            paired_test(a, b, confidence=confidence, threshold=threshold),
        )
        for name, (rounds, a, b) in level_pairs(base.phases, other.phases).items()
    )
    first = base.run.ab.first or other.run.ab.first
    return AbComparison(base.run.ab.id, (base.run.ab.side, other.run.ab.side), first, phases)


def paired_difference(plain: Difference, test: PairedTest | None) -> Difference:
    """``compare``'s difference with the verdict of the paired rounds: where
    they show no significant change, compare's "same", marked equivalent
    when the whole interval is within the threshold."""
    if test is None:
        return replace(
            plain, test=None, method=METHOD, verdict=Change.UNTESTABLE, below_threshold=False
        )
    verdict = test.verdict
    return replace(
        plain,
        test=test.as_ratio_test(),
        method=METHOD,
        verdict=verdict if verdict.significant else Change.SAME,
        below_threshold=False,
        equivalent=verdict is Change.EQUIVALENT,
    )


def with_paired_verdicts(
    phases: Sequence[PhaseComparison], ab: AbComparison
) -> list[PhaseComparison]:
    tests = {p.name: p.test for p in ab.phases}
    out = []
    for phase in phases:
        diffs = tuple(
            d if d is None or i == 0 else paired_difference(d, tests.get(phase.name))
            for i, d in enumerate(phase.differences)
        )
        out.append(PhaseComparison(phase.name, phase.headline, phase.entries, diffs))
    return out


def _pct(x: float) -> str:
    return f"{x * 100:+.1f} %".replace("-", "−")


def verdict_line(name: str, test: PairedTest | None, labels: tuple[str, str]) -> str:
    """One sentence per measured phase, as ``ab`` and ``compare`` print it."""
    a, b = labels
    if test is None:
        return f"{name}: not testable: fewer than two rounds completed on both sides"
    ci = (
        f"{test.confidence * 100:.0f} % CI {_pct(test.ci_low - 1)} … {_pct(test.ci_high - 1)}, "
        f"paired t on {test.rounds} rounds, p = {test.p_value:.2g}"
    )
    verdict = test.verdict
    if verdict.significant:
        how = "faster" if test.change > 0 else "slower"
        return f"{name}: {b} is {abs(test.change) * 100:.1f} % {how} than {a} ({ci}): significant"
    if verdict is Change.EQUIVALENT:
        return (
            f"{name}: no significant difference ({b} {_pct(test.change)} vs {a}, {ci}), "
            f"equivalent within ±{test.threshold * 100:g} %"
        )
    return (
        f"{name}: undecided at {test.rounds} rounds: the difference is between "
        f"{_pct(test.ci_low - 1)} and {_pct(test.ci_high - 1)} ({b} {_pct(test.change)} "
        f"vs {a}, {ci})"
    )
