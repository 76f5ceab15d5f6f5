"""Whether iorig's figures for a job file are bare fio's, within the noise
measured in the same test (tests/test_fio_conformance.py).

Each figure (an example's phase's IOPS, bandwidth or a direction's p99) is
measured twice by bare fio and twice by iorig, run in turn. On the log
scale, a figure's difference is the mean of iorig's two less the mean of
fio's two; its noise σ is the spread of repeated runs of one tool. Two runs
alone say little of σ, so σ is pooled over the figures of a class (rates or
p99s, of direct or of buffered jobs: the page cache makes buffered jobs
several times as noisy), from every pair's difference, and never taken as
less than the figure's own pairs say. A difference fails when it exceeds
t·σ, t Student's at the pooled estimate's degrees of freedom and the level
that keeps the chance of any figure failing by noise alone at
FAMILY_FALSE_ALARM (Bonferroni); tests/test_conformance.py measures that
rate, and the rule's power, on simulated runs.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from iorig.analyze.stats import t_quantile

_t = functools.lru_cache(maxsize=None)(t_quantile)  # a bisection: once per level and df

FAMILY_FALSE_ALARM = 1e-4


@dataclass(frozen=True)
class Figure:
    """One figure of one example's phase: two bare fio runs, two iorig runs."""

    example: str
    phase: str
    metric: str  # "iops", "bytes_per_s" or "p99 <direction>"
    buffered: bool  # the job reads or writes through the page cache
    bare: tuple[float, float]
    ours: tuple[float, float]

    @property
    def noise_class(self) -> tuple[str, bool]:
        return ("p99" if self.metric.startswith("p99") else "rate", self.buffered)


@dataclass(frozen=True)
class Verdict:
    figure: Figure
    ratio: float  # iorig's geometric mean over fio's
    limit: float  # the ratio's bound either way (a factor)
    sigma: float  # the noise used (log scale)

    @property
    def agrees(self) -> bool:
        return max(self.ratio, 1 / self.ratio) <= self.limit

    def line(self) -> str:
        f = self.figure
        return (
            f"{f.example} [{f.phase}] {f.metric}: fio {f.bare[0]:.4g}, {f.bare[1]:.4g}; "
            f"iorig {f.ours[0]:.4g}, {f.ours[1]:.4g}: x{self.ratio:.3f} "
            f"(bound x{self.limit:.3f}, noise {100 * self.sigma:.1f} %)"
            + ("" if self.agrees else "  <-- differs")
        )


def limits(
    bare_log: np.ndarray, ours_log: np.ndarray, classes: Sequence[object]
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each figure's log difference (iorig's mean less fio's), the bound on
    its size, and its σ: ``bare_log`` and ``ours_log`` hold the two runs'
    log figures (..., figures, 2), ``classes`` each figure's noise class.
    Leading axes are independent sets (the statistical test's trials)."""
    count = bare_log.shape[-2]
    level = 1 - FAMILY_FALSE_ALARM / (2 * count)
    bare_pairs = bare_log[..., 0] - bare_log[..., 1]
    ours_pairs = ours_log[..., 0] - ours_log[..., 1]
    # σ² is Δ²/2 for a pair's difference Δ: the figure's own two pairs
    own = np.sqrt((bare_pairs**2 + ours_pairs**2) / 4)
    # the difference of two means of two: variance σ²/2 + σ²/2 = σ²
    difference = ours_log.mean(axis=-1) - bare_log.mean(axis=-1)
    sigma = np.empty_like(difference)
    bound = np.empty_like(difference)
    labels = np.array([str(c) for c in classes])
    for label in sorted(set(labels)):
        mine = labels == label
        pairs = 2 * int(mine.sum())  # degrees of freedom: one a pair
        squares = (bare_pairs[..., mine] ** 2 + ours_pairs[..., mine] ** 2).sum(-1, keepdims=True)
        sigma[..., mine] = np.maximum(np.sqrt(squares / (2 * pairs)), own[..., mine])
        bound[..., mine] = _t(level, pairs) * sigma[..., mine]
    return difference, bound, sigma


def judge(figures: Sequence[Figure]) -> list[Verdict]:
    """Each figure's verdict, its noise pooled over the figures of its class."""
    if not figures:
        return []
    bare = np.log([f.bare for f in figures])
    ours = np.log([f.ours for f in figures])
    difference, bound, sigma = limits(bare, ours, [f.noise_class for f in figures])
    return [
        Verdict(f, math.exp(d), math.exp(b), s)
        for f, d, b, s in zip(figures, difference, bound, sigma, strict=True)
    ]
