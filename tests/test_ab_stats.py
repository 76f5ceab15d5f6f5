"""The statistics of interleaved A/B (analyze/ab.py) on simulated paired
series with a known answer: the paired t on log ratios of round medians,
its verdicts, its error rates over 1,000 simulated comparisons, and the
stopping rule of ``--rounds auto``."""

from __future__ import annotations

import math

import numpy as np
import pytest

from iorig.analyze.ab import (
    classify,
    keep_going,
    look_confidence,
    paired_test,
    verdict_line,
)
from iorig.analyze.stats import welch_ratio

TRIALS = 1000
NOISE = 0.03  # round-to-round spread of a level (log sd), both sides
DRIFT = 0.05  # the system's own wander from round to round, shared by A and B


def _rounds(rng: np.random.Generator, n: int, ratio: float) -> tuple[list[float], list[float]]:
    """n rounds: a common drifting level, each side's own noise, B = ratio·A."""
    drift = np.cumsum(rng.normal(0, DRIFT, n))
    a = 10_000 * np.exp(drift + rng.normal(0, NOISE, n))
    b = 10_000 * ratio * np.exp(drift + rng.normal(0, NOISE, n))
    return a.tolist(), b.tolist()


def _auto(rng: np.random.Generator, ratio: float, max_rounds: int = 10) -> tuple[str, int]:
    """One simulated ``--rounds auto``: the final verdict and the rounds it took."""
    a, b = [], []
    while keep_going(
        {"p": (a, b)}, rounds=len(a), max_rounds=max_rounds, confidence=0.95, threshold=0.02
    ):
        x, y = _rounds(rng, 1, ratio)
        a += x
        b += y
    test = paired_test(a, b)
    assert test is not None
    return test.verdict, len(a)


def test_a_constant_ratio_is_found_exactly_with_an_interval_from_the_resolution():
    test = paired_test([100.0, 200.0, 50.0], [90.0, 180.0, 45.0])
    assert test is not None and test.rounds == 3
    assert test.ratio == pytest.approx(0.9)
    assert test.ci_low < 0.9 < test.ci_high and test.ci_high - test.ci_low < 0.01
    assert test.verdict == "worse" and test.p_value < 0.001
    line = verdict_line("random-read", test, ("A", "B"))
    assert line.startswith("random-read: B is 10.0 % slower than A (95 % CI −10.")
    assert line.endswith("paired t on 3 rounds, p = " + f"{test.p_value:.2g}): significant")


def test_the_verdicts_follow_the_interval_and_the_threshold():
    assert classify(-0.12, -0.08, -0.10, 0.02) == "worse"
    assert classify(0.05, 0.15, 0.10, 0.02) == "better"
    assert classify(-0.01, 0.015, 0.002, 0.02) == "equivalent"
    assert classify(0.001, 0.019, 0.01, 0.02) == "equivalent"  # real, but smaller than it matters
    assert classify(-0.04, 0.01, -0.015, 0.02) == "undecided"
    assert classify(0.002, 0.03, 0.015, 0.02) == "undecided"  # real, size not known well enough
    assert classify(0.01, 0.05, 0.03, 0.02) == "better"  # as compare: |change| ≥ threshold


def test_fewer_than_two_usable_rounds_are_not_testable():
    assert paired_test([1.0], [1.0]) is None
    assert paired_test([1.0, 0.0], [1.0, 2.0]) is None  # a round without I/O is no pair
    assert "not testable" in verdict_line("x", None, ("A", "B"))


@pytest.mark.parametrize("n", [3, 5, 10])
def test_equal_sides_are_called_significant_at_most_5_percent_of_the_time(n):
    rng = np.random.default_rng(1000 + n)
    verdicts = [paired_test(*_rounds(rng, n, 1.0)).verdict for _ in range(TRIALS)]
    false = sum(v in ("better", "worse") for v in verdicts) / TRIALS
    print(
        f"ab stats: equal sides, {n} rounds: false 'significant' {false * 100:.1f} %, "
        f"equivalent {verdicts.count('equivalent') / TRIALS * 100:.1f} %"
    )
    assert false <= 0.05 + 2 * math.sqrt(0.05 * 0.95 / TRIALS)  # 5 % within sampling error


@pytest.mark.parametrize(("n", "needed"), [(3, 0.5), (5, 0.95)])
def test_a_10_percent_difference_is_detected(n, needed):
    rng = np.random.default_rng(2000 + n)
    tests = [paired_test(*_rounds(rng, n, 0.9)) for _ in range(TRIALS)]
    found = sum(t.verdict == "worse" for t in tests) / TRIALS
    covered = sum(t.ci_low <= 0.9 <= t.ci_high for t in tests) / TRIALS
    print(
        f"ab stats: B 10 % slower, {n} rounds: detected {found * 100:.1f} %, "
        f"interval covers the truth {covered * 100:.1f} %"
    )
    assert found >= needed
    assert covered >= 0.95 - 2 * math.sqrt(0.05 * 0.95 / TRIALS)


def test_interleaving_cancels_drift_that_fools_a_comparison_of_separate_runs():
    """The same drifting system, A's 5 runs then B's 5 (as two `run --repeat 5`)
    against 5 interleaved rounds: Welch's test calls equal sides different far
    more often than 5 %, the paired test does not."""
    rng = np.random.default_rng(3)
    unpaired = paired = 0
    for _ in range(TRIALS):
        drift = np.cumsum(rng.normal(0, DRIFT, 10))
        levels = 10_000 * np.exp(drift + rng.normal(0, NOISE, 10))
        test = welch_ratio(levels[:5].tolist(), levels[5:].tolist())
        unpaired += test.excludes_no_change() and abs(test.change) >= 0.02
        a, b = _rounds(rng, 5, 1.0)
        paired += paired_test(a, b).verdict in ("better", "worse")
    print(
        f"ab stats: drifting system, equal sides: separate runs 'significant' "
        f"{unpaired / TRIALS * 100:.1f} %, interleaved {paired / TRIALS * 100:.1f} %"
    )
    assert unpaired / TRIALS > 0.2 and paired / TRIALS <= 0.064


def test_auto_stops_early_on_a_clear_difference_and_rarely_errs_on_equal_sides():
    rng = np.random.default_rng(4)
    same = [_auto(rng, 1.0) for _ in range(TRIALS)]
    differ = [_auto(rng, 0.9) for _ in range(TRIALS)]
    false = sum(v in ("better", "worse") for v, _ in same) / TRIALS
    found = sum(v == "worse" for v, _ in differ) / TRIALS
    rounds = sum(n for _, n in differ) / TRIALS
    undecided = sum(v == "undecided" for v, _ in same) / TRIALS
    print(
        f"ab stats: auto (3 to 10 rounds): equal sides false 'significant' "
        f"{false * 100:.1f} %, undecided {undecided * 100:.1f} %, equivalent "
        f"{(1 - false - undecided) * 100:.1f} %; B 10 % slower detected {found * 100:.1f} % "
        f"in {rounds:.1f} rounds on average"
    )
    assert false <= 0.05 + 2 * math.sqrt(0.05 * 0.95 / TRIALS)
    assert found >= 0.99 and rounds <= 7


def test_auto_needs_three_rounds_and_stops_at_the_maximum():
    clear = ([100.0, 100.0, 100.0], [90.0, 90.0, 90.0])
    kw = {"max_rounds": 10, "confidence": 0.95, "threshold": 0.02}
    assert keep_going({"p": (clear[0][:2], clear[1][:2])}, rounds=2, **kw)
    assert not keep_going({"p": clear}, rounds=3, **kw)
    noisy = ([100.0, 120.0, 90.0], [110.0, 100.0, 95.0])
    assert keep_going({"p": noisy}, rounds=3, **kw)
    assert not keep_going({"p": noisy}, rounds=10, **kw)
    assert look_confidence(0.95, 10) == pytest.approx(1 - 0.05 / 4 / 7)
