"""The queue depth fio really keeps, which is not always the one asked for.

fio's io_uring engine before fio 3.39 rounds fio's own iodepth up to a
power of two (engines/io_uring.c, ``fio_ioring_init``: "ring depth must be a
power-of-2", ``td->o.iodepth = roundup_pow2(td->o.iodepth)``), so fio makes
that many I/O units, while ``iodepth_low`` keeps the depth asked for: the
queue is refilled to the power of two whenever it drains to the depth asked.
``iodepth=3`` keeps 4 in flight (fio 3.33: 3.97 by Little's law, 99.99 % of
submissions at depth 4–7 in json+'s ``iodepth_level``), ``iodepth=5`` 5–8
(6.3 on average). fio 3.39 sizes only the ring (commit af0ad0fa, "don't
mess with non power-of-2 queue depth"). libaio and psync keep what they are
asked. Checked against real fio by tests/test_depth.py.
"""

from __future__ import annotations

import re

ROUNDING_FIXED = (3, 39)
ROUNDING_ENGINES = frozenset({"io_uring"})
ROUNDING_NOTE = "io_uring before fio 3.39 rounds iodepth up to a power of two"

_VERSION = re.compile(r"fio-(\d+)\.(\d+)")


def _version(fio_version: str) -> tuple[int, int] | None:
    match = _VERSION.search(fio_version or "")
    return (int(match[1]), int(match[2])) if match else None


def rounds_iodepth(engine: str, fio_version: str) -> bool:
    """Whether this engine of this fio runs a deeper queue than a depth
    that is not a power of two (an unknown version is not assumed to)."""
    version = _version(fio_version)
    return engine in ROUNDING_ENGINES and version is not None and version < ROUNDING_FIXED


def kept_iodepth(engine: str, fio_version: str, iodepth: int) -> int:
    """The most I/Os a job keeps in flight when asked for ``iodepth``."""
    if iodepth < 1 or not rounds_iodepth(engine, fio_version):
        return iodepth
    return 1 << (iodepth - 1).bit_length()


def honoured(engine: str, fio_version: str, iodepth: int) -> bool:
    """Whether fio keeps exactly the depth asked for."""
    return kept_iodepth(engine, fio_version, iodepth) == iodepth
