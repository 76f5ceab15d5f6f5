"""A fio that starts its I/O late has its seconds placed where its I/O was.

On a loaded machine fio takes tenths of a second from its launch to its
first I/O, and a short phase may end before fio streams a status to tell
when that was. A phase's second 0 (``PhaseResult.origin``, the unix time
events, device counters and other hosts are lined up on) is then read from
fio's own logs, whose times are on the unix clock, never taken as the
launch: a throttle event's dip, or the device's counts for a second, would
otherwise be looked up up to a second early.

The late start is a wrapper that sleeps before it runs the real fio and
drops ``--status-interval`` (no status before the end, as beside a load),
writing the time just before fio starts: no I/O can come before it, and
fio's runtime of I/O ended before iorig saw fio exit."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from iorig.model import PhaseKind
from iorig.store import Store

pytestmark = pytest.mark.fio

LATE_S = 0.6  # from the launch to fio's start: a loaded machine's worst seen
DURATION_S = 3


def _late_fio(directory: Path) -> tuple[Path, Path]:
    stamps = directory / "exec-times"
    wrapper = directory / "late-fio"
    wrapper.write_text(
        "#!/bin/sh\n"
        f"sleep {LATE_S}\n"
        'for a; do shift; case "$a" in --status-interval=*) ;; *) set -- "$@" "$a";; esac; done\n'
        f'echo "$(date +%s.%N) $*" >> {stamps}\n'
        'exec fio "$@"\n'
    )
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IXUSR)
    return wrapper, stamps


def test_a_late_fio_without_status_has_its_seconds_where_its_io_was(
    iorig, scratch, db_path, tmp_path
):
    wrapper, stamps = _late_fio(tmp_path)
    done = iorig(
        "run",
        "--rw",
        "randread",
        "--bs",
        "4k",
        "--duration",
        f"{DURATION_S}s",
        "--size",
        "16MiB",
        "--target",
        str(scratch / "data"),
        "--fio",
        str(wrapper),
    )
    assert done.returncode == 0, done.stdout + done.stderr
    with Store(db_path) as store:
        (run_id,) = store.run_ids(limit=1)
        (measured,) = [p for p in store.load_run(run_id).phases if p.kind is PhaseKind.MEASURE]
    started = [
        float(line.split()[0])
        for line in stamps.read_text().splitlines()
        if os.path.basename(line.split()[-1]) == "job.fio"
    ]
    fio_started = max(t for t in started if t < measured.ended_at)
    assert len(measured.aggregate.series["all"]) >= DURATION_S - 1, measured.aggregate
    print(
        f"late start: launched {measured.started_at:.3f}, fio started "
        f"{fio_started - measured.started_at:+.3f} s, second 0 at "
        f"{measured.origin - measured.started_at:+.3f} s, ended "
        f"{measured.ended_at - measured.started_at:+.3f} s"
    )
    # no I/O before fio ran, and its whole runtime of I/O before it was seen to end
    assert fio_started <= measured.origin <= measured.ended_at - DURATION_S
