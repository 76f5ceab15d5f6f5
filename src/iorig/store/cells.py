"""How values sit in the database's cells — compressed blobs (histograms, job
files, fio output), NULL for NaN, "" for "all" scopes, commands as JSON — and
the refusal of data iorig could not have written.

A blob is never inflated past what its row can hold: a crafted 1 MB blob
would otherwise expand to 1 GiB in memory when a run is shown or imported.
"""

from __future__ import annotations

import json
import zlib
from enum import StrEnum
from typing import Any, TypeVar

import numpy as np

from iorig.model import SecondHists, histogram

E = TypeVar("E", bound=StrEnum)

# The most an artifact may inflate to: a compressed blob is never expanded
# past what its kind can hold (a crafted 1 MB blob would otherwise become 1 GiB).
ARTIFACT_LIMITS = {
    "job.fio": 4 << 20,
    "command": 1 << 20,
    "fio-output.json": 256 << 20,
    "fio-stderr.txt": 16 << 20,
}


DAMAGED_HINT = (
    "iorig did not write this data as it is now; restore the database from a backup "
    "or export the other runs"
)


class DamagedData(ValueError):
    """Stored data iorig could not have written (the message says which)."""


def pack(array: np.ndarray) -> bytes:
    return zlib.compress(histogram.encode(array), 6)


def pack_seconds(hists: SecondHists) -> bytes:
    return zlib.compress(hists.encode(), 6)


def unpack_seconds(blob: object, rows: int, what: str) -> SecondHists:
    """A per-second histogram blob as ``pack_seconds`` writes it (schema 11 on)."""
    data = inflate(blob, 2 * rows + 10 * rows * histogram.NR_BINS, what)
    try:
        return SecondHists.decode(data, rows)
    except ValueError as exc:
        raise DamagedData(f"{what} {exc}") from None


def unpack_dense_seconds(blob: object, rows: int, what: str) -> SecondHists:
    """A per-second histogram blob of schema 10 or older (``rows`` dense
    rows, or nothing), inflated a block of rows at a time: a day's dense rows
    are gigabytes that never need to exist at once."""
    if not isinstance(blob, bytes):
        raise DamagedData(f"{what} is not a compressed blob")
    row_bytes = histogram.NR_BINS * 8
    inflater = zlib.decompressobj()
    blocks, buffer, total, pending = [], b"", 0, blob
    try:
        while chunk := inflater.decompress(pending, 1024 * row_bytes):
            pending = inflater.unconsumed_tail
            total += len(chunk)
            if total > rows * row_bytes:
                raise DamagedData(
                    f"{what} expands beyond the {rows * row_bytes:,} bytes it can hold"
                )
            buffer += chunk
            whole = len(buffer) // row_bytes
            if whole:
                dense = histogram.decode(buffer[: whole * row_bytes], whole)
                blocks.append(SecondHists.from_dense(dense))
                buffer = buffer[whole * row_bytes :]
    except zlib.error as exc:
        raise DamagedData(f"{what} is not valid compressed data ({exc})") from None
    if not inflater.eof:
        raise DamagedData(f"{what} is truncated")
    if total == 0:
        return SecondHists.empty()  # fio logged none
    if total != rows * row_bytes:
        raise DamagedData(f"{what} does not hold the {rows * row_bytes} bytes its rows need")
    return SecondHists.concat(blocks)


def inflate(blob: object, limit: int, what: str) -> bytes:
    """``blob`` decompressed, refusing (without inflating further) past ``limit`` bytes."""
    if not isinstance(blob, bytes):
        raise DamagedData(f"{what} is not a compressed blob")
    inflater = zlib.decompressobj()
    try:
        data = inflater.decompress(blob, limit + 1)
    except zlib.error as exc:
        raise DamagedData(f"{what} is not valid compressed data ({exc})") from None
    if len(data) > limit:
        raise DamagedData(f"{what} expands beyond the {limit:,} bytes it can hold")
    if not inflater.eof:
        raise DamagedData(f"{what} is truncated")
    return data


def unpack(blob: object, rows: int | None, what: str) -> np.ndarray:
    """A histogram blob: one flat row (``rows`` None, a total) or ``rows``
    per-second rows, which may be absent (fio logged none)."""
    size = histogram.NR_BINS * 8 * (1 if rows is None else rows)
    data = inflate(blob, size, what)
    if rows is not None and not data:
        return np.zeros((0, histogram.NR_BINS), np.uint64)
    if len(data) != size:
        raise DamagedData(f"{what} holds {len(data)} bytes, not the {size} its rows need")
    return histogram.decode(data, rows)


def member(kind: type[E], value: object, what: str) -> E:
    try:
        return kind(value)  # type: ignore[call-arg]
    except ValueError:
        choices = ", ".join(str(m) for m in kind)  # type: ignore[attr-defined]
        raise DamagedData(f"{what} is {value!r:.40}, not one of {choices}") from None


def scope_text(value: str | None) -> str:
    return "" if value is None else value  # the columns are NOT NULL: "" means "all"


def scope_value(text: str) -> str | None:
    return None if text == "" else text


def nan_to_none(value: float | None) -> float | None:
    if value is None or (isinstance(value, float) and value != value):
        return None
    return float(value)


def none_to_nan(value: object) -> Any:
    # Anything but a number stays as it is, for the checks to name it.
    if value is None:
        return float("nan")
    return float(value) if isinstance(value, int | float) else value


def command_text(command: tuple[str, ...]) -> str:
    return json.dumps(list(command)) if command else ""


def command(text: str) -> tuple[str, ...]:
    return tuple(json.loads(text)) if text else ()
