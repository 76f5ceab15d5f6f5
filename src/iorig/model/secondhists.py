"""Per-second latency histograms, kept sparse.

A second of fio's histogram log fills a few dozen of its 1,856 bins (a
device's latencies gather within a factor of two or so), so a dense row is
almost all zeros: 14.8 KB a second, 59 KB a host-second once a multi-host
phase holds it for the host, its workload and the aggregate
(bench/scale.py). Here a row is its non-empty bins and their counts, in
compressed-row form; every count is kept, so every per-second figure drawn
from these rows (a second's percentiles, the merge of a window of seconds)
is exactly what the dense rows gave (docs/methodology.md §9).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from iorig.model.histogram import BIN_VALUES_NS, NR_BINS

# rows summed at a time: bounds the dense scratch of ``add`` to 16 MB
_BLOCK_ROWS = 1024


@dataclass(frozen=True, eq=False)
class SecondHists:
    """Row i's non-empty bins are ``bins[offsets[i]:offsets[i + 1]]``,
    ascending, with ``counts`` (all > 0) at the same places. No rows at all
    means fio logged no histograms."""

    offsets: np.ndarray  # int64, rows + 1, from 0
    bins: np.ndarray  # uint16
    counts: np.ndarray  # uint32 where every count fits (see ``_narrow``), else uint64

    def __len__(self) -> int:
        return int(self.offsets.size) - 1

    @property
    def nbytes(self) -> int:
        return int(self.offsets.nbytes + self.bins.nbytes + self.counts.nbytes)

    # ------------------------------------------------------------ building

    @classmethod
    def empty(cls, rows: int = 0) -> SecondHists:
        """``rows`` seconds without completions (0: no histograms at all)."""
        return cls(np.zeros(rows + 1, np.int64), np.zeros(0, np.uint16), np.zeros(0, np.uint64))

    @classmethod
    def from_dense(cls, rows: np.ndarray) -> SecondHists:
        """From rows × 1,856 counts."""
        dense = np.asarray(rows, dtype=np.uint64).reshape(-1, NR_BINS)
        row, col = np.nonzero(dense)  # row-major: each row's bins ascending
        offsets = np.zeros(dense.shape[0] + 1, np.int64)
        np.cumsum(np.bincount(row, minlength=dense.shape[0]), out=offsets[1:])
        return cls(offsets, col.astype(np.uint16), _narrow(dense[row, col]))

    @classmethod
    def from_rows(cls, rows: Sequence[tuple[np.ndarray, np.ndarray] | None]) -> SecondHists:
        """From each row's (bins ascending, counts > 0); None: an empty row."""
        kept = [r for r in rows if r is not None]
        offsets = np.zeros(len(rows) + 1, np.int64)
        np.cumsum([0 if r is None else r[0].size for r in rows], out=offsets[1:])
        if not kept:
            return cls(offsets, np.zeros(0, np.uint16), np.zeros(0, np.uint64))
        return cls(
            offsets,
            np.concatenate([b for b, _ in kept]).astype(np.uint16),
            _narrow(np.concatenate([c for _, c in kept]).astype(np.uint64)),
        )

    @classmethod
    def concat(cls, parts: Sequence[SecondHists]) -> SecondHists:
        """The rows of ``parts`` one after another."""
        if not parts:
            return cls.empty()
        sizes = np.cumsum([0, *(p.counts.size for p in parts[:-1])])
        offsets = [parts[0].offsets[:1]] + [
            p.offsets[1:] + base for p, base in zip(parts, sizes, strict=True)
        ]
        return cls(
            np.concatenate(offsets),
            np.concatenate([p.bins for p in parts]),
            np.concatenate([p.counts for p in parts]),
        )

    # ------------------------------------------------------------ reading

    def lengths(self) -> np.ndarray:
        """Non-empty bins of each row."""
        return np.diff(self.offsets)

    def row_ids(self) -> np.ndarray:
        """The row of each stored bin."""
        return np.repeat(np.arange(len(self)), self.lengths())

    def dense(self) -> np.ndarray:
        """rows × 1,856 counts (for small series: tests, one window)."""
        out = np.zeros((len(self), NR_BINS), np.uint64)
        out[self.row_ids(), self.bins.astype(np.int64)] = self.counts
        return out

    def row(self, i: int) -> np.ndarray:
        """Second ``i`` as 1,856 counts."""
        out = np.zeros(NR_BINS, np.uint64)
        lo, hi = int(self.offsets[i]), int(self.offsets[i + 1])
        out[self.bins[lo:hi].astype(np.int64)] = self.counts[lo:hi]
        return out

    def totals(self) -> np.ndarray:
        """Completions in each second."""
        sums = np.zeros(len(self), np.uint64)
        nonempty = self.lengths() > 0
        if self.counts.size:
            starts = self.offsets[:-1][nonempty]
            sums[nonempty] = np.add.reduceat(self.counts, starts, dtype=np.uint64)
        return sums

    def merged(self, rows: np.ndarray | None = None) -> np.ndarray:
        """The exact sum (1,856 counts) of the selected rows (a boolean mask
        or indexes; all rows without one): percentiles over a window of
        seconds are read from it, never averaged."""
        taken = self if rows is None else self.take(rows)
        out = np.zeros(NR_BINS, np.uint64)
        np.add.at(out, taken.bins.astype(np.int64), taken.counts)
        return out

    def take(self, rows: np.ndarray) -> SecondHists:
        """The selected rows (a boolean mask, or indexes with -1 for an
        empty row), in that order."""
        index = np.asarray(rows)
        if index.dtype == bool:
            index = np.flatnonzero(index)
        index = index.astype(np.int64)
        if index.size and index[0] >= 0 and np.array_equal(index, index[0] + np.arange(index.size)):
            return self.span(int(index[0]), int(index[0]) + index.size)  # shared, not copied
        lengths = np.where(index >= 0, self.lengths()[np.maximum(index, 0)] if len(self) else 0, 0)
        index = np.maximum(index, 0)
        offsets = np.zeros(index.size + 1, np.int64)
        np.cumsum(lengths, out=offsets[1:])
        # each kept bin's place: its row's start, plus its place in the row
        starts = np.repeat(self.offsets[index] - offsets[:-1], lengths)
        at = starts + np.arange(int(offsets[-1]))
        return SecondHists(offsets, self.bins[at], self.counts[at])

    def head(self, n: int) -> SecondHists:
        """The first ``n`` rows."""
        return self.span(0, min(n, len(self)))

    def span(self, first: int, last: int) -> SecondHists:
        """Rows ``first`` … ``last - 1``, sharing this one's bins and counts."""
        lo, hi = int(self.offsets[first]), int(self.offsets[last])
        return SecondHists(
            self.offsets[first : last + 1] - lo, self.bins[lo:hi], self.counts[lo:hi]
        )

    def percentile_each(self, p: float) -> np.ndarray:
        """The latency (ns) at percentile ``p`` of each second, as
        ``histogram.percentiles`` reads one row; NaN for a second without
        completions."""
        out = np.full(len(self), math.nan)
        if not self.counts.size:
            return out
        cumulative = np.cumsum(self.counts.astype(np.int64))
        before = np.concatenate([[0], cumulative])[self.offsets[:-1]]
        n = np.concatenate([[0], cumulative])[self.offsets[1:]] - before
        frac = Fraction(str(p))  # the decimal as typed, as histogram.percentiles
        needed = -((-frac.numerator * n) // (frac.denominator * 100))  # ceil, exactly
        rows = np.flatnonzero(n > 0)
        at = np.searchsorted(cumulative, before[rows] + np.maximum(needed[rows], 1), side="left")
        out[rows] = BIN_VALUES_NS[self.bins[at].astype(np.int64)]
        return out

    def mean_each(self) -> np.ndarray:
        """The mean latency (ns) of each second from its bins' values, as
        ``histogram.mean`` reads one row: within half a bin (0.8 %) of the
        exact mean; NaN for a second without completions. Read a block of
        rows at a time: a day's aggregate holds millions of bins."""
        out = np.full(len(self), math.nan)
        for first in range(0, len(self), _BLOCK_ROWS):
            block = self.span(first, min(len(self), first + _BLOCK_ROWS))
            rows, weights = block.row_ids(), block.counts.astype(np.float64)
            n = np.bincount(rows, weights=weights, minlength=len(block))
            values = BIN_VALUES_NS[block.bins.astype(np.int64)]
            total = np.bincount(rows, weights=weights * values, minlength=len(block))
            with np.errstate(invalid="ignore", divide="ignore"):
                out[first : first + len(block)] = np.where(n > 0, total / n, math.nan)
        return out

    # ------------------------------------------------------------ combining

    @classmethod
    def add(cls, parts: Sequence[SecondHists], n: int) -> SecondHists:
        """Row-by-row sums of the first ``n`` rows of every part; no rows
        when a part has fewer (a sum missing a part would be wrong)."""
        if not parts or any(len(p) < n for p in parts):
            return cls.empty()
        if len(parts) == 1:
            return parts[0].head(n)
        blocks = []
        for first in range(0, n, _BLOCK_ROWS):
            last = min(n, first + _BLOCK_ROWS)
            scratch = np.zeros((last - first) * NR_BINS, np.uint64)
            for p in parts:
                lo, hi = int(p.offsets[first]), int(p.offsets[last])
                rows = np.repeat(np.arange(last - first), np.diff(p.offsets[first : last + 1]))
                np.add.at(scratch, rows * NR_BINS + p.bins[lo:hi].astype(np.int64), p.counts[lo:hi])
            blocks.append(cls.from_dense(scratch.reshape(-1, NR_BINS)))
        return cls.concat(blocks) if blocks else cls.empty()

    # ------------------------------------------------------------ storing

    def encode(self) -> bytes:
        """Little-endian: each row's number of bins (uint16), then every
        bin (uint16), then every count (uint64); callers compress."""
        return (
            self.lengths().astype("<u2").tobytes()
            + self.bins.astype("<u2").tobytes()
            + self.counts.astype("<u8").tobytes()
        )

    @classmethod
    def decode(cls, data: bytes, rows: int) -> SecondHists:
        """What ``encode`` wrote for ``rows`` seconds; ValueError naming
        what is wrong with anything else."""
        if len(data) < 2 * rows:
            raise ValueError(f"holds {len(data)} bytes, too few for {rows} rows")
        lengths = np.frombuffer(data, "<u2", rows).astype(np.int64)
        if lengths.size and int(lengths.max()) > NR_BINS:
            raise ValueError(f"a row has more than {NR_BINS} bins")
        offsets = np.zeros(rows + 1, np.int64)
        np.cumsum(lengths, out=offsets[1:])
        size = int(offsets[-1])
        if len(data) != 2 * rows + 10 * size:
            raise ValueError(f"holds {len(data)} bytes, not the {2 * rows + 10 * size} it says")
        bins = np.frombuffer(data, "<u2", size, 2 * rows).astype(np.uint16)
        counts = _narrow(np.frombuffer(data, "<u8", size, 2 * rows + 2 * size).astype(np.uint64))
        if size and int(bins.max()) >= NR_BINS:
            raise ValueError(f"a bin is past fio's {NR_BINS}")
        if size and not counts.all():
            raise ValueError("a stored bin is empty")
        # ascending within each row: a step down is allowed only where a row starts
        steps = np.flatnonzero(np.diff(bins.astype(np.int64)) <= 0) + 1
        if np.setdiff1d(steps, offsets).size:
            raise ValueError("a row's bins are not in ascending order")
        return cls(offsets, bins, counts)


def _narrow(counts: np.ndarray) -> np.ndarray:
    """``counts`` as uint32 when every one fits (a bin of one second of one
    scope never holds four billion I/Os): 6 bytes a stored bin, not 10."""
    if counts.size and int(counts.max()) >= 1 << 32:
        return counts.astype(np.uint64)
    return counts.astype(np.uint32)
