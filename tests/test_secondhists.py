"""Sparse per-second histograms give exactly what dense rows give."""

from __future__ import annotations

import math
import zlib

import numpy as np
import pytest

from iorig.model import histogram
from iorig.model.secondhists import SecondHists


def _dense(rng: np.random.Generator, rows: int, busy: int = 40) -> np.ndarray:
    """Rows with a few dozen busy bins around a random centre, some rows empty."""
    out = np.zeros((rows, histogram.NR_BINS), np.uint64)
    for i in range(rows):
        if rng.random() < 0.1:
            continue  # a second without completions
        centre = int(rng.integers(busy, histogram.NR_BINS - busy))
        bins = rng.integers(centre - busy // 2, centre + busy // 2, size=busy)
        np.add.at(out[i], bins, rng.integers(1, 5000, size=busy).astype(np.uint64))
    return out


@pytest.fixture
def dense() -> np.ndarray:
    return _dense(np.random.default_rng(7), 300)


def test_dense_round_trips(dense: np.ndarray) -> None:
    sparse = SecondHists.from_dense(dense)
    assert len(sparse) == 300
    assert np.array_equal(sparse.dense(), dense)
    assert all(np.array_equal(sparse.row(i), dense[i]) for i in (0, 17, 299))
    assert np.array_equal(sparse.totals(), dense.sum(axis=1))
    # forty bins a second take under a thirtieth of the dense row's bytes
    assert sparse.nbytes < dense.nbytes / 30


@pytest.mark.parametrize("p", [50.0, 90.0, 99.0, 99.9, 99.99, 100.0])
def test_each_seconds_percentile_is_the_dense_rows(dense: np.ndarray, p: float) -> None:
    got = SecondHists.from_dense(dense).percentile_each(p)
    for i, row in enumerate(dense):
        want = histogram.percentiles(row, (p,))[p]
        assert (math.isnan(want) and math.isnan(got[i])) or got[i] == want, i


def test_each_seconds_mean_is_the_dense_rows_over_several_blocks() -> None:
    dense = _dense(np.random.default_rng(11), 2_500)  # blocks of 1,024 rows
    got = SecondHists.from_dense(dense).mean_each()
    want = np.array([histogram.mean(row) for row in dense])
    assert np.isnan(want).sum() > 100
    assert np.array_equal(np.isnan(got), np.isnan(want))
    assert np.allclose(got[~np.isnan(got)], want[~np.isnan(want)], rtol=1e-12)


def test_merged_windows_and_taken_rows_are_exact(dense: np.ndarray) -> None:
    sparse = SecondHists.from_dense(dense)
    mask = np.zeros(300, bool)
    mask[40:95] = True
    assert np.array_equal(sparse.merged(mask), dense[mask].sum(axis=0))
    assert np.array_equal(sparse.merged(), dense.sum(axis=0))
    picked = np.array([5, 3, 250, 3])
    assert np.array_equal(sparse.take(picked).dense(), dense[picked])
    assert np.array_equal(sparse.take(mask).dense(), dense[mask])
    assert np.array_equal(sparse.head(10).dense(), dense[:10])
    assert np.array_equal(sparse.head(1000).dense(), dense)


def test_sums_of_parts_add_row_by_row_in_blocks() -> None:
    rng = np.random.default_rng(3)
    parts = [_dense(rng, rows) for rows in (2100, 2500, 2050)]  # past one block of rows
    got = SecondHists.add([SecondHists.from_dense(p) for p in parts], 2050)
    assert np.array_equal(got.dense(), sum(p[:2050] for p in parts))
    # a part without its seconds' histograms makes no sum at all
    short = SecondHists.add([SecondHists.from_dense(parts[0]), SecondHists.empty()], 2050)
    assert len(short) == 0


def test_concat_puts_rows_one_after_another(dense: np.ndarray) -> None:
    a, b = SecondHists.from_dense(dense[:100]), SecondHists.from_dense(dense[100:])
    assert np.array_equal(SecondHists.concat([a, b]).dense(), dense)
    assert len(SecondHists.concat([])) == 0


def test_stored_form_round_trips_and_is_small(dense: np.ndarray) -> None:
    sparse = SecondHists.from_dense(dense)
    back = SecondHists.decode(sparse.encode(), 300)
    assert np.array_equal(back.dense(), dense)
    assert len(zlib.compress(sparse.encode())) < len(zlib.compress(histogram.encode(dense)))
    assert len(SecondHists.decode(SecondHists.empty(5).encode(), 5)) == 5


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (lambda d: d[:-1], "not the"),
        (lambda d: d[:3], "too few"),
        (lambda d: b"\xff\xff" + d[2:], "more than"),
        (lambda d: d[:4] + b"\x50\x07" + d[6:], "past fio"),  # bin 1872
        (lambda d: d[:4] + b"\x09\x00\x08\x00" + d[8:], "ascending"),
        (lambda d: d[:-8] + bytes(8), "empty"),
    ],
)
def test_damaged_stored_rows_are_refused_by_name(damage, message: str) -> None:
    good = SecondHists.from_dense(
        np.array([[0] * 8 + [3, 4] + [0] * (histogram.NR_BINS - 10)] * 2, np.uint64)
    ).encode()
    assert SecondHists.decode(good, 2).counts.tolist() == [3, 4, 3, 4]
    with pytest.raises(ValueError, match=message):
        SecondHists.decode(damage(good), 2)


def test_consecutive_rows_and_a_lone_part_are_shared_not_copied(dense: np.ndarray) -> None:
    sparse = SecondHists.from_dense(dense)
    middle = sparse.take(np.arange(100, 200))
    assert np.shares_memory(middle.counts, sparse.counts)
    assert np.array_equal(middle.dense(), dense[100:200])
    window = np.zeros(300, bool)
    window[10:20] = True
    assert np.shares_memory(sparse.take(window).bins, sparse.bins)
    assert np.array_equal(sparse.span(10, 20).dense(), dense[10:20])
    alone = SecondHists.add([sparse], 250)
    assert np.shares_memory(alone.counts, sparse.counts)
    assert np.array_equal(alone.dense(), dense[:250])
    # rows taken with gaps or out of order are copies, as before
    assert np.array_equal(sparse.take(np.array([3, 2, -1])).dense()[:2], dense[[3, 2]])
    assert not sparse.take(np.array([3, 2, -1])).dense()[2].any()


def test_counts_are_kept_in_four_bytes_unless_one_needs_eight(dense: np.ndarray) -> None:
    assert SecondHists.from_dense(dense).counts.dtype == np.uint32
    huge = dense.copy()
    huge[5, 700] = 1 << 40  # never seen in a second, but kept exactly
    sparse = SecondHists.from_dense(huge)
    assert sparse.counts.dtype == np.uint64
    assert np.array_equal(SecondHists.decode(sparse.encode(), 300).dense(), huge)
    assert sparse.totals()[5] == huge[5].sum()
