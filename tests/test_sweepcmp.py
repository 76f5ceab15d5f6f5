"""A/B across a sweep in words: seed 003's sentence, ranges from the
significant points only, regions where B/A crosses 1, ties and how
significance is counted."""

from __future__ import annotations

import pytest

from iorig.analyze.sweepcmp import GroupSummary, PointPair, Region, describe, ratio_ranges

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
    # B read throughput 23–41 % above A at 71–81 % of A's latency at the 7
    # significant points; the two others (38 % and 29 % more) make no claim
    tput = [1.23, 1.30, 1.41, 1.35, 1.27, 1.25, 1.33, 1.38, 1.29]
    lat = [0.81, 0.77, 0.71, 0.74, 0.79, 0.80, 0.75, 0.72, 0.78]
    sig = [True, True, True, True, True, True, True, False, False]
    [summary] = ratio_ranges(_pairs("read", tput, lat, sig))
    assert (summary.points, summary.testable, summary.significant) == (9, 9, 7)
    (region,) = summary.regions
    assert region.throughput_ratio_min == pytest.approx(1.23)
    assert region.throughput_ratio_max == pytest.approx(1.41)
    assert (region.lat_ratio_min, region.lat_ratio_max) == pytest.approx((0.71, 0.81))
    assert describe(summary, "A", "B") == (
        "B delivered 23–41 % more read throughput at bs=4k–256k, at 71–81 % of the latency; "
        "significant at 7 of 9 points; no significant difference at bs=512k, 1m"
    )


def test_ranges_come_from_the_significant_points_only():
    # the 60 % point is not significant: it must not widen the range
    [summary] = ratio_ranges(
        _pairs("read", [1.10, 1.60, 1.12], [0.9, 0.6, 0.9], [True, False, True])
    )
    assert describe(summary, "A", "B") == (
        "B delivered 10–12 % more read throughput at bs=4k–16k, at 90 % of the latency; "
        "significant at 2 of 3 points; no significant difference at bs=8k"
    )


def test_regions_where_b_over_a_crosses_one():
    # seed 003's shape: B ahead at small blocks, behind at large ones
    tput = [1.78, 1.95, 2.05, 0.80, 0.70]
    lat = [0.55, 0.50, 0.48, 1.20, 1.40]
    [summary] = ratio_ranges(_pairs("read", tput, lat, [True] * 5))
    assert [r.where for r in summary.regions] == ["bs=4k–16k", "bs=32k–64k"]
    assert describe(summary, "iSCSI", "NVMe") == (
        "NVMe delivered 78–105 % more read throughput at bs=4k–16k, at 48–55 % of the latency; "
        "20–30 % less read throughput at bs=32k–64k, at 120–140 % of the latency; "
        "significant at all 5 points"
    )


def test_mixed_directions_untested_describe_what_was_measured():
    [summary] = ratio_ranges(_pairs("write", [0.95, 1.0, 1.12], [1.04, 1.0, 0.90], [None] * 3))
    assert describe(summary, "NFS", "SMB") == (
        "SMB delivered 5 % less write throughput at bs=4k, at 104 % of the latency; "
        "up to 12 % more write throughput at bs=8k–16k, at 90–100 % of the latency; "
        "significance not tested (use --repeat 3 or longer phases)"
    )


def test_uniformly_less():
    [summary] = ratio_ranges(_pairs("read", [0.88, 0.95], [1.10, 1.20], [True, True]))
    assert describe(summary, "A", "B") == (
        "B delivered 5–12 % less read throughput, at 110–120 % of the latency; "
        "significant at both points"
    )


def test_nothing_significant_is_said_so():
    [summary] = ratio_ranges(_pairs("read", [1.002, 0.998], [1.001, 0.999], [False, False]))
    assert summary.regions == ()
    assert describe(summary, "A", "B") == (
        "B: no significant difference in read throughput from A; not significant at either point"
    )


def test_one_end_rounds_to_zero():
    [more] = ratio_ranges(_pairs("read", [1.001, 1.10], [0.95, 0.95], [None, None]))
    assert describe(more, "A", "B") == (
        "B delivered up to 10 % more read throughput, at 95 % of the latency; "
        "significance not tested (use --repeat 3 or longer phases)"
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
        "B delivered 10–15 % more write throughput at bs=4k–8k, at the same latency; "
        "significant at 2 of 3 testable points (4 in all); no significant difference at "
        "bs=16k; not testable at bs=32k"
    )
    assert describe(read, "A", "B") == (
        "B delivered 20 % more read throughput, at 90 % of the latency; "
        "significance not tested (use --repeat 3 or longer phases)"
    )


def test_significance_wording():
    region = Region("bs=4k", "bs=1m", 9, 1.5, 1.5, 0.5, 0.5)

    def sentence_end(points: int, testable: int, significant: int) -> str:
        summary = GroupSummary("read", points, testable, significant, (region,))
        return describe(summary, "A", "B").split("; ", 1)[1]

    assert sentence_end(9, 9, 9) == "significant at all 9 points"
    assert sentence_end(5, 2, 2) == "significant at both testable points (5 in all)"
    assert sentence_end(5, 1, 1) == "significant at the one testable point (5 in all)"
    assert sentence_end(1, 1, 1) == "significant"


def test_single_point_group():
    region = Region("bs=4k", "bs=4k", 1, 1.5, 1.5, 0.5, 0.5)
    summary = GroupSummary("read", 1, 1, 1, (region,))
    assert describe(summary, "A", "B") == (
        "B delivered 50 % more read throughput, at 50 % of the latency; significant"
    )


def test_zero_baseline_is_an_error():
    with pytest.raises(ValueError, match="bs=4k"):
        ratio_ranges([PointPair("read", "bs=4k", 0.0, 10.0, 1e6, 1e6, True)])


def test_a_group_that_is_not_a_word_is_named_with_its_parameter():
    # issue 26 item 10: a sweep over bs and iodepth said "46 % more 1 throughput"
    region = Region("bs=4k", "bs=1m", 9, 1.46, 1.46, 0.68, 0.68)
    summary = GroupSummary("1", 9, 9, 9, (region,), what="", condition="iodepth=1")
    assert describe(summary, "A", "B") == (
        "With iodepth=1, B delivered 46 % more throughput, at 68 % of the latency; "
        "significant at all 9 points"
    )
    both = GroupSummary("rw=read,iodepth=1", 9, 9, 9, (region,), what="read", condition="iodepth=1")
    assert describe(both, "A", "B").startswith("With iodepth=1, B delivered 46 % more read")
    [same] = ratio_ranges(
        [
            PointPair("1", "bs=4k", 100, 100.1, 1e6, 1e6, False, "", "iodepth=1"),
            PointPair("1", "bs=8k", 100, 99.9, 1e6, 1e6, False, "", "iodepth=1"),
        ]
    )
    assert describe(same, "A", "B") == (
        "B: no significant difference in throughput from A with iodepth=1; "
        "not significant at either point"
    )
