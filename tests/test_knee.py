"""Concurrency search: stop rules, refinement, the knee, Little's law, the USL
fit and the plateau band, on curves whose answers are worked out by hand."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest

from iorig.analyze.knee import (
    KneeRule,
    Point,
    doubling_stop,
    find_knee,
    gain_per_doubling,
    littles_law,
    next_doubling,
    plateau,
    refine_between,
    stops_on_throughput,
    top_candidates,
    usl,
    usl_fit,
)


def _pt(
    c: int,
    x: float,
    p99_ms: float = 0.5,
    iops: float | None = None,
    lat_ms: float = 1.0,
    noise: float = 0.0,
):
    return Point(
        concurrency=c,
        throughput=x,
        iops=x if iops is None else iops,
        lat_mean_ns=lat_ms * 1e6,
        total_lat_mean_ns=lat_ms * 1e6,
        lat_p99_ns=p99_ms * 1e6,
        noise=noise,
    )


def _curve(pairs: list[tuple[int, float]]) -> list[Point]:
    return [_pt(c, x) for c, x in pairs]


# --- gains and the doubling stage ---------------------------------------------


def test_gain_is_normalised_per_doubling():
    assert gain_per_doubling(16, 100, 32, 104) == pytest.approx(0.04)
    # two doublings that gained 21 % together are 10 % each: 1.1² = 1.21
    assert gain_per_doubling(16, 100, 64, 121) == pytest.approx(0.10)
    # half a doubling (8 → 11.31) gaining 5 % is 1.05² − 1 = 10.25 % per doubling
    assert gain_per_doubling(8, 100, 8 * math.sqrt(2), 105) == pytest.approx(0.1025)
    with pytest.raises(ValueError):
        gain_per_doubling(32, 100, 16, 100)


def test_doubling_starts_at_one_and_doubles_while_it_pays():
    rule = KneeRule()
    assert next_doubling([], rule) == 1
    points = _curve([(1, 100), (2, 190), (4, 350)])
    assert doubling_stop(points, rule) is None
    assert next_doubling(points, rule) == 8


def test_doubling_stops_on_a_small_gain():
    points = _curve([(4, 400), (8, 700), (16, 1000), (32, 1041)])
    reason = doubling_stop(points, KneeRule())
    assert reason == "gain of +4.1 % from 16 to 32 is under 10 %"
    assert next_doubling(points, KneeRule()) is None
    # the same step passes a 3 % rule
    assert doubling_stop(points, KneeRule(min_gain=0.03)) is None


def test_doubling_looks_one_doubling_past_a_fall_and_stops_on_a_second():
    # a fall from the best point may be one dip (a throttle's slice): one more
    points = _curve([(8, 700), (16, 1000), (32, 950)])
    assert doubling_stop(points, KneeRule()) is None
    assert next_doubling(points, KneeRule()) == 64
    # falling again from there: past the peak
    assert doubling_stop([*points, _pt(64, 900)], KneeRule()) == (
        "throughput fell by 5.3 % from 32 to 64"
    )
    # climbing back, but not 10 % per doubling over the best before the dip
    assert doubling_stop([*points, _pt(64, 1050)], KneeRule()) == (
        "after a dip at 32, a gain of +2.5 % per doubling from 16 to 64 is under 10 %"
    )
    # climbing back well past it: the curve goes on
    assert doubling_stop([*points, _pt(64, 1400)], KneeRule()) is None
    # the search still measures a falling step again before it looks past it
    assert stops_on_throughput(points, KneeRule())


def test_a_dip_below_the_first_point_does_not_end_the_curve_at_one():
    # a throttled device in memory: 22 K at QD 1, 14 K at QD 2, the cap (40 K) at 4
    rule = KneeRule(max_concurrency=64)
    points = _curve([(1, 22_000), (2, 14_000)])
    assert next_doubling(points, rule) == 4
    points += _curve([(4, 39_000), (8, 40_000)])
    assert next_doubling(points, rule) is None
    assert find_knee(points, rule).point.concurrency == 4


def test_doubling_stops_when_p99_breaks_the_slo():
    points = [_pt(32, 1000, p99_ms=0.9), _pt(64, 1500, p99_ms=1.8)]
    rule = KneeRule(slo_p99_ns=1e6)
    assert doubling_stop(points, rule) == "p99 1.80 ms at 64 breaks the SLO p99 ≤ 1.00 ms"
    # even a single point can break it
    assert doubling_stop([_pt(1, 100, p99_ms=2.0)], rule) is not None


def test_doubling_stops_at_the_maximum_and_caps_the_last_step():
    rule = KneeRule(max_concurrency=12)
    points = _curve([(1, 100), (2, 200), (4, 400), (8, 800)])
    assert next_doubling(points, rule) == 12  # not 16
    # 8 → 12 gaining 25 % is 1.25^(1/log2 1.5) − 1 ≈ 46.5 % per doubling: keeps paying
    done = [*points, _pt(12, 1000)]
    assert doubling_stop(done, rule) == "reached the maximum concurrency 12"
    assert next_doubling(done, rule) is None
    # 8 → 12 gaining 2.5 % is 1.025^1.7095 − 1 = 4.3 % per doubling
    flat = [*points, _pt(12, 820)]
    assert doubling_stop(flat, rule) == "gain of +4.3 % per doubling from 8 to 12 is under 10 %"


# --- refinement ---------------------------------------------------------------


def test_refine_between_takes_the_geometric_midpoint():
    assert refine_between(16, 32, {1, 2, 4, 8, 16, 32}) == [23]  # √512 = 22.6
    assert refine_between(4, 6, set()) == [5]  # √24 = 4.9
    assert refine_between(32, 16, set()) == [23]  # order does not matter
    # two points split 16 → 64 into three equal ratios: 25.4 and 40.3
    assert refine_between(16, 64, set(), count=2) == [25, 40]


def test_refine_between_skips_what_is_measured_and_tight_gaps():
    assert refine_between(16, 32, {23}) == []
    assert refine_between(1, 2, set()) == []
    assert refine_between(2, 3, set()) == []
    assert refine_between(2, 4, set()) == [3]


# --- the knee -----------------------------------------------------------------


def test_knee_of_a_curve_that_never_flattens_is_the_last_point():
    # X = 100·c^0.9 gains 2^0.9 − 1 = 86.6 % on every doubling
    points = _curve([(c, 100 * c**0.9) for c in (1, 2, 4, 8, 16, 32, 64)])
    knee = find_knee(points, KneeRule(max_concurrency=64))
    assert knee.point is not None and knee.point.concurrency == 64
    assert "maximum concurrency" in knee.reason
    assert "+86.6 %" in knee.reason
    assert "beyond" in knee.reason
    assert knee.beyond and knee.where == "beyond 64"  # what every table and chart says


def test_knee_of_a_curve_that_falls_after_its_peak_is_at_the_peak():
    points = _curve([(1, 100), (2, 200), (4, 400), (8, 700), (16, 1000), (32, 900)])
    knee = find_knee(points, KneeRule())
    assert knee.point is not None and knee.point.concurrency == 16
    assert knee.reason.startswith("no higher concurrency gains ≥ 10 % per doubling over 16")
    assert "-10.0 % per doubling at 32" in knee.reason
    assert not knee.beyond and knee.where == "16"


def test_knee_sits_below_the_peak_when_the_top_is_flat():
    # 8 → 16: +4 %; 8 → 32: 1.06^(1/2) − 1 = +3.0 % per doubling; the peak is 32
    points = _curve([(1, 100), (2, 190), (4, 350), (8, 500), (16, 520), (32, 530)])
    knee = find_knee(points, KneeRule())
    assert knee.point is not None and knee.point.concurrency == 8
    assert "+4.0 % per doubling at 16" in knee.reason
    assert find_knee(points, KneeRule(min_gain=0.03)).point.concurrency == 16


def test_a_noisy_dip_does_not_stop_the_curve_early():
    # 8 → 16 dips, but 8 → 32 gains 1.5^(1/2) − 1 = 22 % per doubling
    points = _curve([(4, 400), (8, 600), (16, 590), (32, 900)])
    knee = find_knee(points, KneeRule())
    assert knee.point is not None and knee.point.concurrency == 32
    assert "highest concurrency measured" in knee.reason


def test_knee_with_refined_points():
    # 16 → 23: 1.1^(1/log2(23/16)) − 1 = +20.0 %; 23 → 32: +5.8 % per doubling
    points = _curve([(8, 700), (16, 1000), (23, 1100), (32, 1130)])
    knee = find_knee(points, KneeRule())
    assert knee.point is not None and knee.point.concurrency == 23
    step = knee.efficiency[1]
    assert (step.c1, step.c2) == (16, 23)
    assert step.gain_per_doubling == pytest.approx(0.1997, abs=1e-4)
    assert step.added_per_unit == pytest.approx(100 / 7)


def test_slo_excludes_the_best_points():
    points = [
        _pt(1, 100, p99_ms=0.2),
        _pt(2, 200, p99_ms=0.3),
        _pt(4, 380, p99_ms=0.5),
        _pt(8, 600, p99_ms=0.9),
        _pt(16, 800, p99_ms=1.5),
        _pt(32, 850, p99_ms=3.0),
    ]
    rule = KneeRule(slo_p99_ns=1e6)
    knee = find_knee(points, rule)
    assert knee.point is not None and knee.point.concurrency == 8
    assert "highest concurrency within the SLO" in knee.reason
    assert "16, 32 excluded" in knee.reason
    assert knee.slo_best is not None and knee.slo_best.concurrency == 8
    # efficiency covers every measured step, the excluded ones too
    assert [(s.c1, s.c2) for s in knee.efficiency] == [(1, 2), (2, 4), (4, 8), (8, 16), (16, 32)]
    assert knee.efficiency[2].gain_per_doubling == pytest.approx(600 / 380 - 1)
    assert knee.efficiency[2].added_per_unit == pytest.approx(55.0)  # (600 − 380) / 4
    # without the SLO the knee moves up and there is no SLO best
    free = find_knee(points, KneeRule())
    assert free.point.concurrency == 16 and free.slo_best is None
    assert top_candidates(points, 3, rule) == [8, 4, 2]
    assert top_candidates(points, 3) == [32, 16, 8]


def test_every_point_breaking_the_slo_gives_no_knee():
    points = [_pt(1, 100, p99_ms=2.0), _pt(2, 180, p99_ms=3.0)]
    knee = find_knee(points, KneeRule(slo_p99_ns=1e6))
    assert knee.point is None and knee.slo_best is None
    assert "every point breaks the SLO" in knee.reason
    assert "2.00 ms at 1" in knee.reason


def test_knee_rejects_two_points_at_one_concurrency():
    with pytest.raises(ValueError, match="concurrency 8"):
        find_knee(_curve([(8, 100), (8, 110)]), KneeRule())


def test_top_candidates_prefers_lower_concurrency_on_ties():
    points = _curve([(8, 500), (16, 520), (32, 520), (64, 510)])
    assert top_candidates(points, 2) == [16, 32]


# --- Little's law ------------------------------------------------------------


def test_littles_law_full_depth():
    # 10 000 IOPS × 3.2 ms in flight = 32 outstanding
    check = littles_law(_pt(32, 10_000, lat_ms=3.2))
    assert check.outstanding == pytest.approx(32.0)
    assert check.ratio == pytest.approx(1.0)
    assert not check.short


def test_littles_law_shortfall():
    # 5 000 IOPS × 2 ms = 10 outstanding of 32 requested: 31 %
    check = littles_law(_pt(32, 5_000, lat_ms=2.0))
    assert check.outstanding == pytest.approx(10.0)
    assert check.ratio == pytest.approx(10 / 32)
    assert check.short
    assert "could not keep the requested depth" in check.message
    assert check.message.startswith("only 10.0 I/Os in flight on average of 32 requested (31 %)")


def test_littles_law_boundary_is_not_short():
    # exactly 80 %: 8 000 IOPS × 1 ms = 8 of 10
    assert not littles_law(_pt(10, 8_000, lat_ms=1.0)).short
    assert littles_law(_pt(10, 7_900, lat_ms=1.0)).short


def test_littles_law_uses_time_in_flight_not_completion_latency():
    point = Point(16, 4000, 4000, lat_mean_ns=2e6, total_lat_mean_ns=4e6, lat_p99_ns=5e6)
    assert littles_law(point).outstanding == pytest.approx(16.0)


# --- USL ----------------------------------------------------------------------

LAM, SIGMA, KAPPA = 1000.0, 0.05, 0.001
N_STAR = math.sqrt((1 - SIGMA) / KAPPA)  # 30.82


def _usl_points(ns: list[int], noise: np.ndarray | None = None) -> list[Point]:
    x = usl(np.asarray(ns, dtype=float), LAM, SIGMA, KAPPA)
    if noise is not None:
        x = x * (1 + noise)
    return _curve(list(zip(ns, x.tolist(), strict=True)))


def test_usl_model_values():
    # X(1) = λ; X(10) = 10 000 / (1 + 0.45 + 0.09) = 6 493.5
    assert usl(1.0, LAM, SIGMA, KAPPA) == pytest.approx(1000.0)
    assert usl(10.0, LAM, SIGMA, KAPPA) == pytest.approx(10_000 / 1.54)


@pytest.mark.parametrize(
    "ns", [[1, 2, 4, 8, 16, 32, 64], [2, 4, 8, 16, 32, 64, 128], [4, 8, 16, 32]]
)
def test_usl_recovers_exact_parameters(ns):
    fit = usl_fit(_usl_points(ns))
    assert fit is not None
    assert fit.lam == pytest.approx(LAM, rel=1e-6)
    assert fit.sigma == pytest.approx(SIGMA, rel=1e-6)
    assert fit.kappa == pytest.approx(KAPPA, rel=1e-6)
    assert fit.r2 == pytest.approx(1.0, abs=1e-9)
    assert fit.peak_concurrency == pytest.approx(N_STAR, rel=1e-6)
    assert fit.peak_throughput == pytest.approx(float(usl(N_STAR, LAM, SIGMA, KAPPA)), rel=1e-6)


def test_usl_on_noisy_points():
    ns = [1, 2, 4, 8, 12, 16, 24, 32, 48, 64]
    noise = np.random.default_rng(1).normal(0.0, 0.02, len(ns))  # 2 % run-to-run noise
    fit = usl_fit(_usl_points(ns, noise))
    assert fit is not None
    assert fit.r2 > 0.99
    assert fit.peak_concurrency == pytest.approx(N_STAR, rel=0.15)
    assert fit.lam == pytest.approx(LAM, rel=0.1)


def test_usl_without_coherency_has_no_peak():
    # Amdahl: κ = 0, throughput approaches λ/σ and never turns down
    ns = np.asarray([1, 2, 4, 8, 16, 32], dtype=float)
    x = usl(ns, 500, 0.1, 0).tolist()
    fit = usl_fit(_curve(list(zip([1, 2, 4, 8, 16, 32], x, strict=True))))
    assert fit is not None
    assert fit.kappa == 0.0
    assert fit.sigma == pytest.approx(0.1, rel=1e-6)
    assert fit.peak_concurrency is None


def test_usl_needs_three_points():
    assert usl_fit(_curve([(1, 100), (2, 190)])) is None
    assert usl_fit(_curve([(1, 100), (2, 190), (4, 0)])) is None


# --- plateau ------------------------------------------------------------------

T_2 = 4.302653  # t(0.975, df = 2), from tables


def test_plateau_overlapping_intervals():
    band = plateau({16: [100, 104, 96], 32: [150, 148, 152], 64: [147, 155, 151]})
    best = band.best
    assert best.concurrency == 64
    assert (best.n, best.mean, best.lowest, best.highest) == (3, 151.0, 147.0, 155.0)
    half = T_2 * 4.0 / math.sqrt(3)  # s = 4
    assert best.ci_low == pytest.approx(151 - half, abs=1e-4)
    assert best.ci_high == pytest.approx(151 + half, abs=1e-4)
    # 32: 150 ± 4.97 overlaps 151 ± 9.94; 16: 100 ± 4.97 does not
    assert band.members == (32, 64)
    assert band.describe(lambda v: f"{v:.1f} IOPS") == (
        "peak plateau 141.1 IOPS–160.9 IOPS (95 % CI of the best mean) at concurrency 32–64; "
        "best 64 (mean of 3)"
    )


def test_plateau_without_overlap_is_the_best_alone():
    band = plateau({32: [150, 151, 149], 64: [120, 121, 119]})
    assert band.best.concurrency == 32
    assert band.members == (32,)
    assert "at concurrency 32;" in band.describe()


def test_plateau_wider_confidence_takes_in_more():
    repeats = {32: [150, 151, 149], 64: [145, 146, 144]}
    # 95 %: 150 ± 2.48 and 145 ± 2.48 are apart; 99.9 %: t = 31.6 makes them overlap
    assert plateau(repeats).members == (32,)
    assert plateau(repeats, confidence=0.999).members == (32, 64)


def test_plateau_single_measurements():
    # 32 measured once at 149 lies inside 64's interval 150 ± 4.97
    assert plateau({32: [149], 64: [148, 152, 150]}).members == (32, 64)
    assert plateau({32: [140], 64: [148, 152, 150]}).members == (64,)
    # a best measured once has no interval of its own
    band = plateau({32: [155], 64: [140, 160]})
    assert band.best.concurrency == 32 and band.best.ci_low is None
    assert band.members == (32, 64)  # 64: 150 ± 127 contains 155
    assert band.describe(lambda v: f"{v:.0f}") == (
        "peak 155 at concurrency 32–64; best 32 (a single measurement: no confidence interval)"
    )


def test_plateau_lists_members_that_are_not_contiguous():
    band = plateau({16: [150, 151, 149], 32: [100, 101, 99], 64: [150, 152, 148]})
    assert band.members == (16, 64)
    assert "at concurrency 16, 64;" in band.describe()


def test_plateau_rejects_empty_input():
    with pytest.raises(ValueError):
        plateau({})
    with pytest.raises(ValueError):
        plateau({8: []})


def test_a_fall_within_the_points_noise_is_a_flat_step_not_a_dip():
    """Issue 49 item 3: a 0.03 % drop sent the search one doubling further
    (a dip) while a 0.03 % gain stopped it (on a flat plateau 9 fio runs
    instead of 6). A fall within what the two points are known to (their
    readings' bands, or a logged second's resolution) is a flat step and
    stops the doubling as a small gain does; a fall beyond it is a dip."""
    rule = KneeRule()
    climb = _curve([(4, 10_000), (8, 19_000), (16, 30_000)])
    flat_down = [*climb, _pt(32, 29_991)]
    flat_up = [*climb, _pt(32, 30_009)]
    assert doubling_stop(flat_up, rule) == "gain of +0.0 % from 16 to 32 is under 10 %"
    assert doubling_stop(flat_down, rule) == "gain of -0.0 % from 16 to 32 is under 10 %"
    assert next_doubling(flat_down, rule) is None
    # a 2 % fall between points each known to ± 3 %: flat too
    noisy = [*climb[:-1], replace(climb[-1], noise=0.03), _pt(32, 29_400, noise=0.03)]
    assert doubling_stop(noisy, rule) == "gain of -2.0 % from 16 to 32 is under 10 %"
    # the same fall between points known to ± 0.5 %: a dip, looked past
    sure = [*climb[:-1], replace(climb[-1], noise=0.005), _pt(32, 29_400, noise=0.005)]
    assert doubling_stop(sure, rule) is None and next_doubling(sure, rule) == 64
