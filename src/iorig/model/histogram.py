"""fio's latency histogram layout: bin values, merging, percentiles, mean.

fio records every completion latency (in ns) into 1,856 log-linear bins
(FIO_IO_U_PLAT_BITS = 6, FIO_IO_U_PLAT_GROUP_NR = 29): the first 128 bins hold
exact values, then every power of two is split into 64 equal buckets, so a bin
value is within about 0.8 % of any latency it holds. The layout is the same on
every host and every fio build, so histograms merge by adding counts; that is
the only correct way to get percentiles across jobs, hosts or time windows.

json+ output names each non-empty bin by its representative value
(``plat_idx_to_val``); these functions map values back to indexes and compute
percentiles the way fio's ``calc_clat_percentiles`` does, so a single job's
percentiles match fio's own to the nanosecond.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from fractions import Fraction

import numpy as np

PLAT_BITS = 6
PLAT_VAL = 1 << PLAT_BITS
PLAT_GROUP_NR = 29
NR_BINS = PLAT_GROUP_NR * PLAT_VAL  # 1856

DEFAULT_PERCENTILES: tuple[float, ...] = (50.0, 90.0, 99.0, 99.9, 99.99)


def _bin_value(idx: int) -> int:
    # Mirrors fio stat.c plat_idx_to_val(): the bucket's midpoint, truncated.
    if idx < (PLAT_VAL << 1):
        return idx
    error_bits = (idx >> PLAT_BITS) - 1
    base = 1 << (error_bits + PLAT_BITS)
    k = idx % PLAT_VAL
    return base + int((k + 0.5) * (1 << error_bits))


BIN_VALUES_NS: np.ndarray = np.array([_bin_value(i) for i in range(NR_BINS)], dtype=np.float64)
_VALUE_TO_INDEX: dict[int, int] = {int(v): i for i, v in enumerate(BIN_VALUES_NS)}


def empty() -> np.ndarray:
    return np.zeros(NR_BINS, dtype=np.uint64)


def bin_index(values_ns: np.ndarray) -> np.ndarray:
    """The bin of each latency, as fio's ``plat_val_to_idx`` files it."""
    values = np.asarray(values_ns, dtype=np.uint64)
    msb = np.zeros(values.shape, dtype=np.int64)
    nonzero = values > 0
    msb[nonzero] = np.floor(np.log2(values[nonzero].astype(np.float64))).astype(np.int64)
    # log2 of a float can land one off right at a power of two: correct it exactly
    too_big = nonzero & (np.left_shift(np.uint64(1), msb.astype(np.uint64)) > values)
    msb[too_big] -= 1
    exact = msb <= PLAT_BITS
    error_bits = np.maximum(msb - PLAT_BITS, 0)
    base = (error_bits + 1) << PLAT_BITS
    offset = (values >> error_bits.astype(np.uint64)).astype(np.int64) & (PLAT_VAL - 1)
    idx = np.where(exact, values.astype(np.int64), base + offset)
    return np.minimum(idx, NR_BINS - 1)


def from_values(values_ns: np.ndarray) -> np.ndarray:
    """Counts array of individual latencies (per-I/O logs)."""
    counts = empty()
    np.add.at(counts, bin_index(values_ns), np.uint64(1))
    return counts


def from_json_bins(bins: Mapping[str, int]) -> np.ndarray:
    """Counts array from json+ ``{"<bin value ns>": count}``."""
    counts = empty()
    for key, count in bins.items():
        try:
            idx = _VALUE_TO_INDEX[int(key)]
        except (KeyError, ValueError):
            raise ValueError(f"{key!r} is not a fio latency bin value") from None
        counts[idx] += int(count)
    return counts


def merge(histograms: Iterable[np.ndarray]) -> np.ndarray:
    """Exact merge: the counts add because every histogram shares fio's layout."""
    total = empty()
    for counts in histograms:
        total += np.asarray(counts, dtype=np.uint64)
    return total


def percentiles(
    counts: np.ndarray,
    points: Sequence[float] = DEFAULT_PERCENTILES,
    within_ns: tuple[float, float] | None = None,
) -> dict[float, float]:
    """Latency (ns) at each percentile: the first bin whose cumulative count
    reaches p % of all samples, as fio computes it. Empty histogram -> NaN.

    ``within_ns``: the fastest and slowest completion fio measured. A bin's
    value is its midpoint, which in the bins holding them may lie below the
    minimum or above the maximum (4.01 s for a slowest I/O of 4.00 s); the
    percentile itself cannot, so it is kept within them."""
    counts = np.asarray(counts, dtype=np.uint64)
    n = int(counts.sum())
    if n == 0:
        return {p: float("nan") for p in points}
    cumulative = np.cumsum(counts, dtype=np.uint64)
    lo, hi = within_ns if within_ns is not None and _a_range(*within_ns) else (0.0, math.inf)
    result: dict[float, float] = {}
    for p in points:
        # Exact threshold: cumulative * 100 >= p * n, with p as the decimal typed.
        frac = Fraction(str(p))
        threshold = frac * n / 100
        needed = int(-(-threshold.numerator // threshold.denominator))  # ceil
        idx = int(np.searchsorted(cumulative, max(needed, 1), side="left"))
        result[p] = min(max(float(BIN_VALUES_NS[min(idx, NR_BINS - 1)]), lo), hi)
    return result


def _a_range(lo: float, hi: float) -> bool:
    """fio's min and max of a direction that completed I/O (not NaN, 0 or swapped)."""
    return math.isfinite(lo) and math.isfinite(hi) and 0 <= lo <= hi and hi > 0


def mean(counts: np.ndarray) -> float:
    """Mean latency (ns) estimated from bin values (within fio's bin error)."""
    counts = np.asarray(counts, dtype=np.float64)
    n = counts.sum()
    if n == 0:
        return float("nan")
    return float((counts * BIN_VALUES_NS).sum() / n)


# The buckets a metrics endpoint exports latency in (``iorig_io_latency_seconds``,
# a Prometheus histogram): fixed, so that every host's and every run's add up,
# and powers of two from 1 µs to 8.4 s. Each bound, 1,000 × 2^k ns = 125 ×
# 2^(k+3) ns, is an edge of fio's bins (those between 2^(k+9) and 2^(k+10) ns
# are 2^(k+3) ns wide), so every bin lies wholly in one bucket and a bucket
# counts exactly the completions fio binned below its bound: its ``le`` is
# met but for a completion of exactly the bound, which fio bins with the
# next 2^(k+3) ns and so the next bucket counts.
METRIC_BOUNDS_NS: tuple[int, ...] = tuple(1000 << k for k in range(24))
# each bin's bucket: the first bound above the bin's value (its midpoint)
_METRIC_BUCKET_OF_BIN = np.searchsorted(
    np.asarray(METRIC_BOUNDS_NS, dtype=np.float64), BIN_VALUES_NS, side="right"
)


def metric_buckets(counts: np.ndarray) -> tuple[int, ...]:
    """``counts`` (fio's bins) in the metric buckets: one count per bound of
    ``METRIC_BOUNDS_NS`` (the completions below it and at or above the bound
    before) and one for those at or above the last, not cumulative."""
    summed = np.zeros(len(METRIC_BOUNDS_NS) + 1, dtype=np.uint64)
    np.add.at(summed, _METRIC_BUCKET_OF_BIN, np.asarray(counts, dtype=np.uint64))
    return tuple(int(v) for v in summed)


def percentile_curve(counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(latency ns, cumulative fraction) at each non-empty bin, for CDF plots."""
    counts = np.asarray(counts, dtype=np.uint64)
    nonzero = np.nonzero(counts)[0]
    if nonzero.size == 0:
        return np.array([]), np.array([])
    cumulative = np.cumsum(counts, dtype=np.float64)
    return BIN_VALUES_NS[nonzero], cumulative[nonzero] / cumulative[-1]


def encode(counts: np.ndarray) -> bytes:
    """Compact little-endian uint64 bytes (callers compress)."""
    return np.asarray(counts, dtype="<u8").tobytes()


def decode(blob: bytes, rows: int | None = None) -> np.ndarray:
    array = np.frombuffer(blob, dtype="<u8").astype(np.uint64)
    if rows is None:
        if array.size != NR_BINS:
            raise ValueError(f"histogram has {array.size} bins, expected {NR_BINS}")
        return array
    return array.reshape(rows, NR_BINS)
