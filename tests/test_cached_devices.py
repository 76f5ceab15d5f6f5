"""Block devices that are memory or a page cache, named by the audit and
`doctor` (issue 49 item 7): a loop device without direct I/O answers from
the page cache of its file (p50 3.2 µs and 175 K IOPS in a second over an
ext4 file), one over a file on tmpfs is RAM whatever its direct I/O, and
advice about direct I/O means nothing on tmpfs."""

from __future__ import annotations

import subprocess
import tempfile
from pathlib import Path

import pytest
from tests.faults.killed import loop_device

pytestmark = [pytest.mark.fio, pytest.mark.blockdev]


def _doctor(iorig, path: Path) -> str:
    return " ".join(iorig("doctor", str(path), check=True).stdout.split())


def test_a_loop_device_without_direct_io_is_named_a_page_cache(iorig, scratch):
    with loop_device(scratch) as device:
        said = _doctor(iorig, device)
        name = device.name
        assert f"{name} reads and writes {scratch / 'disk.img'} through the page cache" in said
        assert f"losetup --direct-io=on {device}" in said
        # the same device with direct I/O on: its file's storage answers
        subprocess.run(["losetup", "--direct-io=on", str(device)], check=True, timeout=30)
        assert "through the page cache" not in _doctor(iorig, device)


def test_a_loop_device_over_a_file_in_memory_is_ram(iorig):
    shm = Path("/dev/shm")
    if not shm.is_dir():
        pytest.skip("needs /dev/shm")
    with tempfile.TemporaryDirectory(dir=shm) as memory, loop_device(Path(memory)) as device:
        subprocess.run(["losetup", "--direct-io=on", str(device)], check=True, timeout=30)
        said = _doctor(iorig, device)
        assert f"{device.name} is a loop device over {memory}/disk.img on tmpfs" in said
        assert "that is RAM, not storage" in said


def test_doctor_gives_no_direct_io_advice_on_tmpfs(iorig):
    shm = Path("/dev/shm")
    if not shm.is_dir():
        pytest.skip("needs /dev/shm")
    said = _doctor(iorig, shm)
    assert "that is RAM, not storage" in said
    assert "keep direct I/O on" not in said
