"""The conformance test's rule (tests/conformance.py) as a statistic: on
simulated runs with a known answer, how often it calls equal tools
different (its false alarm over the whole set of figures) and how often it
catches the differences the issue found (2x, +38 %)."""

from __future__ import annotations

import numpy as np
import pytest
from tests.conformance import FAMILY_FALSE_ALARM, Figure, judge, limits

FIGURES = 40  # about the conformance set's: 11 examples, 1-4 phases, 3 figures


def _runs(rng, sigmas: np.ndarray, shift: float, trials: int) -> tuple[np.ndarray, np.ndarray]:
    """Log figures of ``trials`` simulated sets: two bare runs and two of a
    tool off by ``shift``, each figure with its own noise."""
    shape = (trials, len(sigmas), 2)
    bare = rng.normal(0.0, 1.0, shape) * sigmas[:, None]
    ours = rng.normal(0.0, 1.0, shape) * sigmas[:, None] + np.log(shift)
    return bare, ours


def _failing_sets(rng, sigmas, trials, classes) -> float:
    """The share of ``trials`` sets of equal tools with any figure failing."""
    difference, bound, _ = limits(*_runs(rng, sigmas, 1.0, trials), classes)
    return float(np.any(np.abs(difference) > bound, axis=-1).mean())


@pytest.mark.parametrize("noise", ["same", "by class", "uneven"])
def test_equal_tools_are_called_different_no_more_than_the_family_rate(noise):
    """100 000 simulated sets of 40 figures with no difference: the share of
    sets with any figure failing is within a binomial band of the rate the
    rule is set for. "by class": half the figures, marked buffered, three
    times as noisy as the others. "uneven": within one class, each figure's
    noise drawn between 4 and 8 % (jobs that differ), which the pooling
    does not model: held to ten times the rate, one suite in a thousand
    (measured 0.00075; 3 to 9 % gave 0.0026)."""
    rng = np.random.default_rng(470)
    trials = 100_000
    sigmas, buffered = np.full(FIGURES, 0.05), np.zeros(FIGURES, bool)
    if noise == "by class":
        sigmas[::2], buffered[::2] = 0.15, True
    if noise == "uneven":
        sigmas = rng.uniform(0.04, 0.08, FIGURES)
    failed = _failing_sets(rng, sigmas, trials, buffered.tolist())
    band = 4 * np.sqrt(FAMILY_FALSE_ALARM / trials)
    allowed = FAMILY_FALSE_ALARM * (10 if noise == "uneven" else 1) + band
    print(f"conformance rule, {noise} noise: {failed:.5f} of sets called different")
    assert failed <= allowed


@pytest.mark.parametrize(("shift", "least"), [(2.0, 0.99), (1.38, 0.65)])
def test_the_differences_the_issue_found_are_caught(shift, least):
    """One figure of 40 off by 2x or +38 % (issue 47's rand-RW and
    rand-write) at 5 % noise: caught in at least ``least`` of 20 000 sets
    (measured 0.9985 and 0.726 at the rule's 1e-4)."""
    rng = np.random.default_rng(471)
    bare, ours = _runs(rng, np.full(FIGURES, 0.05), 1.0, 20_000)
    ours[:, -1, :] += np.log(shift)
    difference, bound, _ = limits(bare, ours, [False] * FIGURES)
    caught = float((np.abs(difference[:, -1]) > bound[:, -1]).mean())
    assert caught >= least, caught


def test_a_figure_reads_as_its_ratio_and_bound():
    quiet = [
        Figure("x", "p", "iops", False, (100.0 * (1 + i % 3 / 100), 101.0), (102.0, 100.0))
        for i in range(10)
    ]
    off = Figure("x", "q", "iops", False, (100.0, 101.0), (200.0, 205.0))
    *same, differs = judge([*quiet, off])
    assert all(v.agrees for v in same) and not differs.agrees
    assert differs.ratio == pytest.approx(((200 * 205) / (100 * 101)) ** 0.5)
    assert "<-- differs" in differs.line() and "x [q] iops" in differs.line()
