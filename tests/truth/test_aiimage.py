"""Truth 8: the SPEC-like AI image load points on a filesystem whose device
reads at most 2.15 times what one quick AI_Job asks to read.

One AI_Job's reads (from the scenario: processes × ops/s × mean read size of
each reading component, about 100 MB/s) fit twice under the cap: loads 1
and 2 are valid; from load 3 on the reads need 40 % more than the device
gives, far past SPEC's 5 % tolerance: invalid.

Every bound on the figures comes from the device's own counters, read every
100 ms while the run goes on (``Capped.sampling``), not from a percentage:

* each point read what reached the device: iorig's read bytes are at most
  what the device read between the samples just outside the phase (a stat's
  4 KiB "read", which reaches nothing, once made them 1.2-2.1 % more), and
  at least between those just inside it from its first read on (opening a
  point's files reads the filesystem's metadata before: a clone's device
  read 1.6 % more than fio over the whole phase, which a fixed share of
  0.2 % took for a defect), give or take one read of 2 MiB;
* each second of a point's series read what the device read in that second:
  at least what it read between the samples just inside the second and at
  most what it read between those just outside, give or take one read of
  2 MiB (fio logs whole milliseconds; the series' second 0 is when the
  phase's first read was submitted, ``series_origin``). A second
  counted from each job's own start held 7-10 % more than the device read in
  any second, and the test once allowed that as "the throttle lets the first
  second overshoot";
* past the cap the device is the limit: the median of its own one-second
  windows is the cap within ``THROTTLE_BAND`` (the throttle's own pace
  beside a load, tests/truth/device.py). The throttle
  itself lets a window pass more than the cap, after an idle start or a
  stall (up to 9 % over in 12 bare fio runs of load 5): those seconds are the
  device's, and the bounds above follow them.

Loads 1 and 2 are valid unless the audit names the load generator for
that point (fio starved of CPU could not ask for the reads: a verdict on
the generator, not the storage, and iorig must say which it is).

Below the cap every second is also within 25 % of the point's rate (no
fragments: they read 29, 1268 and 27 at a steady 1,243 ops/s before), and
the seconds add up to no more than the jobs' completions and no less than
those spread evenly over each job's runtime (which a slow Poisson stream
overruns by its last wait).
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from tests.truth.device import THROTTLE_BAND, Samples, Unavailable, mounted

from iorig.analyze.search import GENERATOR_FINDINGS as NAMED_GENERATOR
from iorig.fio import parse
from iorig.model import ALL, PhaseResult
from iorig.scenario.loading import load
from iorig.store import Store

pytestmark = [pytest.mark.fio, pytest.mark.truth]

GENERATOR_FINDINGS = (*NAMED_GENERATOR, "cpu-contention")


def _starved(shown: dict) -> set[int]:
    """The loads whose point iorig said fio, not the device, held back: the
    audit named the load generator for its phase, or the point says fio's
    I/Os waited for a CPU."""
    generator = {w["phase"] for w in shown["run"]["warnings"] if w["code"] in GENERATOR_FINDINGS}
    cpu = ("the load generator was the limit", "fio's I/Os waited for a CPU")
    return {
        p["load"]
        for p in shown["search"]["points"]
        if p["phase"] in generator or any(c in q for q in p["problems"] for c in cpu)
    }


def _reads_per_job() -> tuple[float, int]:
    """Bytes/s one quick AI_Job asks to read, from the scenario's definition,
    and its largest read."""
    resolved = load("ai-image", profile="quick", overrides={"ai_jobs": "1"})
    total, largest = 0.0, 0
    for phase in resolved.scenario.measured:
        for w in phase.workloads:
            if w.enabled and w.op == "io" and w.rw in ("read", "randread") and w.rate_iops:
                sizes = (
                    [
                        (int(b), float(p))
                        for b, p in (item.split("/") for item in w.bssplit.split(":"))
                    ]
                    if w.bssplit
                    else [(w.bs, 100.0)]
                )
                mean = sum(b * p for b, p in sizes) / sum(p for _, p in sizes)
                total += w.jobs * w.rate_iops * mean
                largest = max(largest, *(b for b, _ in sizes))
    return total, largest


def _read_what_reached_the_device(phase: PhaseResult, samples: Samples, largest: int) -> None:
    """fio's read bytes over the phase against the device's: at least its
    count between the samples just inside the phase, at most between those
    just outside, one ``largest`` read wider (see the module's docstring).
    More than the device read would be reads served above it (the page
    cache)."""
    fio = phase.aggregate.totals["read"].io_bytes
    least, _ = samples.bounds("read", phase.origin, phase.ended_at)
    _, most = samples.bounds("read", phase.started_at, phase.ended_at)
    print(
        f"truth 8: {phase.name}: read {fio / 1e6:.1f} MB, the device "
        f"{least / 1e6:.1f}-{most / 1e6:.1f} MB"
    )
    assert least - largest <= fio <= most + largest, (phase.name, fio, least, most)


def _seconds_are_the_devices(phase: PhaseResult, samples: Samples, largest: int) -> None:
    """Each second's read bytes against the device's in that second. fio
    logs whole milliseconds: a read completed within one of a second's edge
    may be counted on its other side, so the bounds are one ``largest``
    read wider."""
    series = phase.aggregate.series["read"]
    bounds = samples.seconds("read", phase.origin, series.t_s)
    print(
        f"truth 8: {phase.name}: read MB per second {(series.bytes_per_s / 1e6).round(1)}, "
        f"the device's least {(bounds[:, 0] / 1e6).round(1)}, most {(bounds[:, 1] / 1e6).round(1)}"
    )
    least, most = bounds[:, 0] - largest, bounds[:, 1] + largest
    inside = (least <= series.bytes_per_s) & (series.bytes_per_s <= most)
    assert inside.all(), (phase.name, series.bytes_per_s, bounds)


def _the_device_read_the_cap(
    phase: PhaseResult, samples: Samples, cap: float, *, below: bool = False
) -> None:
    span = samples.active("read", phase.started_at, phase.ended_at)
    assert span is not None, phase.name
    windows = samples.windows("read", *span)
    print(
        f"truth 8: {phase.name}: the device's {windows.size} one-second windows, "
        f"÷ cap: median {np.median(windows) / cap:.3f}, min {windows.min() / cap:.3f}, "
        f"p99 {np.percentile(windows, 99) / cap:.3f}, max {windows.max() / cap:.3f}"
    )
    median = float(np.median(windows))
    assert median <= cap * (1 + THROTTLE_BAND), (phase.name, windows)
    assert below or median >= cap * (1 - THROTTLE_BAND), (phase.name, windows)


def _paced_below_the_cap(phase: PhaseResult) -> None:
    series = phase.aggregate.series[ALL]
    seconds = len(series)
    jobs = parse.parse_final(phase.fio_output).jobs
    # below the cap every job keeps its pace. The series' whole seconds hold
    # at most what the jobs completed in all, and at least their completions
    # spread evenly over each job's runtime: a slow Poisson job's runtime
    # overruns the phase by its last wait, with no I/O in it, so the even
    # spread undercounts it (by 3.1 % over a load-2 point once in CI)
    total_ios = sum(sum(d.ios for d in j.dirs.values()) for j in jobs)
    spread_ios = sum(
        sum(d.ios for d in j.dirs.values()) * min(1.0, seconds * 1000 / j.job_runtime_ms)
        for j in jobs
    )
    counted = float(series.iops.sum())
    assert 0.99 * spread_ios <= counted <= 1.01 * total_ios, (phase.name, counted)
    expected_ios = (spread_ios + total_ios) / 2
    rate = expected_ios / seconds
    print(
        f"truth 8: {phase.name}: series sum {counted:.0f}, jobs' completions "
        f"{spread_ios:.0f} spread over its {seconds} s, {total_ios} in all; "
        f"seconds {series.iops.round()}"
    )
    assert all(abs(v - rate) <= 0.25 * rate for v in series.iops), (phase.name, series.iops)


def test_load_points_past_the_bandwidth_cap_are_invalid(capped, truth_db, tmp_path):
    per_job, largest = _reads_per_job()
    assert 80e6 < per_job < 120e6  # the scenario's AI_Job (about SPEC's 98 MB/s)
    cap = 2.15 * per_job
    device = capped(size_bytes=1 << 30, read_bps=int(cap))
    try:
        with mounted(device, tmp_path / "fs") as directory, device.sampling() as samples:
            done = device.iorig(truth_db, "run", "ai-image", "--quick", "--target", f"{directory}/")
    except Unavailable as exc:
        pytest.skip(str(exc))
    assert done.returncode == 0, done.stdout + done.stderr
    shown = json.loads(device.iorig(truth_db, "show", "last", "--json").stdout)
    search = shown["search"]
    validity = {p["load"]: p["valid"] for p in search["points"]}
    # a point the device could serve, invalid because fio did not get the
    # CPU to ask for it (a soak round beside other tests' runs, load 9 on
    # two cores), is the generator's: iorig must say so, naming the phase,
    # or, where other processes took fio's CPUs, say that on the point (a
    # soak's load 1 fell behind with the generator named at load 4 only)
    starved = _starved(shown)
    print(
        f"truth 8: reads per job {per_job / 1e6:.0f} MB/s, cap {cap / 1e6:.1f} "
        f"MB/s, validity {validity}, the generator or contention named at loads "
        f"{sorted(starved)}"
    )
    for point in search["points"]:
        if not point["valid"]:
            print(f"truth 8: load {point['load']} invalid: {point['problems']}; {point['ops']}")
    expected = {1: True, 2: True, 3: False, 4: False, 5: False}
    wrong = {load for load, valid in validity.items() if valid != expected[load]}
    assert validity.keys() == expected.keys() and wrong <= starved - {3, 4, 5}, (
        search["points"],
        shown["run"]["warnings"],
    )
    if not wrong:
        assert search["max_valid_load"] == 2
    with Store(truth_db) as store:
        (run_id,) = store.run_ids(limit=1)
        stored = store.load_run(run_id, artifacts=True)
    for phase in stored.phases:
        if not phase.point:
            continue
        assert len(phase.aggregate.series[ALL]) >= 2, phase.name
        _read_what_reached_the_device(phase, samples, largest)
        _seconds_are_the_devices(phase, samples, largest)
        load = int(phase.point["ai_jobs"])
        if load > 2:
            # where iorig said fio could not ask for the reads (its CPUs taken:
            # a stressed soak's load 5 at 0.90 of the cap), the device need
            # not be at its cap; never above it
            _the_device_read_the_cap(phase, samples, cap, below=load in starved)
        elif load not in wrong:
            _paced_below_the_cap(phase)


POINT_S = 3


def _warmed_up(phase: PhaseResult, before: PhaseResult, samples: Samples, warm_up_s: float) -> None:
    """The device read for the point's warm-up, before it, at its pace."""
    # the point's own pace, as its seconds read it (a quick job reads
    # about 75 % of what it asks, whatever the warm-up)
    pace = float(np.median(phase.aggregate.series["read"].bytes_per_s))
    # the warm-up: what the device read between the phase before and the
    # point (iorig starts the point's fio 0.1 s to 1 s after the warm-up
    # ends, the busier the machine, so not up to the point's start); a
    # skipped warm-up reads nothing there. It read for its time, and at
    # the point's pace in every window from 1 s in (or the last that
    # fits): not from its start, when fio is starting its jobs (beside
    # stress-ng the first window of a 4 s warm-up read 25 % of the pace,
    # its jobs reading in over 0.7 s)
    span = samples.active("read", before.ended_at, phase.started_at)
    assert span is not None, (phase.name, "no warm-up: the device read nothing before it")
    began, ended = span
    windows = samples.windows("read", began, ended)
    steady_from = min(began + 1.0, ended - 1.1)
    steady = samples.windows("read", steady_from, ended)
    if not steady.size:
        # beside a load the sampler ran late and no whole second of samples
        # fits (a stressed soak's 2 s warm-up): the rate between the first
        # and last sample inside that span (over the span's whole length it
        # read 0.03 of the pace: the samples were 0.2 s apart)
        a, b = samples.inside("read", steady_from, ended)
        assert b > a, (phase.name, "fewer than two samples in the warm-up's last second")
        steady = np.array([samples.bounds("read", a, b)[0] / (b - a)])
    print(
        f"truth 8: {phase.name}: warm-up read {ended - began:.2f} s, windows ÷ pace "
        f"{(windows / pace).round(2).tolist()}, measured seconds "
        f"{len(phase.aggregate.series[ALL])}, "
        f"{phase.started_at - ended:.2f} s from its end to the point's start"
    )
    assert ended - began >= warm_up_s - 0.5, (phase.name, began, ended)
    # windows from the samples, whenever the sampler ran (beside stress-ng a
    # clone's took 19 where every 100 ms gives 27): each one reads the warm-up
    assert steady.min() > 0.5 * pace, (phase.name, steady / pace)


def test_a_warm_up_shorter_than_the_point_runs_before_each(capped, truth_db, tmp_path):
    """Issue 49: seed 004 warms each load point up. With fio's ramp_time
    one it ran made each 2 MiB read job report one read more in bytes than
    in I/Os, which the checks refused. Each point now completes, and the
    device read for the warm-up's time before it, at the point's pace once
    fio's jobs had started (its own one-second windows, none under half
    the point's median second: a skipped warm-up reads nothing), then what
    the point measured. (A warm-up longer than the point, as SPEC's 900 s
    before 300 s, is the default-structure test's below.)"""
    warm_up_s = 2
    per_job, largest = _reads_per_job()
    device = capped(size_bytes=1 << 30, read_bps=int(2.15 * per_job))
    try:
        with mounted(device, tmp_path / "fs") as directory, device.sampling() as samples:
            done = device.iorig(truth_db, "run", "ai-image", "--quick", "--target",
                                f"{directory}/", "--max-jobs", "2", "--points", "2",
                                "--set", f"duration={POINT_S}s",
                                "--set", f"warmup={warm_up_s}s")  # fmt: skip
    except Unavailable as exc:
        pytest.skip(str(exc))
    assert done.returncode == 0, done.stdout + done.stderr
    with Store(truth_db) as store:
        (run_id,) = store.run_ids(limit=1)
        stored = store.load_run(run_id).phases
    points = [p for p in stored if p.point]
    assert [int(p.point["ai_jobs"]) for p in points] == [1, 2], [p.name for p in points]
    for phase in points:
        before = stored[stored.index(phase) - 1]  # the data set's creation, or the last point
        _warmed_up(phase, before, samples, warm_up_s)
        assert len(phase.aggregate.series[ALL]) >= POINT_S - 1, phase.name
        _read_what_reached_the_device(phase, samples, largest)


# The default profile's structure, shortened only where the structure stays:
# not --quick, so every point has a warm-up (longer than the point, as
# SPEC's 900 s before its 300 s points), each component's files spread over
# its directories with several files a process, 140 MiB-class files read
# 2 MiB at a time; the times are seconds, the file counts and sizes a
# fraction of the default's (which would be 32 GB a job)
DEFAULT_STRUCTURE = {
    "duration": f"{POINT_S}s",
    "warmup": "4s",
    "max_jobs": "4",
    "points": "4",
    "sf_file_size": "256KiB",
    "sf_files": "20",  # 3 directories (the default's) of 20 files a process
    "tf_file_size": "4MiB",
    "tf_files": "2",
    "tr_file_size": "8MiB",
    "tr_files": "2",
    "cp_file_size": "4MiB",
}


def test_the_default_structure_runs_every_point_valid_up_to_the_cap(capped, truth_db, tmp_path):
    """Issue 49: seed 004's own run (the default profile: warm-ups, many
    files in several directories) never produced a load-point table. On a
    device that reads 2.15 AI_Jobs' worth, its points complete, warm up
    before they measure, read what reached the device, and are valid up
    to the cap: loads 1 and 2, not 3 and 4 (unless the audit names the
    load generator for the point, as in the quick test above)."""
    per_job, largest = _reads_per_job()
    cap = 2.15 * per_job
    device = capped(size_bytes=2 << 30, read_bps=int(cap))
    sets = [a for name, value in DEFAULT_STRUCTURE.items() for a in ("--set", f"{name}={value}")]
    try:
        with mounted(device, tmp_path / "fs") as directory, device.sampling() as samples:
            done = device.iorig(truth_db, "run", "ai-image", "--target", f"{directory}/", *sets)
    except Unavailable as exc:
        pytest.skip(str(exc))
    assert done.returncode == 0, done.stdout + done.stderr
    shown = json.loads(device.iorig(truth_db, "show", "last", "--json").stdout)
    assert shown["run"]["profile"] is None
    search = shown["search"]
    validity = {p["load"]: p["valid"] for p in search["points"]}
    starved = _starved(shown)
    print(f"truth 8: default structure, cap {cap / 1e6:.1f} MB/s, validity {validity}")
    expected = {1: True, 2: True, 3: False, 4: False}
    wrong = {load for load, valid in validity.items() if valid != expected[load]}
    assert validity.keys() == expected.keys() and wrong <= starved - {3, 4}, (
        search["points"],
        shown["run"]["warnings"],
    )
    with Store(truth_db) as store:
        (run_id,) = store.run_ids(limit=1)
        stored = store.load_run(run_id).phases
    points = [p for p in stored if p.point]
    for phase in points:
        before = stored[stored.index(phase) - 1]
        _warmed_up(phase, before, samples, float(DEFAULT_STRUCTURE["warmup"].rstrip("s")))
        _read_what_reached_the_device(phase, samples, largest)
        if int(phase.point["ai_jobs"]) > 2:
            _the_device_read_the_cap(
                phase, samples, cap, below=int(phase.point["ai_jobs"]) in starved
            )


WRITE_CAP = 9_600_000  # bytes/s: the slow device, a tenth of one AI_Job's pace


def test_the_data_set_is_created_by_many_jobs_on_a_slow_device(capped, truth_db, tmp_path):
    """Issue 49: the quick data set's creation (85 jobs at QD 4 writing up
    to 1 MiB at a time) on a device that writes 9.6 MB/s queues some 19 s
    of writes; fio 3.33's status reporting deadlocked under that ("fio
    seems to be stuck grabbing stat_sem", exit 41) and the run failed
    before its first point. The creation now runs without fio's status
    (its live seconds from /proc, as a fio server's): it completes, the
    device wrote the data set (its own counters, read every 100 ms), and
    no faster than its cap."""
    device = capped(size_bytes=1 << 30, write_bps=WRITE_CAP)
    try:
        with mounted(device, tmp_path / "fs") as directory, device.sampling() as samples:
            done = device.iorig(truth_db, "run", "ai-image", "--quick", "--target",
                                f"{directory}/", "--points", "2",
                                "--set", "duration=2s")  # fmt: skip
    except Unavailable as exc:
        pytest.skip(str(exc))
    assert done.returncode == 0, done.stdout + done.stderr
    with Store(truth_db) as store:
        (run_id,) = store.run_ids(limit=1)
        phases = store.load_run(run_id).phases
    (create,) = [p for p in phases if p.name == "create"]
    assert "--status-interval=1" not in create.command, create.command
    written = create.aggregate.totals["write"].io_bytes
    least, most = samples.bounds("write", create.started_at, create.ended_at)
    took_s = create.ended_at - create.started_at
    print(
        f"truth 8: the data set, {written / 1e6:.0f} MB by {create.aggregate.jobs} jobs, "
        f"created in {took_s:.1f} s at a {WRITE_CAP / 1e6} MB/s cap; the device wrote "
        f"{least / 1e6:.0f}..{most / 1e6:.0f} MB meanwhile"
    )
    assert create.aggregate.jobs >= 80
    # direct writes: what fio wrote reached the device within the phase
    # (and the filesystem's own metadata besides)
    assert written <= most, (written, least, most)
    # capped: the device wrote no faster than its cap, give or take the
    # throttle's first slice (truth 1's band)
    assert least / took_s <= WRITE_CAP * 1.03, (least, took_s)
    assert took_s >= written / (WRITE_CAP * 1.03) - 0.5, (took_s, written)
