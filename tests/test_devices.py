"""The audit's view of a target's device (issue 27): I/O on it that is not
fio's (``device-busy``) and block-throttle limits on it (``device-throttled``),
decided from the kernel's counters and cgroup files, here written by hand
(a real device beside a bare fio: tests/faults/test_target_locks.py)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from tests import builders

from iorig.analyze import devices
from iorig.analyze.devices import DeviceTraffic, check_device_traffic, fio_counts, requests
from iorig.machine import throttle
from iorig.model import Scope
from iorig.run import devwatch

MiB = 1 << 20


def test_fios_large_ios_count_as_the_requests_the_device_takes():
    assert requests(100, 100 * MiB, 128 << 10) == 800  # 1 MiB each, in 128 KiB requests
    assert requests(100, 100 * 4096, 128 << 10) == 100
    assert requests(100, 100 * MiB, None) == 100  # the limit unknown: as fio counts
    assert requests(0, 0, 4096) == 0


@pytest.mark.parametrize(
    ("ios", "io_bytes", "busy"),
    [
        (10_000, 40 * MiB, False),  # what fio did
        (12_000, 48 * MiB, False),  # a journal, a log line: within 25 % and the floors
        (20_000, 80 * MiB, True),  # twice fio's: another program's I/O
        (10_000 + 3_000, 41 * MiB, True),  # small I/Os of another program beside
        (10_000, 40 * MiB + 64 * MiB, True),  # large ones
    ],
)
def test_a_device_that_did_materially_more_than_fio_is_named(ios, io_bytes, busy):
    seen = DeviceTraffic("loop3 (7:3)", ios, io_bytes, 10_000, 40 * MiB, 10_000)
    found = check_device_traffic("randread", seen)
    assert bool(found) is busy
    if busy:
        assert found[0].code == "device-busy" and "loop3 (7:3)" in found[0].message


def test_a_short_phase_is_not_called_busy_for_a_few_stray_ios():
    seen = DeviceTraffic("sda (8:0)", 150, 2 * MiB, 40, 160 << 10, 40)
    assert check_device_traffic("p", seen) == []


def _phase_with_workloads() -> tuple:
    read = replace(builders.totals(1000, 10), ddir="read", ios=10_000, io_bytes=10_000 * MiB)
    write = replace(builders.totals(100, 10), ddir="write", ios=500, io_bytes=500 * 4096)
    scope_a = replace(
        builders.scope(np.full(10, 1000.0), where=Scope("a", "local")),
        totals={"read": read, "all": read},
    )
    scope_b = replace(
        builders.scope(np.full(10, 100.0), where=Scope("b", "local")),
        totals={"write": write, "all": write},
    )
    aggregate = builders.scope(np.full(10, 1100.0))
    return builders.phase("p", np.full(10, 1100.0), scopes=(aggregate, scope_a, scope_b))


def test_fios_counts_are_those_of_the_workloads_on_the_device():
    phase = _phase_with_workloads()
    assert fio_counts(phase, ["a"], 128 << 10) == (10_000, 10_000 * MiB, 80_000)
    assert fio_counts(phase, ["b"], 128 << 10) == (500, 500 * 4096, 500)
    assert fio_counts(phase, ["a", "b"], None)[0] == 10_500


def test_one_finding_per_device_and_kind_naming_the_other_phases():
    one = DeviceTraffic("loop3 (7:3)", 30_000, 0, 10_000, 0, 10_000)
    two = DeviceTraffic("loop4 (7:4)", 30_000, 0, 10_000, 0, 10_000)
    found = [("loop3 (7:3)", f) for f in check_device_traffic("fill", one)]
    found += [("loop3 (7:3)", f) for f in check_device_traffic("read", one)]
    found += [("loop4 (7:4)", f) for f in check_device_traffic("read", two)]
    merged = devices.merge(found)
    assert len(merged) == 2
    assert merged[0].message.endswith("— also in read") and "loop4" in merged[1].message


# ------------------------------------------------------------ the kernel's files


@pytest.fixture
def kernel(tmp_path, monkeypatch) -> Path:
    """/sys/dev/block, /proc/self/cgroup and /proc/self/mounts, and the blkio
    hierarchy, as files under ``tmp_path``."""
    sys_dev = tmp_path / "sys-dev-block"
    (sys_dev / "7:3" / "queue").mkdir(parents=True)
    (sys_dev / "7:3" / "queue" / "max_sectors_kb").write_text("128\n")
    blkio = tmp_path / "blkio"
    (blkio / "user.slice").mkdir(parents=True)
    for where in (blkio, blkio / "user.slice"):
        for name in ("read_iops", "write_iops", "read_bps", "write_bps"):
            (where / f"blkio.throttle.{name}_device").write_text("")
    unified = tmp_path / "unified"
    (unified / "runs" / "this").mkdir(parents=True)
    (tmp_path / "cgroup").write_text("7:blkio:/user.slice\n0::/runs/this\n")
    (tmp_path / "mounts").write_text(f"cgroup2 {unified} cgroup2 rw 0 0\n")
    monkeypatch.setattr(devwatch, "SYS_DEV", sys_dev)
    monkeypatch.setattr(devwatch, "PROC_CGROUP", tmp_path / "cgroup")
    monkeypatch.setattr(devwatch, "PROC_MOUNTS", tmp_path / "mounts")
    monkeypatch.setattr(throttle, "V1", blkio)
    return tmp_path


@pytest.mark.parametrize(
    ("sectors_kb", "segments", "smallest"),
    [
        ("1280", "128", 128 * devwatch.PAGE_BYTES),  # a loop device: 1 MiB I/Os in two
        ("128", "128", 128 << 10),  # max_sectors_kb the smaller
        ("1280", None, 1280 << 10),  # a kernel without max_segments
        (None, None, None),  # nothing known: fio's I/Os counted as they are
        ("garbage", "0", None),
    ],
)
def test_fios_ios_may_be_split_by_sectors_or_by_segments(tmp_path, sectors_kb, segments, smallest):
    queue = tmp_path / "queue"
    queue.mkdir()
    for name, value in (("max_sectors_kb", sectors_kb), ("max_segments", segments)):
        if value is not None:
            (queue / name).write_text(value + "\n")
    assert devwatch.smallest_split(queue) == smallest


def test_the_counters_are_reads_writes_and_discards(kernel):
    stat = kernel / "sys-dev-block" / "7:3" / "stat"
    # reads, merges, sectors, ticks; writes …; in flight, io ticks, queue; discards …
    stat.write_text("100 0 800 5 50 0 400 5 0 10 10 7 0 56 1 0 0\n")
    assert devwatch.counters("7:3") == (157, (800 + 400 + 56) * 512)
    stat.write_text("100 0 800 5 50 0 400 5 0 10 10\n")  # a kernel before discards were counted
    assert devwatch.counters("7:3") == (150, 1200 * 512)
    stat.write_text("garbage\n")
    assert devwatch.counters("7:3") is None
    assert devwatch.counters("9:9") is None


def test_every_limit_on_the_device_that_applies_to_this_process_is_named(kernel):
    assert devwatch.limits(("7:3",)) == []
    (kernel / "blkio" / "blkio.throttle.read_iops_device").write_text("7:3 500\n8:0 9\n")
    (kernel / "blkio" / "user.slice" / "blkio.throttle.write_bps_device").write_text("7:3 1000\n")
    (kernel / "unified" / "runs" / "io.max").write_text(
        "7:3 rbps=max wbps=max riops=2000 wiops=max\n8:0 rbps=1 wbps=max riops=max wiops=max\n"
    )
    (kernel / "unified" / "runs" / "this" / "io.max").write_text(
        "7:3 rbps=max wbps=max riops=max wiops=max\n"  # set, but to no limit
    )
    assert devwatch.limits(("7:3",)) == [
        "write_bps 1000 on 7:3 (cgroup v1 blkio, /user.slice)",
        "read_iops 500 on 7:3 (cgroup v1 blkio, /)",
        "riops=2000 on 7:3 (cgroup v2 io.max, /runs)",
    ]
    assert devwatch.limits(("7:4",)) == []


# ------------------------------------------------------------ reads the page cache answered


@pytest.mark.parametrize(
    ("device_bytes", "cached"),
    [
        (64 * MiB, False),  # the device read what fio read
        (60 * MiB, False),  # readahead and a small shortfall: within 25 % and the floor
        (8 * MiB, True),  # an eighth: the page cache answered the rest
        (0, True),
    ],
)
def test_buffered_reads_the_device_did_not_do_are_named(device_bytes, cached):
    reads = devices.CachedReads("vda (253:0)", 64 * MiB, device_bytes, 32 * MiB, 64 * MiB)
    found = devices.check_cached_reads("file1", reads)
    assert bool(found) is cached
    if cached:
        (f,) = found
        assert f.code == "cached-reads" and f.phase == "file1" and "vda (253:0)" in f.message
        assert "32MiB of the 64MiB it reads (50 %) were in the page cache" in f.message


def test_a_few_megabytes_read_from_the_cache_are_no_finding():
    reads = devices.CachedReads("vda (253:0)", 8 * MiB, 0)
    assert devices.check_cached_reads("p", reads) == []


def test_fios_read_bytes_are_its_workloads_reads():
    phase = _phase_with_workloads()
    assert devices.fio_read_bytes(phase, ["a"]) == 10_000 * MiB
    assert devices.fio_read_bytes(phase, ["b"]) == 0  # it only writes


def test_the_devices_read_bytes_are_its_sectors_read(kernel):
    stat = kernel / "sys-dev-block" / "7:3" / "stat"
    stat.write_text("100 0 800 5 50 0 400 5 0 10 10 7 0 56 1 0 0\n")
    assert devwatch.read_bytes("7:3") == 800 * 512
    stat.write_text("garbage\n")
    assert devwatch.read_bytes("7:3") is None and devwatch.read_bytes("9:9") is None
