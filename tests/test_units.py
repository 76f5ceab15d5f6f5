"""Sizes, durations, rates and percentages as users type them."""

from __future__ import annotations

import math

import pytest

from iorig.units import (
    format_bytes,
    format_duration,
    format_latency,
    format_rate,
    format_si,
    parse_duration,
    parse_limit,
    parse_percent,
    parse_rate,
    parse_size,
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("4k", 4096),
        ("4K", 4096),
        ("4Ki", 4096),
        ("4KiB", 4096),
        ("4KB", 4000),
        ("64MiB", 64 << 20),
        ("1.5GiB", 3 << 29),
        ("1GB", 10**9),
        ("512", 512),
        ("512B", 512),
        (" 8 KiB ", 8192),
        (4096, 4096),
        ("2TiB", 2 << 40),
    ],
)
def test_parse_size(text, expected):
    assert parse_size(text) == expected


@pytest.mark.parametrize("bad", ["", "4X", "-1", "1.3B", "KiB", True, -5, 1.5])
def test_parse_size_rejects(bad):
    with pytest.raises(ValueError):
        parse_size(bad)


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("30s", 30), ("5m", 300), ("500ms", 0.5), ("2h", 7200), ("90", 90), (1.5, 1.5), ("1min", 60)],
)
def test_parse_duration(text, seconds):
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("bad", ["2 weeks", "s", "-3s", True])
def test_parse_duration_rejects(bad):
    with pytest.raises(ValueError):
        parse_duration(bad)


def test_parse_percent_and_rate():
    assert parse_percent("70%") == 70 and parse_percent(0.5) == 0.5
    with pytest.raises(ValueError):
        parse_percent("120")
    assert parse_rate("3.5GB/s") == 3.5e9
    assert parse_rate("2GiB/s") == 2 * 1024**3
    assert parse_rate("25Gb/s") == 25e9 / 8
    with pytest.raises(ValueError):
        parse_rate("fast")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("500kIOPS", (5e5, "iops")),
        ("3.5GB/s", (3.5e9, "bytes_per_s")),
        ("600MBps", (6e8, "bytes_per_s")),
        ("10gbit", (1.25e9, "bytes_per_s")),
        ("25Gb/s", (25e9 / 8, "bytes_per_s")),
    ],
)
def test_a_limit_is_read_with_its_unit(text, expected):
    assert parse_limit(text) == expected


@pytest.mark.parametrize("bad", ["8k", "8000", "3.5GB", "1M", "fast", "8kIOP"])
def test_a_limit_without_a_unit_per_second_is_refused(bad):
    """``8k`` was 8 kB/s, silently: IOPS or bytes a second is the user's to say."""
    with pytest.raises(ValueError, match="not a limit"):
        parse_limit(bad)


def test_formatting():
    assert format_si(117_550) == "117.55K" and format_si(2.25e9) == "2.25G"
    assert format_si(math.nan) == "-"
    assert format_rate(2_620_000_000) == "2.62 GB/s"
    assert format_latency(850_000) == "850.0 µs" and format_latency(1_240_000) == "1.24 ms"
    assert format_bytes(64 << 20) == "64MiB" and format_bytes(1536) == "1.5KiB"
    assert format_duration(45) == "45s" and format_duration(5400) == "1h 30m"
    # a measured duration reads as people write it, not as a float's digits
    assert format_duration(26.5088) == "26.5s" and format_duration(4.79446) == "4.8s"
    assert format_duration(0.25) == "0.25s" and format_duration(0.0042) == "0.0042s"
    assert format_duration(2.0) == "2s" and format_duration(0.0001) == "0s"
