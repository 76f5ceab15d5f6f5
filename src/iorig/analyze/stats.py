"""Small, dependency-free statistics: Student's t distribution, Welch's test
with a confidence interval for a ratio, and batch means for autocorrelated
per-second samples."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np


def _betacf(a: float, b: float, x: float) -> float:
    # Continued fraction for the incomplete beta function (modified Lentz).
    tiny = 1e-300
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 300):
        m2 = 2 * m
        aa = m * (b - m) * x / ((qam + m2) * (a + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c if abs(1.0 + aa / c) > tiny else tiny
        h *= d * c
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c if abs(1.0 + aa / c) > tiny else tiny
        delta = d * c
        h *= delta
        if abs(delta - 1.0) < 1e-14:
            break
    return h


def betainc(a: float, b: float, x: float) -> float:
    """Regularized incomplete beta I_x(a, b)."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    log_front = (
        math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    )
    front = math.exp(log_front)
    if x < (a + 1.0) / (a + b + 2.0):
        return front * _betacf(a, b, x) / a
    return 1.0 - front * _betacf(b, a, 1.0 - x) / b


def t_cdf(t: float, df: float) -> float:
    x = df / (df + t * t)
    tail = 0.5 * betainc(df / 2.0, 0.5, x)
    return 1.0 - tail if t > 0 else tail


def t_quantile(p: float, df: float) -> float:
    """Inverse of ``t_cdf`` by bisection (monotone, plenty fast for reports)."""
    if not 0.0 < p < 1.0:
        raise ValueError("p must be in (0, 1)")
    lo, hi = -1e3, 1e3
    for _ in range(200):
        mid = (lo + hi) / 2
        if t_cdf(mid, df) < p:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


@dataclass(frozen=True)
class RatioTest:
    """B relative to A from two samples of independent measurements."""

    ratio: float  # mean(B) / mean(A)
    ci_low: float  # confidence interval of the ratio
    ci_high: float
    p_value: float
    df: float
    n_a: int
    n_b: int
    confidence: float

    @property
    def change(self) -> float:
        return self.ratio - 1.0

    def excludes_no_change(self) -> bool:
        return self.ci_low > 1.0 or self.ci_high < 1.0


# Relative resolution of one measured rate: fio reports runtimes in
# milliseconds, so a 1 s repeat's rate is known to about 1 part in 1000.
RESOLUTION = 1e-3


def welch_ratio(
    a: Sequence[float], b: Sequence[float], confidence: float = 0.95
) -> RatioTest | None:
    """Welch's t-test on the logarithms of the samples.

    Working on logs turns the difference of means into a ratio, so the
    confidence interval is one for "B is x % of A" directly and stays
    positive. Returns None when either side has fewer than two positive
    values.

    A sample's variance is never taken below the resolution of a measured
    rate (``RESOLUTION``): storage held to an exact cap repeats the same
    figure to the I/O, and a spread of zero would leave a 27 % difference
    "not testable" when it is as certain as a measurement gets.
    """
    xa = np.log([v for v in a if v > 0])
    xb = np.log([v for v in b if v > 0])
    if xa.size < 2 or xb.size < 2:
        return None
    floor = RESOLUTION**2 / 12.0  # a uniform rounding error's variance
    va = max(float(xa.var(ddof=1)), floor) / xa.size
    vb = max(float(xb.var(ddof=1)), floor) / xb.size
    se = math.sqrt(va + vb)
    diff = float(xb.mean() - xa.mean())
    df = (va + vb) ** 2 / (va**2 / (xa.size - 1) + vb**2 / (xb.size - 1))
    t = diff / se
    p = 2.0 * (1.0 - t_cdf(abs(t), df))
    q = t_quantile(0.5 + confidence / 2.0, df)
    ratio = math.exp(diff)
    return RatioTest(
        ratio=ratio,
        ci_low=math.exp(diff - q * se),
        ci_high=math.exp(diff + q * se),
        p_value=max(0.0, min(1.0, p)),
        df=df,
        n_a=int(xa.size),
        n_b=int(xb.size),
        confidence=confidence,
    )


MIN_TEST_BATCHES = 4  # fewer batch means give a variance too poor to call anything significant
MIN_BATCH_S = 2
MIN_SECONDS = MIN_TEST_BATCHES * MIN_BATCH_S  # the shortest series batch means can test


def batch_means(
    values: Sequence[float], batches: int = 10, min_batch: int = MIN_BATCH_S
) -> list[float]:
    """Means of consecutive, equal batches of a per-second series.

    Per-second samples are autocorrelated (a slow second is followed by slow
    seconds), so treating them as independent overstates certainty. Means of
    batches several seconds long are much closer to independent. Fewer
    batches are used when the series is short; a remainder at the end is
    dropped so that all batches have the same length.
    """
    data = np.asarray([v for v in values if not math.isnan(v)], dtype=float)
    count = min(batches, data.size // min_batch)
    if count < MIN_TEST_BATCHES:
        return []  # too short to judge within one run (8 s at least): say untestable
    size = data.size // count
    return [float(data[i * size : (i + 1) * size].mean()) for i in range(count)]


def mean_interval(samples: Sequence[float], confidence: float) -> tuple[float, float] | None:
    """The Student-t interval of the mean of independent ``samples`` (repeat
    levels or batch means, never raw seconds); None with fewer than two."""
    data = np.asarray([v for v in samples if not math.isnan(v)], dtype=float)
    if data.size < 2:
        return None
    half = t_quantile(0.5 + confidence / 2, data.size - 1) * data.std(ddof=1) / math.sqrt(data.size)
    return float(data.mean() - half), float(data.mean() + half)


@dataclass(frozen=True)
class LimitShare:
    """A phase's throughput as a fraction of a limit, and the interval its
    own noise allows (analyze.precision.limit_share); no interval when it
    is too short to tell."""

    share: float
    low: float | None
    high: float | None
    method: str  # where the interval comes from

    @property
    def above(self) -> bool:
        """Above the limit beyond the noise: a cache or data reduction answered."""
        return self.low is not None and self.low > 1.0
