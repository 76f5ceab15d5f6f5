"""When a job that logged nothing for a while counts as stalled
(iorig.run.collect.stall_ms): never by chance at its own pace, always when
a busy job stops for the 3 s the fault tests stop a host."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from iorig.fio import parse
from iorig.model import histogram
from iorig.run.backend import HostLogs
from iorig.run.collect import STALL_FALSE_ALARM, STALL_MS, find_stalls, stall_ms


def test_a_busy_job_stalls_after_stall_ms():
    assert stall_ms(20_000.0, 10.0) == STALL_MS
    assert stall_ms(10.0, 30.0) == STALL_MS  # an empty 2.5 s has chance e^-25
    assert stall_ms(0.0, 10.0) == STALL_MS  # nothing known of its pace


def test_a_fill_of_1_mib_writes_at_3_mb_s_may_wait_3_s_between_completions():
    # a clone's truth 17: 48 writes in 33.9 s, one gap of 3 s, taken for a stall
    assert stall_ms(48 / 33.9, 33.9) > 3 * 1000 * 2


@pytest.mark.parametrize(("per_s", "seconds"), [(0.5, 60.0), (1.42, 33.9), (4.0, 10.0)])
def test_random_completions_at_their_pace_count_as_a_stall_no_more_than_they_should(per_s, seconds):
    """Poisson completions (more bunched than a device's): the share of
    phases in which a gap exceeds the threshold, over 20 000 simulated
    phases, within a binomial band of the false-alarm rate the threshold
    is set for (it is a bound: the share may be far below it)."""
    rng = np.random.default_rng(47)
    trials = 20_000
    limit_s = stall_ms(per_s, seconds) / 1000
    n = int(per_s * seconds * 3) + 20  # enough arrivals to pass the phase's end
    gaps = rng.exponential(1 / per_s, size=(trials, n))
    ends = np.cumsum(gaps, axis=1)
    inside = ends < seconds
    alarms = np.any((gaps > limit_s) & inside, axis=1).mean()
    band = 4 * np.sqrt(STALL_FALSE_ALARM * (1 - STALL_FALSE_ALARM) / trials)
    assert alarms <= STALL_FALSE_ALARM + band, (alarms, limit_s)


def _job(name: str, ios: int, runtime_ms: int) -> parse.JobStats:
    read = parse.DirStats(ios, ios * 4096, runtime_ms, ios / runtime_ms * 1000, 0.0, 0.0,
                          0.0, 0.0, 0.0, 0.0, 0.0, 0.0, histogram.empty())  # fmt: skip
    return parse.JobStats(name, "local", 0, 0.0, 0.0, 0, runtime_ms, {"read": read}, {}, True)


def _windows(*ends_ms: int) -> dict[str, list[parse.LogSample]]:
    return {"iops": [parse.LogSample(t, 1.0, "read", 4096) for t in ends_ms]}


def test_a_slow_paced_job_is_judged_at_its_own_pace_not_its_hosts():
    """Issue 49's default ai-image: load 4's warm-up failed as a stall (no
    window in seconds 2-4) with every job judged at its host's average
    pace, some 20 ops/s. Its slowest job, the 1 op/s checkpoint writer,
    waits 3 s between completions by chance in about one 4 s phase in six
    (e^-3 a gap, four gaps). At its own pace it is not a stall, while the
    busy jobs still stall after STALL_MS."""
    raw = SimpleNamespace(hosts=[HostLogs("local")])
    phase = SimpleNamespace(workloads=[SimpleNamespace(label="busy"), SimpleNamespace(label="cp")])
    jobs = [*(_job("busy", 148, 4000) for _ in range(16)), _job("cp", 4, 4000)]
    every_second = _windows(1000, 2000, 3000, 4000)
    by_prefix = {
        "busy": dict.fromkeys(range(1, 17), every_second),
        "cp": {1: _windows(900, 4000)},  # completions at 0.9 s and 4.0 s
    }
    assert find_stalls(raw, phase, by_prefix, jobs, {"local": 0}) == {}
    stopped = dict(
        by_prefix, busy={1: _windows(1000, 4100), **dict.fromkeys(range(2, 17), every_second)}
    )
    assert find_stalls(raw, phase, stopped, jobs, {"local": 0}) == {"local": (2, 4)}
