"""Concurrency search: where more outstanding I/O stops paying (docs/methodology.md §7, "Knee").

The rule: sweep concurrency c = jobs × iodepth geometrically (1, 2, 4 …) and
stop when a doubling gains less than ``min_gain`` (default 10 %), when p99
latency breaks the SLO, when throughput falls, or at the maximum; refine
between the last two points; re-measure the best few so that the answer is a
band with its noise, not one lucky 5 s point (a single point varies 10–15 %
run to run). Little's law (outstanding = IOPS × latency) checks that the
generator really kept the requested depth, and the Universal Scalability Law
X(N) = λN / (1 + σ(N−1) + κN(N−1)) (Gunther) summarises sparse points.

Gains are compared per doubling everywhere, so that refined points (not
powers of two) and capped last steps are judged like the doublings:
g = (X2 / X1) ** (1 / log2(c2 / c1)) − 1.

The driver that runs fio is elsewhere; these functions only decide and measure.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from itertools import pairwise
from typing import NamedTuple

import numpy as np

from iorig.analyze.stats import RESOLUTION, t_quantile
from iorig.units import format_latency


@dataclass(frozen=True)
class Point:
    concurrency: int  # jobs × iodepth requested
    throughput: float  # the headline metric: IOPS or bytes/s (caller decides)
    iops: float
    lat_mean_ns: float  # mean completion latency (fio clat)
    total_lat_mean_ns: float  # mean of slat+clat (fio "lat"): time in flight, for Little's law
    lat_p99_ns: float  # from merged histograms
    # the throughput's band as a fraction of it (its readings' noise); 0: unknown
    noise: float = 0.0


@dataclass(frozen=True)
class KneeRule:
    min_gain: float = 0.10  # a doubling must gain at least this fraction
    slo_p99_ns: float | None = None  # optional SLO on p99
    max_concurrency: int = 1024


def gain_per_doubling(c1: float, x1: float, c2: float, x2: float) -> float:
    """Fractional throughput gain from c1 to c2, normalised to one doubling."""
    if c2 <= c1:
        raise ValueError(f"concurrency must increase, got {c1} then {c2}")
    if x1 <= 0:
        return math.inf if x2 > 0 else 0.0
    return (x2 / x1) ** (1.0 / math.log2(c2 / c1)) - 1.0


def _meets_slo(point: Point, rule: KneeRule) -> bool:
    return rule.slo_p99_ns is None or point.lat_p99_ns <= rule.slo_p99_ns


def _sorted_unique(points: Sequence[Point]) -> list[Point]:
    ordered = sorted(points, key=lambda p: p.concurrency)
    for a, b in pairwise(ordered):
        if a.concurrency == b.concurrency:
            # repeats belong in plateau(); one point per concurrency here
            raise ValueError(f"two points at concurrency {a.concurrency}: pass one per concurrency")
    return ordered


def _pct(fraction: float) -> str:
    return f"{fraction * 100:+.1f} %"


def _step_text(c1: int, c2: int) -> str:
    return f"from {c1} to {c2}" if c2 == 2 * c1 else f"per doubling from {c1} to {c2}"


# --- the doubling stage -------------------------------------------------------


def _stop(
    points: Sequence[Point], rule: KneeRule, *, past_dip: bool = True
) -> tuple[str, str] | None:
    """(kind, why) the doubling stage should stop after the latest point, or
    None to go on. Kinds, checked in this order on the latest point: "slo" (a
    hard limit), "fall" (throughput fell), "gain" (a gain under ``min_gain``
    per doubling), "max" (the maximum concurrency). ``past_dip``: a first
    fall is looked past (one more doubling) instead of stopping."""
    if not points:
        return None
    ordered = _sorted_unique(points)
    last = ordered[-1]
    if not _meets_slo(last, rule):
        assert rule.slo_p99_ns is not None
        return "slo", (
            f"p99 {format_latency(last.lat_p99_ns)} at {last.concurrency} breaks the SLO "
            f"p99 ≤ {format_latency(rule.slo_p99_ns)}"
        )
    if len(ordered) >= 2:
        prev = ordered[-2]
        best = max(ordered[:-1], key=lambda p: (p.throughput, -p.concurrency))
        fall = 1.0 - last.throughput / prev.throughput if prev.throughput > 0 else 0.0
        # a fall within what the two points are known to is a flat step, judged
        # as a small gain is: a 0.03 % drop had sent the search a doubling on
        if fall > max(prev.noise, last.noise, RESOLUTION):
            why = (
                f"throughput fell by {fall * 100:.1f} % from {prev.concurrency} "
                f"to {last.concurrency}"
            )
            # one dip (a throttle's slice, a flush) must not end the curve where
            # it may still climb: one doubling past it is measured, unless the
            # step before was no gain either (the curve is past its peak)
            if not past_dip or prev is not best or last.concurrency >= rule.max_concurrency:
                return "fall", why
            return None
        # judged against the best point before: the previous one, or, climbing
        # back from a dip, the best before the dip
        gain = gain_per_doubling(
            best.concurrency, best.throughput, last.concurrency, last.throughput
        )
        if gain < rule.min_gain:
            after = "" if prev is best else f"after a dip at {prev.concurrency}, a "
            return "gain", (
                f"{after}gain of {_pct(gain)} {_step_text(best.concurrency, last.concurrency)} "
                f"is under {rule.min_gain * 100:g} %"
            )
    if last.concurrency >= rule.max_concurrency:
        return "max", f"reached the maximum concurrency {rule.max_concurrency}"
    return None


def doubling_stop(points: Sequence[Point], rule: KneeRule) -> str | None:
    """Why the doubling stage should stop after the latest point, or None to
    go on: past a first fall it goes one doubling further, and a climb back
    from that dip is judged against the best point before it."""
    found = _stop(points, rule)
    return found[1] if found else None


def stops_on_throughput(points: Sequence[Point], rule: KneeRule) -> bool:
    """Whether the doubling stage would stop because the last step's
    throughput fell or gained too little: a verdict one noisy point can give
    (a single short point varies 10–15 % run to run), so the search measures
    that step again before it believes it."""
    found = _stop(points, rule, past_dip=False)
    return found is not None and found[0] in ("fall", "gain")


def next_doubling(points: Sequence[Point], rule: KneeRule) -> int | None:
    """The next concurrency of the doubling stage, or None when it should stop.

    Starts at 1. A doubling that would overshoot the maximum is capped at the
    maximum, so the maximum itself is always measured (its gain is normalised
    per doubling like any other step).
    """
    if not points:
        return 1
    if doubling_stop(points, rule) is not None:
        return None
    last = max(p.concurrency for p in points)
    return min(2 * last, rule.max_concurrency)


def refine_between(lo: int, hi: int, measured: set[int], count: int = 1) -> list[int]:
    """Concurrencies to try strictly between two measured points.

    Geometric points, because throughput curves are read on a log axis of
    concurrency and gains are per doubling: ``count`` = 1 gives round(√(lo·hi))
    (16, 32 → [23]); ``count`` = k splits the step into k + 1 equal ratios.
    Points already measured, at the ends, or repeated by rounding are dropped,
    so the list may be shorter than ``count`` (empty when hi − lo < 2).
    """
    if lo > hi:
        lo, hi = hi, lo
    if hi - lo < 2 or lo < 1:
        return []
    ratio = hi / lo
    out: list[int] = []
    for k in range(1, count + 1):
        c = round(lo * ratio ** (k / (count + 1)))
        if lo < c < hi and c not in measured and c not in out:
            out.append(c)
    return out


# --- the knee -----------------------------------------------------------------


class Step(NamedTuple):
    c1: int
    c2: int
    gain_per_doubling: float  # fraction, e.g. 0.25 for +25 %
    added_per_unit: float  # added throughput per added unit of concurrency


@dataclass(frozen=True)
class Knee:
    point: Point | None  # None when every point breaks the SLO
    reason: str
    efficiency: tuple[Step, ...]  # consecutive measured points, all of them
    slo_best: Point | None  # highest throughput with p99 ≤ SLO; None without an SLO
    # the curve never flattened: ``point`` is the highest measured, and the
    # knee lies beyond it. Every table, chart and sentence says so from here
    beyond: bool = False

    @property
    def where(self) -> str:
        """The knee's place in words: "16", "beyond 16" or "-"."""
        if self.point is None:
            return "-"
        return f"beyond {self.point.concurrency}" if self.beyond else str(self.point.concurrency)


def _steps(points: list[Point]) -> tuple[Step, ...]:
    return tuple(
        Step(
            a.concurrency,
            b.concurrency,
            gain_per_doubling(a.concurrency, a.throughput, b.concurrency, b.throughput),
            (b.throughput - a.throughput) / (b.concurrency - a.concurrency),
        )
        for a, b in pairwise(points)
    )


def find_knee(points: Sequence[Point], rule: KneeRule) -> Knee:
    """The knee of a measured concurrency curve.

    Definition: among the points that meet the SLO (the others are not
    eligible, neither as the knee nor as evidence that more concurrency pays),
    the knee is the lowest concurrency c such that no eligible point above c
    gains ≥ ``min_gain`` per doubling over c. Every higher point is compared,
    not only the next, so one noisy dip does not stop the curve early; a curve
    that falls after its peak has its knee at the peak or below, never after.
    When the curve never flattens, the knee is the highest eligible point and
    the reason says the knee lies beyond it.
    """
    if not points:
        raise ValueError("find_knee needs at least one point")
    ordered = _sorted_unique(points)
    eligible = [p for p in ordered if _meets_slo(p, rule)]
    excluded = [p for p in ordered if not _meets_slo(p, rule)]
    slo_best = None
    if rule.slo_p99_ns is not None and eligible:
        slo_best = max(eligible, key=lambda p: (p.throughput, -p.concurrency))
    steps = _steps(ordered)
    if not eligible:
        assert rule.slo_p99_ns is not None
        lowest = min(ordered, key=lambda p: p.lat_p99_ns)
        return Knee(
            None,
            f"every point breaks the SLO p99 ≤ {format_latency(rule.slo_p99_ns)} (lowest p99 "
            f"{format_latency(lowest.lat_p99_ns)} at {lowest.concurrency})",
            steps,
            None,
        )
    slo_note = ""
    if excluded:
        assert rule.slo_p99_ns is not None
        above = [p.concurrency for p in excluded if p.concurrency > eligible[0].concurrency]
        if above:
            slo_note = (
                f"; {', '.join(map(str, above))} excluded: p99 above the SLO "
                f"{format_latency(rule.slo_p99_ns)}"
            )
    threshold = f"{rule.min_gain * 100:g} %"
    for i, p in enumerate(eligible):
        higher = eligible[i + 1 :]
        gains = [
            gain_per_doubling(p.concurrency, p.throughput, q.concurrency, q.throughput)
            for q in higher
        ]
        if any(g >= rule.min_gain for g in gains):
            continue
        if not higher:
            if i == 0:
                reason = f"only one eligible point, {p.concurrency}"
                return Knee(p, reason + slo_note, steps, slo_best)
            prev = eligible[i - 1]
            g = gain_per_doubling(prev.concurrency, prev.throughput, p.concurrency, p.throughput)
            if any(e.concurrency > p.concurrency for e in excluded):
                where = f"{p.concurrency}, the highest concurrency within the SLO"
            elif p.concurrency >= rule.max_concurrency:
                where = f"{p.concurrency}, the maximum concurrency"
            else:
                where = f"{p.concurrency}, the highest concurrency measured"
            reason = (
                f"no knee up to {where}: the last step still gained {_pct(g)} per doubling "
                f"(≥ {threshold}), so the knee lies beyond it"
            )
            return Knee(p, reason + slo_note, steps, slo_best, beyond=True)
        best_gain = max(gains)
        q = higher[gains.index(best_gain)]
        reason = (
            f"no higher concurrency gains ≥ {threshold} per doubling over {p.concurrency} "
            f"(best: {_pct(best_gain)} per doubling at {q.concurrency})"
        )
        return Knee(p, reason + slo_note, steps, slo_best)
    raise AssertionError("unreachable: the highest eligible point always qualifies")


def top_candidates(points: Sequence[Point], k: int = 3, rule: KneeRule | None = None) -> list[int]:
    """Concurrencies of the k highest-throughput points meeting the SLO, best first.

    Ties go to the lower concurrency (cheaper for the same result).
    """
    pool = [p for p in points if rule is None or _meets_slo(p, rule)]
    pool.sort(key=lambda p: (-p.throughput, p.concurrency))
    return [p.concurrency for p in pool[:k]]


# --- Little's law -------------------------------------------------------------


@dataclass(frozen=True)
class LittleCheck:
    outstanding: float  # mean I/Os in flight = IOPS × time in flight
    requested: int
    ratio: float  # outstanding / requested
    short: bool
    message: str
    deeper: bool = False  # more in flight than requested: the engine ran a deeper queue


# fio has only as many I/O units as its depth, so L cannot exceed it but by
# the I/Os across the run's edges (mean latency ÷ runtime: 0.03 % for 0.3 ms
# in a 1 s point); honoured depths measured 0.98–1.00 here (libaio 3 and 11,
# io_uring 1, 2 and 4, psync), io_uring at 3 in fio 3.33 1.32
MAX_RATIO = 1.05


def littles_law(point: Point, min_ratio: float = 0.8) -> LittleCheck:
    """Outstanding I/O from Little's law (L = λW) against the requested depth.

    Uses slat+clat, the whole time an I/O is in flight; clat alone would
    understate L when submission is slow. Below ``min_ratio`` the generator
    did not keep the requested depth, so the point measures less load than
    its label says; above ``MAX_RATIO`` the engine kept more in flight than
    asked (io_uring before fio 3.39 rounds iodepth up to a power of two).
    """
    if point.concurrency <= 0:
        raise ValueError(f"concurrency must be positive, got {point.concurrency}")
    outstanding = point.iops * point.total_lat_mean_ns / 1e9
    ratio = outstanding / point.concurrency
    short = ratio < min_ratio
    deeper = ratio > MAX_RATIO
    text = f"{outstanding:.1f} I/Os in flight on average of {point.concurrency} requested"
    if short:
        message = (
            f"only {text} ({ratio * 100:.0f} %): the load generator could not keep the "
            "requested depth (fio CPU-bound, a synchronous engine, or too few files); this "
            "point measures a lower concurrency than its label"
        )
    elif deeper:
        message = (
            f"{text} ({ratio * 100:.0f} %): more than fio was asked to keep, so the engine ran "
            "a deeper queue (io_uring before fio 3.39 rounds iodepth up to a power of two); "
            "this point measures a higher concurrency than its label"
        )
    else:
        message = f"{text} ({ratio * 100:.0f} %)"
    return LittleCheck(outstanding, point.concurrency, ratio, short, message, deeper)


# --- Universal Scalability Law ------------------------------------------------


@dataclass(frozen=True)
class UslFit:
    lam: float  # λ: throughput of one unit of concurrency without contention
    sigma: float  # σ: contention (serialisation), ≥ 0
    kappa: float  # κ: coherency (crosstalk), ≥ 0
    r2: float  # on throughput
    peak_concurrency: float | None  # N* = √((1 − σ)/κ); None when κ ≤ 0 or σ ≥ 1

    def predict(self, n: float | np.ndarray) -> float | np.ndarray:
        return usl(n, self.lam, self.sigma, self.kappa)

    @property
    def peak_throughput(self) -> float | None:
        if self.peak_concurrency is None:
            return None
        return float(self.predict(self.peak_concurrency))


def usl(n: float | np.ndarray, lam: float, sigma: float, kappa: float) -> float | np.ndarray:
    """X(N) = λN / (1 + σ(N−1) + κN(N−1))."""
    return lam * n / (1.0 + sigma * (n - 1.0) + kappa * n * (n - 1.0))


def _nnls2(a: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    """min ‖a·β − y‖² over β ≥ 0 for two columns, exactly.

    The optimum of a convex quadratic on the quadrant is either the
    unconstrained one (when feasible) or on an edge, where it is a clamped
    one-variable least squares; try them all and keep the best.
    """
    candidates: list[tuple[float, float]] = [(0.0, 0.0)]
    beta, *_ = np.linalg.lstsq(a, y, rcond=None)
    if beta[0] >= 0 and beta[1] >= 0:
        candidates.append((float(beta[0]), float(beta[1])))
    for j in (0, 1):
        col = a[:, j]
        denom = float(col @ col)
        if denom > 0:
            value = max(0.0, float(col @ y) / denom)
            candidates.append((value, 0.0) if j == 0 else (0.0, value))

    def cost(b: tuple[float, float]) -> float:
        r = a @ np.asarray(b) - y
        return float(r @ r)

    return min(candidates, key=cost)


def _fit_given_lambda(n: np.ndarray, x: np.ndarray, lam: float) -> tuple[float, float, float]:
    """σ, κ for a fixed λ, and the squared error in throughput.

    For fixed λ the model is linear: Nλ/X − 1 = σ(N−1) + κN(N−1). Rows are
    weighted by X²/(Nλ), the derivative of X with respect to Nλ/X, so that
    the linear residuals approximate throughput residuals rather than
    over-weighting the low-throughput points.
    """
    y = n * lam / x - 1.0
    w = x**2 / (n * lam)
    a = np.column_stack([n - 1.0, n * (n - 1.0)]) * w[:, None]
    sigma, kappa = _nnls2(a, y * w)
    resid = usl(n, lam, sigma, kappa) - x
    return sigma, kappa, float(resid @ resid)


def _golden_min(f: Callable[[float], float], lo: float, hi: float, rel_tol: float = 1e-12) -> float:
    inv_phi = (math.sqrt(5.0) - 1.0) / 2.0
    c, d = hi - inv_phi * (hi - lo), lo + inv_phi * (hi - lo)
    fc, fd = f(c), f(d)
    while hi - lo > rel_tol * max(abs(hi), 1e-300):
        if fc <= fd:
            hi, d, fd = d, c, fc
            c = hi - inv_phi * (hi - lo)
            fc = f(c)
        else:
            lo, c, fc = c, d, fd
            d = lo + inv_phi * (hi - lo)
            fd = f(d)
    return (lo + hi) / 2.0


def usl_fit(points: Sequence[Point]) -> UslFit | None:
    """Least-squares fit of the USL to throughput, with σ, κ ≥ 0.

    λ is found by a log-spaced grid over a wide bracket followed by
    golden-section search around the best grid cell; for each λ, σ and κ
    come from an exact two-variable non-negative least squares (see
    ``_fit_given_lambda``). No scipy needed and no starting guess to get
    wrong. λ is searched even when N = 1 was measured: X(1) is one noisy
    point (10–15 % run to run), and pinning λ to it would push its error into
    σ and κ. N* beyond the highest measured concurrency is an extrapolation.
    Returns None with fewer than three distinct concurrencies with positive
    throughput.
    """
    usable = [p for p in points if p.throughput > 0 and p.concurrency > 0]
    if len({p.concurrency for p in usable}) < 3:
        return None
    n = np.asarray([p.concurrency for p in usable], dtype=float)
    x = np.asarray([p.throughput for p in usable], dtype=float)
    # X(N) ≤ λN when σ, κ ≥ 0, so λ ≥ max X/N up to noise; above, contention
    # can hide at most a factor of about N_min (σ ≤ 1) plus coherency.
    per_unit = float(np.max(x / n))
    lo, hi = 0.5 * per_unit, per_unit * 4.0 * max(1.0, float(n.min()))

    def sse(lam: float) -> float:
        return _fit_given_lambda(n, x, lam)[2]

    grid = np.geomspace(lo, hi, 400)
    errors = [sse(float(g)) for g in grid]
    i = int(np.argmin(errors))
    lam = _golden_min(sse, float(grid[max(i - 1, 0)]), float(grid[min(i + 1, grid.size - 1)]))
    sigma, kappa, err = _fit_given_lambda(n, x, lam)
    # terms that change the prediction by less than 1e-9 within the measured
    # range are rounding noise; left in, a κ of 1e-15 would claim a peak at N = 10⁷
    top = float(n.max())
    if kappa * top * (top - 1.0) < 1e-9:
        kappa = 0.0
    if sigma * (top - 1.0) < 1e-9:
        sigma = 0.0
    err = float(((usl(n, lam, sigma, kappa) - x) ** 2).sum())
    total = float(((x - x.mean()) ** 2).sum())
    r2 = 1.0 - err / total if total > 0 else (1.0 if err <= 1e-12 * float(x @ x) else 0.0)
    peak = math.sqrt((1.0 - sigma) / kappa) if kappa > 0 and sigma < 1 else None
    return UslFit(lam, sigma, kappa, r2, peak)


# --- the plateau of re-measured candidates ------------------------------------


@dataclass(frozen=True)
class Candidate:
    concurrency: int
    n: int
    mean: float
    lowest: float
    highest: float
    ci_low: float | None  # t-based confidence interval of the mean; None when n = 1
    ci_high: float | None


# a best mean's interval wider than this (each side, share of the mean) says
# nothing of where the peak is: every point of a curve fits in it
WIDE_PLATEAU = 0.25


@dataclass(frozen=True)
class Plateau:
    candidates: tuple[Candidate, ...]  # by concurrency
    best: Candidate  # highest mean
    members: tuple[int, ...]  # concurrencies statistically level with the best
    confidence: float

    def describe(self, fmt: Callable[[float], str] = lambda v: f"{v:.4g}") -> str:
        """One sentence; ``fmt`` formats a throughput with its unit."""
        conf = f"{self.confidence * 100:g} %"
        best = self.best
        if len(self.members) == 1:
            where = f"concurrency {self.members[0]}"
        else:
            inside = [
                c.concurrency
                for c in self.candidates
                if self.members[0] <= c.concurrency <= self.members[-1]
            ]
            joined = ", ".join(map(str, self.members))
            contiguous = tuple(inside) == self.members
            where = (
                f"concurrency {self.members[0]}–{self.members[-1]}"
                if contiguous
                else (f"concurrency {joined}")
            )
        if best.ci_low is None or best.ci_high is None:
            return (
                f"peak {fmt(best.mean)} at {where}; best {best.concurrency} "
                "(a single measurement: no confidence interval)"
            )
        wide = (
            f"; too wide to place the peak (±{(best.ci_high - best.mean) / best.mean:.0%} of "
            f"the mean from {best.n} readings): take more readings (--confirm)"
            if best.mean > 0 and best.ci_high - best.mean > WIDE_PLATEAU * best.mean
            else ""
        )
        return (
            f"peak plateau {fmt(best.ci_low)}–{fmt(best.ci_high)} ({conf} CI of the best mean) "
            f"at {where}; best {best.concurrency} (mean of {best.n}){wide}"
        )


def _candidate(concurrency: int, values: Sequence[float], confidence: float) -> Candidate:
    data = np.asarray(values, dtype=float)
    if data.size == 0:
        raise ValueError(f"no measurements at concurrency {concurrency}")
    mean = float(data.mean())
    low = high = None
    if data.size >= 2:
        half = (
            t_quantile(0.5 + confidence / 2.0, data.size - 1)
            * float(data.std(ddof=1))
            / math.sqrt(data.size)
        )
        # a throughput is never below zero: a wide interval of two readings
        # read "peak plateau -41.93K IOPS-239.48K IOPS" (issue 50)
        low, high = max(0.0, mean - half), mean + half
    return Candidate(
        concurrency, int(data.size), mean, float(data.min()), float(data.max()), low, high
    )


def _level(a: Candidate, b: Candidate) -> bool:
    """Whether two candidates cannot be told apart at this confidence.

    Both intervals: they overlap. One interval: the other's mean lies in it.
    Neither: only identical means.
    """
    if a.ci_low is not None and a.ci_high is not None:
        if b.ci_low is not None and b.ci_high is not None:
            return a.ci_low <= b.ci_high and b.ci_low <= a.ci_high
        return a.ci_low <= b.mean <= a.ci_high
    if b.ci_low is not None and b.ci_high is not None:
        return b.ci_low <= a.mean <= b.ci_high
    return a.mean == b.mean


def plateau(repeats: dict[int, list[float]], confidence: float = 0.95) -> Plateau:
    """The band of concurrencies whose throughput is level with the best.

    ``repeats`` maps concurrency to every throughput measured there (first
    measurement included). Overlapping intervals is a deliberately lenient
    test: the point is to show the noise band, not to crown a winner that a
    re-run would not confirm.
    """
    if not repeats:
        raise ValueError("plateau needs at least one concurrency")
    cands = tuple(_candidate(c, repeats[c], confidence) for c in sorted(repeats))
    best = max(cands, key=lambda c: (c.mean, -c.concurrency))
    members = tuple(c.concurrency for c in cands if c is best or _level(c, best))
    return Plateau(cands, best, members, confidence)
