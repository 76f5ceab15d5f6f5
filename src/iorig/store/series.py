"""Reading a scope's per-second series: its samples as arrays and its
per-second histograms, all of them at once or one direction when asked for.

A day on sixteen hosts holds 33 scopes of 86,400 seconds; most commands
read only the aggregate's. The repository reads the aggregate's series with
the phase and every other scope's when it is used (``LazySeries``), each
time from the database file, so that a report drawing each host in turn
never holds them all (bench/scale.py).
"""

from __future__ import annotations

import itertools
import sqlite3
from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import numpy as np

from iorig.errors import UserError
from iorig.model import SecondHists, Series
from iorig.store.cells import (
    DAMAGED_HINT,
    DamagedData,
    unpack,
    unpack_dense_seconds,
    unpack_seconds,
)
from iorig.store.schema import SPARSE_SECONDS

# The rows of a scope, or of one of its directions: two statements, so that
# each reads the rows it needs through the (result_id, ddir, t_s) key.
_WHERE = {
    False: "result_id = :rid",
    True: "result_id = :rid AND ddir = :ddir",
}
# a sample SQLite holds as something other than a number (a crafted file)
_ODD_SAMPLE = (
    "SELECT 1 FROM samples WHERE {where} AND NOT ("
    "typeof(t_s) IN ('integer', 'real') AND typeof(iops) IN ('integer', 'real') "
    "AND typeof(bytes_per_s) IN ('integer', 'real') "
    "AND typeof(lat_mean_ns) IN ('integer', 'real', 'null')) LIMIT 1"
)
_NO_SAMPLES = np.zeros((4, 0))


def read_only(array: np.ndarray) -> np.ndarray:
    array.flags.writeable = False
    return array


def decode_histogram(blob: object, rows: int | None, what: str, *, dense: bool) -> Any:
    """A total (``rows`` None: 1,856 counts) or the per-second rows
    (``dense``: as schema 10 and older stored them), read-only."""
    if rows is None:
        return read_only(unpack(blob, None, what))
    hists = unpack_dense_seconds(blob, rows, what) if dense else unpack_seconds(blob, rows, what)
    for array in (hists.offsets, hists.bins, hists.counts):
        read_only(array)
    return hists


def series_ddirs(conn: sqlite3.Connection, result_id: int) -> tuple[str, ...]:
    """The directions a scope has per-second series of."""
    rows = conn.execute(
        "SELECT ddir FROM samples WHERE result_id = ? UNION "
        "SELECT ddir FROM histograms WHERE result_id = ? AND kind = 'per_second' ORDER BY ddir",
        (result_id, result_id),
    ).fetchall()
    return tuple(r[0] for r in rows)


def read_series(
    conn: sqlite3.Connection,
    result_id: int,
    ddir: str | None = None,
    *,
    dense: bool,
    decoded: dict[tuple[int, bytes], Any] | None = None,
) -> dict[str, Series]:
    """The scope's series of ``ddir`` (every direction: None). ``decoded``
    shares a histogram stored twice in a phase (a direction that is all of
    ``all``, a host's one workload and the host) between its scopes."""
    params = {"rid": result_id, "ddir": ddir}
    where = _WHERE[ddir is not None]
    if conn.execute(_ODD_SAMPLE.format(where=where), params).fetchone():
        raise DamagedData("a per-second sample is not a number")
    rows = conn.execute(
        "SELECT ddir, t_s, iops, bytes_per_s, lat_mean_ns FROM samples "
        f"WHERE {where} ORDER BY ddir, t_s",
        params,
    ).fetchall()
    columns: dict[str, np.ndarray] = {}
    for name, group in itertools.groupby(rows, key=lambda row: row[0]):
        # t_s, iops, bytes/s, latency (NULL: NaN) as columns
        columns[name] = np.array([row[1:] for row in group], dtype=float).reshape(-1, 4).T
    del rows
    hists: dict[str, SecondHists] = {}
    for name, count, blob in conn.execute(
        f"SELECT ddir, rows, data FROM histograms WHERE {where} AND kind = 'per_second'",
        params,
    ):
        what = f"histogram ('per_second', {name!r:.20})"
        expected = columns.get(name, _NO_SAMPLES).shape[1]
        if count != expected:
            raise DamagedData(f"{what} says {count!r:.20} rows, not {expected}")
        key = (expected, blob if isinstance(blob, bytes) else b"")
        found = None if decoded is None or not isinstance(blob, bytes) else decoded.get(key)
        if found is None:  # decoding says what is wrong with a blob that is not one
            found = decode_histogram(blob, expected, what, dense=dense)
            if decoded is not None:
                decoded[key] = found
        hists[name] = found
    out = {}
    for name in dict.fromkeys([*columns, *hists]):
        t_s, iops, bytes_per_s, lat_mean_ns = columns.get(name, _NO_SAMPLES)
        out[name] = Series(
            ddir=name,
            t_s=t_s.astype(np.int64),
            iops=iops,
            bytes_per_s=bytes_per_s,
            lat_mean_ns=lat_mean_ns,
            hist=hists.get(name, SecondHists.empty()),
        )
    return out


class LazySeries(Mapping[str, Series]):
    """A scope's series by direction, each read from the database file when
    asked for and not kept (the caller keeps what it needs)."""

    def __init__(self, ddirs: tuple[str, ...], load: Callable[[str], Series]) -> None:
        self._ddirs = ddirs
        self._load = load

    def __getitem__(self, ddir: str) -> Series:
        if ddir not in self._ddirs:
            raise KeyError(ddir)
        return self._load(ddir)

    def __iter__(self) -> Iterator[str]:
        return iter(self._ddirs)

    def __len__(self) -> int:
        return len(self._ddirs)

    def __contains__(self, ddir: object) -> bool:
        return ddir in self._ddirs

    def __repr__(self) -> str:
        return f"LazySeries({', '.join(self._ddirs)})"


def in_place_loader(
    conn: sqlite3.Connection,
    errors: Callable[[], AbstractContextManager[None]],
    path: Path,
    run_id: str,
    result_id: int,
) -> Callable[[str], Series]:
    """Reads one direction of a scope of a file read in place (a bundle),
    through its own guarded connection while it is open; ``errors`` says
    what SQLite's errors mean (Ctrl-C, too much work, damage)."""
    dense = int(conn.execute("PRAGMA user_version").fetchone()[0]) < SPARSE_SECONDS

    def load(ddir: str) -> Series:
        try:
            with errors():
                return read_series(conn, result_id, ddir, dense=dense)[ddir]
        except (ValueError, TypeError) as exc:  # DamagedData among them
            raise UserError(
                f"run {run_id} in {path} is damaged: {exc}", hint=DAMAGED_HINT
            ) from None

    return load


def loader(path: Path, run_id: str, result_id: int) -> Callable[[str], Series]:
    """Reads one direction of a scope from the database at ``path``, on a
    connection of its own: the command may have closed its store by then."""

    def load(ddir: str) -> Series:
        try:
            conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
            try:
                return read_series(conn, result_id, ddir, dense=False)[ddir]
            finally:
                conn.close()
        except (ValueError, TypeError, KeyError, sqlite3.Error) as exc:
            raise UserError(
                f"run {run_id} in {path} is damaged: its per-second series could not be read "
                f"({exc})",
                hint=DAMAGED_HINT,
            ) from None

    return load
