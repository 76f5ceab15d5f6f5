"""A/B across a sweep in words: seed 003's sentence, mixed directions, ties
and how significance is counted."""

from __future__ import annotations

import pytest

from iorig.analyze.sweepcmp import GroupSummary, PointPair, describe, ratio_ranges

BLOCK_SIZES = ["4k", "8k", "16k", "32k", "64k", "128k", "256k", "512k", "1m"]


def _pairs(
    group: str,
    tput_ratios: list[float],
    lat_ratios: list[float],
    significant: list[bool | None],
) -> list[PointPair]:
    return [
        PointPair(group, f"bs={bs}", 1000.0, 1000.0 * t, 2e6, 2e6 * lat, sig)
        for bs, t, lat, sig in zip(BLOCK_SIZES, tput_ratios, lat_ratios, significant, strict=False)
    ]


def test_seed_003_sentence():
    # B read throughput 23–41 % above A at 71–81 % of A's latency, 7 of 9 points significant
    tput = [1.23, 1.30, 1.41, 1.35, 1.27, 1.25, 1.33, 1.38, 1.29]
    lat = [0.81, 0.77, 0.71, 0.74, 0.79, 0.80, 0.75, 0.72, 0.78]
    sig = [True, True, True, True, True, True, True, False, False]
    [summary] = ratio_ranges(_pairs("read", tput, lat, sig))
    assert (summary.points, summary.testable, summary.significant) == (9, 9, 7)
    assert summary.throughput_ratio_min == pytest.approx(1.23)
    assert summary.throughput_ratio_max == pytest.approx(1.41)
    assert summary.lat_ratio_min == pytest.approx(0.71)
    assert summary.lat_ratio_max == pytest.approx(0.81)
    assert describe(summary, "A", "B") == (
        "B delivered 23–41 % more read throughput, at 71–81 % of the latency; "
        "significant at 7 of 9 points"
    )


def test_mixed_directions():
    [summary] = ratio_ranges(
        _pairs("write", [0.95, 1.0, 1.12], [1.04, 1.0, 0.90], [False, False, True])
    )
    assert describe(summary, "NFS", "SMB") == (
        "SMB delivered between 5 % less and 12 % more write throughput, at 90–104 % of the "
        "latency; significant at 1 of 3 points"
    )


def test_uniformly_less():
    [summary] = ratio_ranges(_pairs("read", [0.88, 0.95], [1.10, 1.20], [True, True]))
    assert describe(summary, "A", "B") == (
        "B delivered 5–12 % less read throughput, at 110–120 % of the latency; "
        "significant at both points"
    )


def test_equal_everywhere():
    [summary] = ratio_ranges(_pairs("read", [1.002, 0.998], [1.001, 0.999], [False, False]))
    assert describe(summary, "A", "B") == (
        "B delivered the same read throughput as A, at the same latency; "
        "not significant at either point"
    )


def test_one_end_rounds_to_zero():
    [more] = ratio_ranges(_pairs("read", [1.001, 1.10], [0.95, 0.95], [None, None]))
    assert describe(more, "A", "B") == (
        "B delivered up to 10 % more read throughput, at 95 % of the latency; "
        "significance not tested"
    )
    [less] = ratio_ranges(_pairs("read", [0.90, 0.999], [1.0, 1.0], [None, None]))
    assert describe(less, "A", "B").startswith("B delivered up to 10 % less read throughput")


def test_rounding_is_half_away_from_zero():
    # round() would give 12 % for 1.125 and −12 % for 0.875
    [summary] = ratio_ranges(_pairs("read", [1.125, 1.125], [0.875, 0.875], [None, None]))
    assert describe(summary, "A", "B").startswith(
        "B delivered 13 % more read throughput, at 88 % of the latency"
    )


def test_groups_in_first_seen_order_and_partial_testing():
    pairs = [
        PointPair("write", "bs=4k", 100, 110, 1e6, 1e6, True),
        PointPair("read", "bs=4k", 100, 120, 1e6, 0.9e6, None),
        PointPair("write", "bs=8k", 100, 115, 1e6, 1e6, True),
        PointPair("write", "bs=16k", 100, 118, 1e6, 1e6, False),
        PointPair("write", "bs=32k", 100, 120, 1e6, 1e6, None),
    ]
    write, read = ratio_ranges(pairs)
    assert (write.group, read.group) == ("write", "read")
    assert (write.points, write.testable, write.significant) == (4, 3, 2)
    assert describe(write, "A", "B") == (
        "B delivered 10–20 % more write throughput, at the same latency; "
        "significant at 2 of 3 testable points (4 in all)"
    )
    assert describe(read, "A", "B") == (
        "B delivered 20 % more read throughput, at 90 % of the latency; significance not tested"
    )


def test_significance_wording():
    def sentence_end(points: int, testable: int, significant: int) -> str:
        summary = GroupSummary("read", points, testable, significant, 1.5, 1.5, 0.5, 0.5)
        return describe(summary, "A", "B").split("; ", 1)[1]

    assert sentence_end(9, 9, 9) == "significant at all 9 points"
    assert sentence_end(9, 9, 0) == "not significant at any of the 9 points"
    assert sentence_end(5, 2, 2) == "significant at both testable points (5 in all)"
    assert sentence_end(5, 1, 0) == "not significant at the one testable point (5 in all)"
    assert sentence_end(1, 1, 0) == "not significant"


def test_single_point_group():
    summary = GroupSummary("read", 1, 1, 1, 1.5, 1.5, 0.5, 0.5)
    assert describe(summary, "A", "B") == (
        "B delivered 50 % more read throughput, at 50 % of the latency; significant"
    )


def test_zero_baseline_is_an_error():
    with pytest.raises(ValueError, match="bs=4k"):
        ratio_ranges([PointPair("read", "bs=4k", 0.0, 10.0, 1e6, 1e6)])
