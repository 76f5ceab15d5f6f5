"""Steady-state rule, interface limits and audit checks on constructed data."""

from __future__ import annotations

import numpy as np
import pytest

from iorig.analyze import audit
from iorig.analyze.steady import RoundTracker, check_window, evaluate
from iorig.fio import histogram
from iorig.fio.status import Snapshot
from iorig.results import ALL, PhaseResult, ScopeResult, Series, Totals
from iorig.scenario import SteadyRule
from iorig.sysinfo import _pcie_link, flatten, interface_limit


def test_window_rule_range_and_slope():
    flat = check_window([100, 104, 98, 101, 99], max_range=0.2, max_slope=0.1)
    assert flat.holds and flat.range_frac == pytest.approx(6 / 100.4)
    wide = check_window([80, 120, 90, 110, 100], max_range=0.2, max_slope=0.1)
    assert not wide.holds and wide.range_frac == pytest.approx(0.4)
    # within the range but drifting: least-squares slope 4/round, 16 over the window
    rising = check_window([92, 96, 100, 104, 108], max_range=0.2, max_slope=0.1)
    assert rising.range_frac <= 0.2 and rising.slope_frac == pytest.approx(16 / 100)
    assert not rising.holds


def test_evaluate_needs_a_full_window():
    rule = SteadyRule(round=5, window=5)
    assert not evaluate([100, 100], rule).converged
    early = evaluate([50, 70, 90, 100, 101, 99, 100, 100], rule)
    assert early.converged and early.window_start == 3
    assert early.rounds[early.window_start :] == (100, 101, 99, 100, 100)


def test_round_tracker_turns_cumulative_snapshots_into_round_rates():
    tracker = RoundTracker(SteadyRule(metric="iops", round=2))
    snaps = [Snapshot(1000 * t, t, ios=1000 * t * t, io_bytes=0, lat_sum_ns=0) for t in range(1, 8)]
    completed = [tracker.feed(s) for s in snaps]
    assert completed == [False, False, True, False, True, False, True]
    # ios = 1000 t^2: rounds 1-3, 3-5, 5-7 s
    assert tracker.rounds == [4000.0, 8000.0, 12000.0]


def test_pcie_link_gives_usable_bandwidth(tmp_path):
    dev = tmp_path / "0000:01:00.0"
    (dev / "nvme" / "nvme0").mkdir(parents=True)
    for name, value in {
        "current_link_speed": "8.0 GT/s PCIe",
        "current_link_width": "4",
        "max_link_speed": "8.0 GT/s PCIe",
        "max_link_width": "4",
    }.items():
        (dev / name).write_text(value + "\n")
    link = _pcie_link(dev / "nvme" / "nvme0")
    assert link is not None and link["usable_bytes_per_s"] == pytest.approx(3.94e9)
    disclosure = {"targets": [{"backing_devices": [{"name": "nvme0n1", "link": link}]}]}
    assert interface_limit(disclosure) == {"bytes_per_s": 3.94e9, "source": "nvme0n1 0000:01:00.0"}
    assert (
        interface_limit({"targets": [{"backing_devices": [{"name": "vda", "link": None}]}]}) is None
    )


def test_flatten_makes_dotted_keys():
    assert flatten({"a": {"b": 1, "c": [True, None]}}) == {
        "a.b": "1",
        "a.c[0]": "True",
        "a.c[1]": "",
    }


def _phase(name: str, iops: np.ndarray, cpu: float = 20.0, lat_ns: float = 1e5) -> PhaseResult:
    mean_iops = float(iops.mean())
    totals = Totals(ALL, int(mean_iops * iops.size), int(mean_iops * iops.size * 4096), mean_iops,
                    mean_iops * 4096, lat_ns, lat_ns / 2, lat_ns * 10, lat_ns / 5, 1e3, lat_ns,
                    histogram.empty())  # fmt: skip
    series = Series(ALL, np.arange(1, iops.size + 1), iops, iops * 4096, np.full(iops.size, lat_ns),
                    np.zeros((iops.size, histogram.NR_BINS), dtype=np.uint64))  # fmt: skip
    scopes = tuple(
        ScopeResult(w, "" if not w else "local", 1, {ALL: totals}, {ALL: series}, cpu, 0.0, cpu, 0)
        for w in ("", "rr")
    )
    return PhaseResult(1, name, "measure", "ok", 0.0, float(iops.size), float(iops.size), "iops",
                       scopes, engine="io_uring")  # fmt: skip


def test_after_run_findings():
    steady_fast = _phase("good", np.full(30, 10_000.0))
    assert audit.after_run([steady_fast], {"good": {"rr": (1, 1, False)}}, None) == []
    jumpy = np.array([3000.0] + [10_000.0, 13_000.0] * 10)
    findings = audit.after_run(
        [_phase("bad", jumpy, cpu=99.0, lat_ns=1e5)],
        {"bad": {"rr": (4, 32, False)}},  # 128 in flight requested
        {"bytes_per_s": 1e6, "source": "sata 1.5 Gbps"},
    )
    codes = {f.code for f in findings}
    assert codes == {"cpu-bound", "shallow-queue", "unstable", "slow-start", "above-limit"}
    shallow = next(f for f in findings if f.code == "shallow-queue")
    # Little's law: 11.1K IOPS (mean of the series) × 100 µs = 1.1 I/Os in flight of 128
    assert "of 128 requested" in shallow.message and "1.1 I/Os" in shallow.message


def test_rate_limited_workloads_are_not_expected_to_fill_the_queue():
    findings = audit.after_run(
        [_phase("paced", np.full(30, 100.0))], {"paced": {"rr": (1, 32, True)}}, None
    )
    assert findings == []


def test_few_samples_are_merged_into_one_finding():
    phases = [_phase(n, np.full(4, 100.0)) for n in ("a", "b", "c")]
    findings = audit.after_run(phases, {}, None)
    (few,) = [f for f in findings if f.code == "few-samples"]
    assert few.phase == "a" and few.message.endswith("— also in b, c")
