"""End to end: fio really gets I/O errors mid-phase, goes on past them
(``continue_on_error``) and iorig counts them per type, checked against
fio's own ``total_err`` in the JSON it wrote in the same run.

How the errors are made, deterministically: the target is a directory on an
ext4 filesystem (a loop device over a file) and an event command shuts that
filesystem down mid-phase (FS_IOC_SHUTDOWN, what ``xfs_io -x -c shutdown``
does): from then on every read and write of the data file fails with EIO
until it is unmounted. The phase is paced (rate_iops) so the count stays
small. Needs root, loop devices, mkfs.ext4 and mount.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.conftest import HAS_FIO

from iorig.store import Store

pytestmark = [pytest.mark.blockdev, pytest.mark.fio]
EIO = "Input/output error"

SCENARIO = """\
iorig: 1
name: io-errors
title: I/O errors counted per type
targets:
  data: {size: 8MiB}
phases:
  - name: rw
    kind: measure
    duration: 4s
    workloads:
      - {rw: randrw, bs: 4k, read_pct: 50, rate_iops: 100, engine: psync,
         continue_on_error: io}
    events:
      - {at: 2s, do: "run shutdown"}
"""
# FS_IOC_SHUTDOWN (XFS_IOC_GOINGDOWN) with flag 2: no log flush, at once
SHUTDOWN = (
    "import fcntl, os, struct, sys; "
    "fcntl.ioctl(os.open(sys.argv[1], os.O_RDONLY), 0x8004587D, struct.pack('I', 2))"
)


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, capture_output=True, text=True, check=False)


@pytest.fixture
def ext4_dir(tmp_path: Path) -> Iterator[Path]:
    """A mounted ext4 filesystem on a loop device, unmounted and detached after."""
    if not HAS_FIO:
        pytest.skip("fio is not installed")
    if os.geteuid() != 0:
        pytest.skip("loop devices and mount need root")
    for tool in ("losetup", "mkfs.ext4", "mount", "umount"):
        if shutil.which(tool) is None:
            pytest.skip(f"{tool} is not installed")
    image = tmp_path / "fs.img"
    with open(image, "wb") as f:
        f.truncate(64 << 20)
    if (made := _run("mkfs.ext4", "-q", "-F", str(image))).returncode != 0:
        pytest.skip(f"mkfs.ext4 failed: {made.stderr.strip()}")
    attached = _run("losetup", "-f", "--show", str(image))
    if attached.returncode != 0:
        pytest.skip(f"this machine does not allow loop devices: {attached.stderr.strip()}")
    loop = attached.stdout.strip()
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    try:
        if (mounted := _run("mount", loop, str(mnt))).returncode != 0:
            pytest.skip(f"cannot mount here: {mounted.stderr.strip()}")
        yield mnt
    finally:
        if os.path.ismount(mnt):
            _run("umount", str(mnt))
        _run("losetup", "-d", loop)


def _fio_total_err(output: str) -> int:
    """fio's own count: total_err of every job of its last JSON document.
    fio copies its error lines into the output file too, cut anywhere (a
    document may begin mid-line), so every "{" is tried."""
    decoder, final, pos = json.JSONDecoder(), None, 0
    while (pos := output.find("{", pos)) >= 0:
        try:
            doc, pos = decoder.raw_decode(output, pos)
        except json.JSONDecodeError:
            pos += 1
            continue
        if isinstance(doc, dict) and "jobs" in doc:
            final = doc
    assert final is not None, "fio wrote no JSON document"
    return sum(int(job["total_err"]) for job in final["jobs"])


def test_errors_after_a_shutdown_are_counted_per_type_as_fio_counted_them(
    iorig, tmp_path, ext4_dir, db_path
):
    scenario = tmp_path / "errors.yaml"
    scenario.write_text(SCENARIO)
    command = f'{sys.executable} -c "{SHUTDOWN}" {ext4_dir}'
    done = iorig(
        "run",
        str(scenario),
        "--target",
        f"{ext4_dir}/",
        "--event-command",
        f"shutdown={command}",
        timeout=120,
    )
    shown = json.loads(iorig("show", "last", "--json", check=True).stdout)
    ((event),) = shown["events"]
    assert event["status"] == "done", (event, done.stderr)
    impact = event["impact"]

    with Store(db_path) as store:
        (run_id,) = store.run_ids()
        stored = store.load_run(run_id, artifacts=True)
    (phase,) = [p for p in stored.phases if p.name == "rw"]
    fio_total = _fio_total_err(phase.fio_output)
    # errors happened (2 s at 100 IOPS after the shutdown), and fio went on past them
    assert fio_total > 50, phase.fio_stderr[-500:]
    assert impact["errors"] == fio_total
    by_type = impact["errors_by_type"]
    assert set(by_type) == {f"read: {EIO}", f"write: {EIO}"}
    assert sum(by_type.values()) == fio_total
    assert all(c.kind != "unknown" for c in phase.io_errors)  # every one printed and typed
    # the job went on past them: the phase is measured, not failed
    assert str(phase.status) == "ok", phase.error
    assert "errors" in iorig("show", "last").stdout
