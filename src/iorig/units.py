"""Parsing and formatting of sizes, durations, rates and counts.

Sizes follow what storage people type: ``4k``, ``4K``, ``4KiB`` and ``4Ki`` are
4096 bytes (fio's habit, IEC), while ``4KB`` is 4000 bytes (SI). Block sizes
that come out unaligned because of SI units are caught by the scenario model,
which says so. Durations accept ``500ms``, ``30s``, ``5m``, ``2h`` or a bare
number of seconds.
"""

from __future__ import annotations

import math
import re

# What fio can take (its sizes are 64-bit, its times microseconds in 64
# bits, rendered by iorig in whole milliseconds); a phase longer than a year
# is a typo, not a benchmark.
MAX_SIZE = 2**63 - 1
MAX_DURATION_S = 366 * 86400.0
_SIZE_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*$")
_IEC = {"": 1, "b": 1}
for _i, _p in enumerate("kmgtp", start=1):
    _IEC[_p] = 1024**_i
    _IEC[_p + "i"] = 1024**_i
    _IEC[_p + "ib"] = 1024**_i
_SI = {p + "b": 1000**i for i, p in enumerate("kmgtp", start=1)}

_DURATION_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|sec|m|min|h|hr|d)?\s*$", re.IGNORECASE)
_DURATION_FACTORS = {
    None: 1.0,
    "ms": 0.001,
    "s": 1.0,
    "sec": 1.0,
    "m": 60.0,
    "min": 60.0,
    "h": 3600.0,
    "hr": 3600.0,
    "d": 86400.0,
}


def parse_size(value: str | int | float) -> int:
    """Bytes from ``64MiB``, ``4k``, ``1.5GiB``, ``4KB`` (SI) or a plain integer."""
    if isinstance(value, bool):
        raise ValueError(f"expected a size such as 64MiB, got {value!r}")
    if isinstance(value, int):
        if value < 0:
            raise ValueError(f"size must not be negative, got {value}")
        return _size_in_range(value, value)
    if isinstance(value, float):
        if value < 0 or not value.is_integer():
            raise ValueError(f"size must be a whole number of bytes, got {value}")
        return _size_in_range(int(value), value)
    match = _SIZE_RE.match(str(value))
    if not match:
        raise ValueError(f"not a size: {value!r} (use e.g. 4KiB, 64MiB, 1GiB or 4k)")
    number, unit = match.groups()
    key = unit.lower()
    if unit.endswith("B") and len(unit) == 2 and unit[0].upper() in "KMGTP":
        factor = _SI[key]  # "KB", "MB": SI, as printed on drive labels
    elif key in _IEC:
        factor = _IEC[key]
    else:
        raise ValueError(f"unknown size unit {unit!r} in {value!r} (use B, KiB, MiB, GiB, TiB)")
    size = float(number) * factor
    if not math.isfinite(size) or not size.is_integer():
        raise ValueError(f"size {value!r} is not a whole number of bytes")
    return _size_in_range(int(size), value)


def _size_in_range(size: int, given: object) -> int:
    if size > MAX_SIZE:
        raise ValueError(f"size {given!r} is larger than fio can take (8 EiB)")
    return size


def parse_duration(value: str | int | float) -> float:
    """Seconds from ``30s``, ``5m``, ``500ms``, ``1h`` or a plain number of seconds."""
    if isinstance(value, bool):
        raise ValueError(f"expected a duration such as 30s, got {value!r}")
    if isinstance(value, int | float):
        if not math.isfinite(value):
            raise ValueError(f"duration must be a finite number of seconds, got {value}")
        if value < 0:
            raise ValueError(f"duration must not be negative, got {value}")
        return _duration_in_range(float(value), value)
    match = _DURATION_RE.match(str(value))
    if not match:
        raise ValueError(f"not a duration: {value!r} (use e.g. 500ms, 30s, 5m, 1h)")
    number, unit = match.groups()
    return _duration_in_range(
        float(number) * _DURATION_FACTORS[unit.lower() if unit else None], value
    )


def _duration_in_range(seconds: float, given: object) -> float:
    """fio times phases in whole milliseconds; at most ``MAX_DURATION_S``."""
    if not math.isfinite(seconds) or seconds > MAX_DURATION_S:
        raise ValueError(
            f"duration {given!r} is longer than a phase may last "
            f"({MAX_DURATION_S / 86400:.0f} days)"
        )
    millis = seconds * 1000
    if abs(millis - round(millis)) > 1e-6 * max(1.0, millis):
        raise ValueError(
            f"duration {given!r} is not a whole number of milliseconds (fio's granularity)"
        )
    return seconds


def parse_percent(value: str | int | float) -> float:
    """A percentage 0..100 from ``70`` or ``70%`` (a fraction such as 0.7 means 0.7 %)."""
    text = str(value).strip()
    if text.endswith("%"):
        text = text[:-1]
    try:
        number = float(text)
    except (ValueError, OverflowError):
        raise ValueError(f"not a percentage: {value!r} (use e.g. 70 or 70%)") from None
    if not 0.0 <= number <= 100.0:
        raise ValueError(f"percentage must be between 0 and 100, got {value!r}")
    return number


def format_bytes(n: float) -> str:
    """IEC size for capacities and block sizes: ``4KiB``, ``64MiB``, ``1.5GiB``."""
    for unit, factor in (("TiB", 1024**4), ("GiB", 1024**3), ("MiB", 1024**2), ("KiB", 1024)):
        if abs(n) >= factor:
            value = n / factor
            return f"{value:.0f}{unit}" if value.is_integer() else f"{value:.3g}{unit}"
    return f"{n:.0f}B"


def format_si(n: float, digits: int = 2) -> str:
    """Seed 000's style: ``117.55K``, ``2.25G``."""
    if n is None or (isinstance(n, float) and math.isnan(n)):
        return "-"
    for suffix, factor in (("T", 1e12), ("G", 1e9), ("M", 1e6), ("K", 1e3)):
        if abs(n) >= factor:
            return f"{n / factor:.{digits}f}{suffix}"
    return f"{n:.{digits}f}" if not float(n).is_integer() else f"{int(n)}"


def format_rate(bytes_per_s: float) -> str:
    """Bandwidth in decimal units, as drive and link ratings are quoted."""
    if bytes_per_s is None or math.isnan(bytes_per_s):
        return "-"
    for unit, factor in (("GB/s", 1e9), ("MB/s", 1e6), ("kB/s", 1e3)):
        if abs(bytes_per_s) >= factor:
            return f"{bytes_per_s / factor:.2f} {unit}"
    return f"{bytes_per_s:.0f} B/s"


def format_latency(ns: float | None) -> str:
    """``850 µs``, ``1.24 ms``, ``0.56 s`` from nanoseconds."""
    if ns is None or math.isnan(ns):
        return "-"
    if ns >= 1e9:
        return f"{ns / 1e9:.2f} s"
    if ns >= 1e6:
        return f"{ns / 1e6:.2f} ms"
    if ns >= 1e3:
        return f"{ns / 1e3:.1f} µs"
    return f"{ns:.0f} ns"


def format_duration(seconds: float) -> str:
    """``45s``, ``5m``, ``1h 30m``, ``4.8s``, ``0.25s``: tenths of a second at
    most under a minute (a measured 26.5088 s reads as 26.5s), two figures below
    one second, 0s below a millisecond."""
    if abs(seconds) < 1e-3:
        return "0s"
    if seconds < 60:
        text = f"{seconds:.2g}" if abs(seconds) < 1 else f"{seconds:.1f}".removesuffix(".0")
        return f"{text}s"
    minutes, secs = divmod(round(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    parts = [f"{hours}h"] if hours else []
    if minutes:
        parts.append(f"{minutes}m")
    if secs:
        parts.append(f"{secs}s")
    return " ".join(parts)


_RATE_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*?)\s*(?:/\s*s|ps)?\s*$")


def parse_rate(value: str) -> float:
    """Bytes per second from ``3.5GB/s``, ``985MB/s``, ``2GiB/s`` or ``25Gb/s`` (bits)."""
    match = _RATE_RE.match(str(value))
    if not match:
        raise ValueError(f"not a rate: {value!r} (use e.g. 3.5GB/s, 600MB/s, 25Gb/s)")
    number, unit = match.groups()
    if len(unit) == 2 and unit[1] == "b" and unit[0].upper() in "KMGT":
        bits = float(number) * 1000 ** ("KMGT".index(unit[0].upper()) + 1)
        return _finite(bits / 8, value)
    if unit.lower() in ("gbit", "mbit", "kbit"):
        return _finite(float(number) * 1000 ** ("kmg".index(unit[0].lower()) + 1) / 8, value)
    try:
        return float(parse_size(f"{number}{unit or 'B'}"))
    except ValueError:
        raise ValueError(f"not a rate: {value!r} (use e.g. 3.5GB/s, 600MB/s, 25Gb/s)") from None


_IOPS_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kKmMgG]?)\s*iops\s*$", re.IGNORECASE)


_PER_SECOND_RE = re.compile(r"(/\s*s|ps|bit)\s*$", re.IGNORECASE)


def parse_limit(value: str) -> tuple[float, str]:
    """A rated figure: ``500kIOPS`` -> (500000, "iops"); ``3.5GB/s`` ->
    (3.5e9, "bytes_per_s"). The unit is required: ``8k`` could be IOPS or
    bytes per second, and a limit read the wrong way makes every percentage
    wrong."""
    match = _IOPS_RE.match(str(value))
    if match:
        number, prefix = match.groups()
        factor = 1000 ** ("KMG".index(prefix.upper()) + 1) if prefix else 1
        try:
            return _finite(float(number) * factor, value), "iops"
        except ValueError:
            raise ValueError(f"not a limit: {value!r} (too large)") from None
    example = "a bandwidth such as 3.5GB/s, or IOPS such as 500kIOPS"
    if not _PER_SECOND_RE.search(str(value)):
        raise ValueError(f"not a limit: {value!r} has no unit per second ({example})")
    try:
        return parse_rate(value), "bytes_per_s"
    except ValueError:
        raise ValueError(f"not a limit: {value!r} ({example})") from None


_LATENCY_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ns|us|µs|ms|s)\s*$")
_LATENCY_NS = {"ns": 1.0, "us": 1e3, "µs": 1e3, "ms": 1e6, "s": 1e9}
_LIMIT_RE = re.compile(r"^\s*(mean|p\d+(?:\.\d+)?)\s*(?:<=|<|=<)\s*(.+)$", re.IGNORECASE)


def parse_latency(value: str) -> float:
    """Nanoseconds from ``500us``, ``1ms``, ``2.5ms``, ``1s`` (a unit is required)."""
    match = _LATENCY_RE.match(str(value))
    if not match:
        raise ValueError(f"not a latency: {value!r} (use e.g. 500us, 1ms, 20ms)")
    number, unit = match.groups()
    return _finite(float(number) * _LATENCY_NS[unit], value)


def _finite(number: float, given: object) -> float:
    if not math.isfinite(number) or number > 1e30:
        raise ValueError(f"{given!r} is too large a number")
    return number


def parse_latency_limit(text: str) -> tuple[str, float]:
    """``p99<=1ms`` -> ("p99", 1e6); ``mean<=20ms`` -> ("mean", 2e7).

    The statistic is ``mean`` or a percentile ``pNN[.N]`` (0 < NN < 100).
    """
    match = _LIMIT_RE.match(str(text))
    if not match:
        raise ValueError(f"not a latency limit: {text!r} (use e.g. p99<=1ms or mean<=20ms)")
    stat, value = match.group(1).lower(), match.group(2)
    if stat != "mean" and not 0 < float(stat[1:]) < 100:
        raise ValueError(f"{stat} is not a percentile between p0 and p100")
    limit = parse_latency(value)
    if limit <= 0:
        raise ValueError(f"the limit in {text!r} must be greater than zero")
    return stat, limit
