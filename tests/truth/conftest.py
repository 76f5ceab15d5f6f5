"""Fixtures of the truth tests: capped devices (see device.py).

Every test here needs root, loop devices and the block throttle; where the
machine lacks one it is skipped with the reason, or fails when
``IORIG_REQUIRE_TRUTH=1`` (CI has all of them).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from tests.conftest import supports_direct_io
from tests.truth.device import Capped, Unavailable, capped_device, mechanism

SHM = Path("/dev/shm")


def _unavailable(reason: str) -> None:
    if os.environ.get("IORIG_REQUIRE_TRUTH"):
        pytest.fail(f"truth tests are required (IORIG_REQUIRE_TRUTH) but {reason}")
    pytest.skip(reason)


@pytest.fixture
def backing(scratch: Path) -> Iterator[Path]:
    """Where the devices' files live: in memory (/dev/shm) where it takes
    direct I/O, so that no other test's disk traffic moves a device's figures
    and the cap is far below what the device could do; else ``scratch``."""
    if not supports_direct_io(SHM):
        yield scratch
        return
    directory = Path(tempfile.mkdtemp(prefix="iorig-truth-", dir=SHM))
    try:
        yield directory
    finally:
        shutil.rmtree(directory, ignore_errors=True)


@pytest.fixture
def capped(backing: Path) -> Iterator[Callable[..., Capped]]:
    """A factory of capped devices: ``capped(read_iops=40_000)``; all are
    uncapped and detached at the end of the test, whatever happened."""
    try:
        mechanism()
    except Unavailable as exc:
        _unavailable(str(exc))
    with contextlib.ExitStack() as stack:

        def make(size_bytes: int = 256 << 20, **limits: int) -> Capped:
            try:
                device = stack.enter_context(capped_device(backing, size_bytes))
            except Unavailable as exc:
                _unavailable(str(exc))
            device.cap(**limits)
            return device

        yield make


@pytest.fixture
def truth_db(tmp_path: Path) -> Path:
    return tmp_path / "truth.sqlite"
