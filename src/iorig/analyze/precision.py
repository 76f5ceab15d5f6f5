"""How precise is a phase's per-second median, and when to stop measuring.

The interval (``median_interval``) is Woodruff's for a median, with the
variance taken from batch means so that it holds for autocorrelated seconds:

* The median is estimated from every second. Its interval is the pair of
  sample quantiles ``0.5 ∓ t·se``, where ``se`` is the standard error of the
  fraction of seconds below the median. For independent seconds
  ``se = 0.5/√n`` and this is the order-statistic (binomial) interval of
  Le Boudec (2010, §2.2); it assumes nothing about the distribution of the
  seconds, so heavy tails and skew (a throughput's slow seconds) do not
  matter and the interval is the same for IOPS as for MiB/s.
* Seconds are autocorrelated (a slow second is followed by slow seconds),
  so ``se`` is estimated from the means of that fraction over batches of
  ``b`` consecutive seconds, with a t quantile on ``k - 1`` degrees of
  freedom. ``b`` is the shortest batch whose means have a lag-1
  correlation ≤ ``MAX_BATCH_LAG1``, judged from the lag-1 correlation of
  the ranks of all seconds (precise, unlike one of ten batch means) under
  the short memory of an AR(1) process; the correlation ``r`` that remains
  is corrected for in ``se`` by the AR(1) variance factor ``(1 + r)/(1 - r)``.
  Fewer than ``MIN_INTERVAL_BATCHES`` batches give no interval, so a series too
  correlated for its length gets none; a step gets one spanning both levels.
* Why ``MAX_BATCH_LAG1`` is 0.45, not a stricter 0.2: a short series offers
  only one-second batches, and the lag-1 estimated from 10 seconds is noisy
  (sd ≈ 0.3), so 0.2 refused 17 % of steady 10 s series, and the
  refusals were not the correlated ones (a 60 s series at φ 0.8 was
  covered 84 % of the times it got an interval). With the exact factor and
  0.45: 2 % of steady 10 s series refused, 95 % coverage at 60 s φ 0.8,
  96–97 % at 300 s (``tests/test_precision.py``).
* Seconds all within ``RESOLUTION`` of the median are constant to what one
  logged second is known to; their interval is that resolution.

Why not the order-statistic interval on batch medians: with ten batches its
coverage jumps between 89 % and 98 % (the binomial is coarse), and the
median of batch medians is not the median of the seconds when they are
skewed. Why not a t interval on batch means: that is the mean's interval.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from functools import lru_cache

import numpy as np

from iorig.analyze.stats import RESOLUTION, LimitShare, batch_means, mean_interval, t_quantile
from iorig.analyze.stoprule import CounterRates
from iorig.model import PrecisionState

MIN_INTERVAL_BATCHES = 8  # fewer leave the standard error too uncertain to trust
MAX_BATCH_LAG1 = 0.45  # residual correlation between batch means, corrected for
METHOD = "woodruff-batch-means"
# The coverage claimed for the interval at the stop: each look is at
# CHECK_CONFIDENCE, which keeps the whole sequential procedure at 95 % or more.
REPORTED_CONFIDENCE = 0.95


@dataclass(frozen=True)
class MedianInterval:
    """The per-second median and its interval; ``low``/``high`` are None
    when there is none, and ``why`` says why."""

    median: float
    low: float | None
    high: float | None
    half_width_pct: float | None  # the larger side, as % of the median
    seconds: int
    batch_s: int | None
    confidence: float
    method: str = METHOD
    why: str = ""

    @property
    def known(self) -> bool:
        return self.half_width_pct is not None

    def contains(self, value: float) -> bool:
        return self.low is not None and self.high is not None and self.low <= value <= self.high


@lru_cache(maxsize=4096)
def _t(p: float, df: int) -> float:
    return t_quantile(p, df)  # a bisection: cached, it is asked the same often


def _ranks(values: np.ndarray, order: np.ndarray, ordered: np.ndarray) -> np.ndarray:
    if np.any(ordered[1:] == ordered[:-1]):
        # average ranks: ties broken by time would look like a trend
        _, inverse, counts = np.unique(values, return_inverse=True, return_counts=True)
        return (np.cumsum(counts) - (counts - 1) / 2.0)[inverse]
    ranks = np.empty(values.size)
    ranks[order] = np.arange(1.0, values.size + 1.0)
    return ranks


def _quantile(ordered: np.ndarray, q: float) -> float:
    """numpy's default (linear) quantile of sorted values, without its overhead."""
    position = q * (ordered.size - 1)
    below = min(int(position), ordered.size - 1)
    above = min(below + 1, ordered.size - 1)
    return float(ordered[below] + (position - below) * (ordered[above] - ordered[below]))


def lag1(values: np.ndarray) -> float:
    """Lag-1 autocorrelation (0 for a constant)."""
    centred = values - values.mean()
    denominator = float(centred @ centred)
    return float(centred[:-1] @ centred[1:]) / denominator if denominator > 0 else 0.0


def batch_lag1(rho: float, batch_s: np.ndarray) -> np.ndarray:
    """Lag-1 correlation of the means of consecutive batches of an AR(1)
    series whose seconds have lag-1 correlation ``rho``."""
    b = np.asarray(batch_s, dtype=float)
    if rho <= 0.0:
        return np.zeros_like(b)
    geometric = (1.0 - rho**b) / (1.0 - rho)
    covariance = rho * geometric**2  # between neighbouring batch sums
    variance = b * (1.0 + rho) / (1.0 - rho) - 2.0 * rho * geometric / (1.0 - rho)
    return covariance / variance


def _none(median: float, n: int, confidence: float, why: str) -> MedianInterval:
    return MedianInterval(median, None, None, None, n, None, confidence, why=why)


def median_interval(series: Sequence[float], confidence: float = 0.95) -> MedianInterval:
    """The ``confidence`` interval of the median of a per-second series."""
    values = np.asarray(series, dtype=float)
    values = values[np.isfinite(values)]
    n = int(values.size)
    order = np.argsort(values, kind="stable")
    ordered = values[order]
    median = _quantile(ordered, 0.5) if n else math.nan
    if n < MIN_INTERVAL_BATCHES:
        return _none(median, n, confidence, f"{n} s: at least {MIN_INTERVAL_BATCHES} are needed")
    margin = RESOLUTION * abs(median) * (1.0 + 1e-9)  # 1e-9: 2002 vs 2000 is 0.1 % exactly
    if ordered[0] >= median - margin and ordered[-1] <= median + margin:
        # every second within what one logged second is known to: constant at
        # that resolution, however the seconds alternate (a capped device's
        # 2000, 2002, 2002, 2000 … would otherwise read as correlated)
        return _resolved(
            MedianInterval(median, median, median, 0.0, n, 1, confidence, why="constant")
        )
    # seconds within that resolution of the median are ties with it: their
    # order is the log's jitter, whose runs (2000, 2002, 2002, 2000) would
    # read as correlation beside one second outside it
    known = np.where(np.abs(values - median) <= margin, median, values)
    known_order = np.argsort(known, kind="stable")
    rho = min(max(lag1(_ranks(known, known_order, known[known_order])), 0.0), 0.99)
    lengths = np.arange(1, n // MIN_INTERVAL_BATCHES + 1)
    residual = batch_lag1(rho, lengths)
    fit = np.nonzero(residual <= MAX_BATCH_LAG1)[0]
    if fit.size == 0:
        return _none(
            median,
            n,
            confidence,
            f"{n} s: seconds too correlated (lag-1 {rho:.2f}) for {MIN_INTERVAL_BATCHES} "
            "independent batches — not steady, or too short",
        )
    batch_s = int(lengths[fit[0]])
    count = n // batch_s
    below = (values < median) + 0.5 * (values == median)
    # the latest whole batches: a live series drops its oldest remainder
    fractions = below[n - count * batch_s :].reshape(count, batch_s).mean(axis=1)
    # the correlation left between batches: the variance of a mean of AR(1)
    # terms with lag-1 r is (1 + r) / (1 - r) times the independent one's
    left = float(residual[fit[0]])
    inflation = (1.0 + left) / (1.0 - left)
    centred = fractions - fractions.mean()
    se = math.sqrt(float(centred @ centred) / (count - 1) * inflation / count)
    # a batch variance of 0 (every batch half below) is luck, not certainty
    se = max(se, 0.5 / math.sqrt(n) / 2.0)
    step = _t(0.5 + confidence / 2.0, count - 1) * se
    low = _quantile(ordered, max(0.0, 0.5 - step))
    high = _quantile(ordered, min(1.0, 0.5 + step))
    half = max(median - low, high - median) / abs(median) * 100 if median else math.inf
    return _resolved(MedianInterval(median, low, high, half, n, batch_s, confidence))


MIN_SECONDS_ALL_ABOVE = 3  # too short for an interval: every one of 3 seconds above


def limit_share(
    level: float, per_second: Sequence[float], limit: float, repeat_levels: Sequence[float] = ()
) -> LimitShare:
    """``level`` (a phase mean: fio's bytes or I/Os over its runtime) /
    ``limit`` and the interval its noise allows, scaled to the level: the
    interval of the mean of the repeats' levels (two or more), else of the
    mean of its seconds (batch means, allowing for autocorrelation), else,
    too short for two batches, the range of its seconds (above only when
    its slowest second was). The mean's own interval, not the median
    second's: a throttle lets a phase's first second through several per
    cent over its cap, which moves the mean and not the median, so a device
    exactly at its cap read 100.5 % of it with the median's narrow interval
    entirely above 100 % (docs/methodology.md §7). Never narrower than what
    one logged second is known to (``RESOLUTION``): identical repeats or
    seconds a hair over a cap are not above it."""
    share = level / limit
    samples = list(repeat_levels) if len(repeat_levels) >= 2 else batch_means(per_second)
    interval = mean_interval(samples, REPORTED_CONFIDENCE)
    method = "repeats" if len(repeat_levels) >= 2 else "batch means of its seconds"
    centre = float(np.mean(samples)) if samples else math.nan
    if interval is None or not centre > 0:
        seconds = np.asarray(per_second, dtype=float)
        seconds = seconds[np.isfinite(seconds)]
        if seconds.size < MIN_SECONDS_ALL_ABOVE or not seconds.mean() > 0:
            return LimitShare(share, None, None, "none")
        interval, centre = (float(seconds.min()), float(seconds.max())), float(seconds.mean())
        method = "the range of its seconds"
    low = min(share * interval[0] / centre, share * (1 - RESOLUTION))
    high = max(share * interval[1] / centre, share * (1 + RESOLUTION))
    return LimitShare(share, low, high, method)


def _resolved(interval: MedianInterval) -> MedianInterval:
    """The interval reaching at least ``RESOLUTION`` of the median on either
    side: what one per-second figure is known to (fio times its windows in
    ms and logs whole I/Os and KiB/s). A capped device repeats one or two
    logged values second after second, and an interval narrower than that
    would exclude another run's median that differs by one logged unit. A
    floor, not an addition: a noisy series' interval is wider anyway and its
    coverage stays as measured."""
    if interval.low is None or interval.high is None or interval.half_width_pct is None:
        return interval
    median = interval.median
    margin = RESOLUTION * abs(median)
    low, high = min(interval.low, median - margin), max(interval.high, median + margin)
    half = max(median - low, high - median) / abs(median) * 100 if median else math.inf
    return replace(interval, low=low, high=high, half_width_pct=half)


def describe(interval: MedianInterval) -> str:
    """'±3.4 % after 60 s', or why there is no interval."""
    if interval.half_width_pct is None:
        return f"no interval after {interval.seconds} s ({interval.why})"
    return f"±{interval.half_width_pct:.1f} % after {interval.seconds} s"


# Checking after every second would test the same hypothesis ~max_s times and
# stop on the first lucky narrow interval. Checks are spaced geometrically
# (each 10 % later than the last), so a 10 min phase is checked ~40 times,
# not 600, and consecutive checks share most seconds.
CHECK_GROWTH = 1.1
# Stopping at the first narrow interval favours intervals that came out too
# narrow by chance; each check therefore uses a 99 % interval, so that the
# interval at the stop covers the median ≥ 95 % of the time (measured in
# tests/test_precision.py: 87 % checking every second at 95 %, 95.6 % so).
CHECK_CONFIDENCE = 0.99


@dataclass(frozen=True)
class Decision:
    stop: bool
    precise: bool  # stopped (or may stop) because the interval is narrow enough
    reason: str
    interval: MedianInterval | None  # None between checks


@dataclass(frozen=True)
class StoppingRule:
    """Stop once the median is known to ±``target_pct`` (CONFIRM, Maricq et
    al. 2018): never before ``min_s``, always at ``max_s``."""

    target_pct: float
    max_s: int
    min_s: int = 10
    confidence: float = CHECK_CONFIDENCE  # of each check; see CHECK_CONFIDENCE
    growth: float = CHECK_GROWTH  # 1.0: check every second (for measuring the cost)

    def checks_at(self, seconds: int) -> bool:
        """True at the seconds the interval is looked at."""
        if seconds >= self.max_s or seconds == self.min_s:
            return True
        if seconds < self.min_s:
            return False
        if self.growth <= 1.0:
            return True
        step = math.log(self.growth)

        def index(s: int) -> int:
            return math.floor(math.log(s / self.min_s) / step + 1e-9)

        return index(seconds) > index(seconds - 1)

    def decide(self, series: Sequence[float]) -> Decision:
        seconds = len(series)
        asked = f"asked ±{self.target_pct:g} %"
        if not self.checks_at(seconds):
            return Decision(False, False, f"{seconds} s: not a check point", None)
        interval = median_interval(series, self.confidence)
        narrow = interval.known and interval.half_width_pct <= self.target_pct
        if narrow:
            return Decision(True, True, f"{describe(interval)}, {asked}", interval)
        if seconds >= self.max_s:
            return Decision(True, False, f"{describe(interval)}, {asked}", interval)
        return Decision(False, False, f"{describe(interval)}, {asked}: measuring on", interval)


def precision_state(
    series: Sequence[float], metric: str, target_pct: float, min_s: float, max_s: float
) -> PrecisionState:
    """How precisely a finished ``until: precise`` phase knows its median:
    the stopping rule's interval over every second it measured (one verdict
    for every backend, from the stored series; a live stop only ends fio)."""
    interval = median_interval(series, CHECK_CONFIDENCE)  # the rule's own looks
    precise = interval.known and interval.half_width_pct <= target_pct
    return PrecisionState(
        metric="bytes_per_s" if metric == "bytes_per_s" else "iops",
        target_pct=target_pct,
        min_s=min_s,
        max_s=max_s,
        precise=bool(precise),
        seconds=interval.seconds,
        median=interval.median,
        low=interval.low,
        high=interval.high,
        achieved_pct=interval.half_width_pct,
        confidence=REPORTED_CONFIDENCE,
        batch_s=interval.batch_s,
        why=interval.why,
    )


def precision_text(state: PrecisionState) -> str:
    """'±1.2 % after 14 s, asked ±2 %', or why it is not known."""
    asked = f"asked ±{state.target_pct:g} %"
    if state.achieved_pct is None:
        return f"no interval after {state.seconds} s ({state.why}), {asked}"
    return f"±{state.achieved_pct:.1f} % after {state.seconds} s, {asked}"


STOP_ARTIFACT_S = 2  # seconds at the end of a phase fio was asked to stop that the stop distorts

# fio's live status counters and its per-second logs are two views of the same
# I/O whose one-second windows do not line up, so their intervals differ by a
# few tenths of a percent either way (far more on a device that completes in
# bursts). The stored verdict is judged on the logs (the series every figure
# comes from); a rule fed from the counters would leave about half its stops
# just short of the asked width there, so it must see LIVE_MARGIN of it. Fed
# the logged seconds themselves (run/local.py, RuleFeed), it needs none.
LIVE_MARGIN = 0.8


class PrecisionWatch:
    """Per-second rates of a running phase from fio's cumulative status
    counters, and whether the median is known well enough to stop: a
    ``StopRule`` (``analyze/stoprule.py``)."""

    def __init__(
        self,
        target_pct: float,
        min_s: float,
        max_s: float,
        metric: str,
        *,
        skip_s: float = 0.0,
        margin: float = LIVE_MARGIN,
        stop_artifact_s: int = STOP_ARTIFACT_S,
    ) -> None:
        # the stored series loses the seconds the stop distorts: it must still
        # hold the minimum the rule was asked for
        self.rule = StoppingRule(
            target_pct * margin, max_s=int(max_s), min_s=int(min_s) + stop_artifact_s
        )
        self.metric = metric
        self.skip_s = skip_s  # ramp time: not measured
        self.series: list[float] = []
        self._rates = CounterRates(metric, 1.0)
        self.decision: Decision | None = None

    def describe(self) -> str:
        head = f"precision: {len(self.series)} s measured"
        interval = self.decision.interval if self.decision is not None else None
        if interval is None or interval.half_width_pct is None:
            return f"{head}, no interval yet (from {self.rule.min_s} s)"
        return (
            f"{head}; median known to ±{interval.half_width_pct:.1f} % "
            f"(stops at ±{self.rule.target_pct:.1f} %, by {self.rule.max_s} s)"
        )

    def feed(self, t_ms: int, elapsed_s: float, ios: float, io_bytes: float) -> bool:
        """Counters at ``t_ms``; True once the rule says stop on precision."""
        if elapsed_s <= self.skip_s:
            self._rates.reset()
            return False
        rate = self._rates.feed(t_ms, ios, io_bytes)
        if rate is None:
            return False
        self.series.append(rate)
        decision = self.rule.decide(self.series)
        if decision.interval is not None:
            self.decision = decision
        return decision.stop and decision.precise
