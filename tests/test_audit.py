"""Steady-state rule, interface limits and audit checks on constructed data."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from tests import builders
from tests.fake_backend import FakeBackend

from iorig.analyze import audit
from iorig.analyze.precision import precision_state
from iorig.analyze.steady import SteadyWatch, evaluate, steady_of_series
from iorig.machine.sysinfo import _pcie_link, interface_limit
from iorig.model import (
    AGGREGATE,
    Disclosure,
    GeneratorCpu,
    InterfaceLimit,
    PhaseResult,
    Scope,
    check_window,
)
from iorig.model.records import flatten
from iorig.scenario.loading import read_source, resolve
from iorig.scenario.schema import SteadyRule


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


def test_steady_watch_turns_cumulative_counters_into_round_rates():
    watch = SteadyWatch(SteadyRule(metric="iops", round=2, window=2, max_range=100))
    for t in range(1, 8):
        watch.feed(1000 * t, float(t), ios=1000 * t * t, io_bytes=0)
    # ios = 1000 t^2: rounds 1-3, 3-5, 5-7 s
    assert watch.rounds == [4000.0, 8000.0, 12000.0]


def test_live_and_after_the_fact_steady_states_agree():
    """One mechanism: a series fed live (cumulative counters each second) and
    the same series judged after the fact give the same verdict and window."""
    rule = SteadyRule(round=2, window=3)
    values = [50.0, 70.0, 90.0, 100.0, 101.0, 99.0, 100.0, 102.0, 98.0, 100.0, 100.0, 100.0]
    watch = SteadyWatch(rule)
    watch.feed(0, 0.0, 0.0, 0.0)
    stopped_at = None
    for second in range(1, len(values) + 1):
        if (
            watch.feed(second * 1000, float(second), sum(values[:second]), 0.0)
            and stopped_at is None
        ):
            stopped_at = second
    live = watch.state
    after = steady_of_series(values, [0.0] * len(values), rule)
    assert live == after and after.converged and stopped_at is not None
    # rounds of 2 s: 60, 95, 100, 101, 99, 100; the window 95-101 is the first that holds
    assert after.window_start == 1 and len(after.rounds) == 6  # rounds after it are kept
    assert after.check is not None and after.check.holds


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
    targets = [{"backing_devices": [{"name": "nvme0n1", "link": link}]}]
    assert interface_limit(targets) == InterfaceLimit(3.94e9, "nvme0n1 0000:01:00.0")
    assert interface_limit([{"backing_devices": [{"name": "vda", "link": None}]}]) is None


def test_flatten_makes_dotted_keys():
    assert flatten({"a": {"b": 1, "c": [True, None]}}) == {
        "a.b": "1",
        "a.c[0]": "True",
        "a.c[1]": "",
    }


def _phase(name: str, iops: np.ndarray, cpu: float = 20.0, lat_ns: float = 1e5) -> PhaseResult:
    scopes = tuple(
        builders.scope(iops, where=where, cpu=cpu, lat_ns=lat_ns)
        for where in (AGGREGATE, Scope("rr", "local"))
    )
    return builders.phase(name, iops, scopes=scopes, engine="io_uring")


def test_after_run_findings():
    steady_fast = _phase("good", np.full(30, 10_000.0))
    assert audit.after_run([steady_fast], {"good": {"rr": audit.Asked(1, 1)}}, None) == []
    jumpy = np.array([3000.0] + [10_000.0, 13_000.0] * 10)
    findings = audit.after_run(
        [_phase("bad", jumpy, cpu=99.0, lat_ns=1e5)],
        {"bad": {"rr": audit.Asked(4, 32)}},  # 128 in flight requested
        InterfaceLimit(1e6, "sata 1.5 Gbps"),
    )
    codes = {f.code for f in findings}
    assert codes == {"cpu-bound", "shallow-queue", "unstable", "slow-start", "above-limit"}
    shallow = next(f for f in findings if f.code == "shallow-queue")
    # Little's law: 11.1K IOPS (mean of the series) × 100 µs = 1.1 I/Os in flight of 128
    assert "of 128 requested" in shallow.message and "1.1 I/Os" in shallow.message


def test_rate_limited_workloads_are_not_expected_to_fill_the_queue():
    findings = audit.after_run(
        [_phase("paced", np.full(30, 100.0))],
        {"paced": {"rr": audit.Asked(1, 32, paced=True)}},
        None,
    )
    assert findings == []


PACE = {"paced": {"rr": audit.Asked(1, 4, paced=True, paced_iops=2000.0)}}


def test_a_paced_workload_short_of_its_pace_is_named():
    kept = audit.after_run([_phase("paced", np.full(6, 1990.0))], PACE, None)
    assert "missed-pace" not in {f.code for f in kept}  # -0.5 %: within a Poisson pace's noise
    (short,) = [
        f
        for f in audit.after_run([_phase("paced", np.full(6, 1868.0))], PACE, None)
        if f.code == "missed-pace"
    ]
    assert "rr did 1.87K IOPS of the 2.00K asked (-6.6 % over 6.0 s)" in short.message
    # a load curve's points past the storage miss by design: its own table judges them
    curve = audit.after_run([_phase("paced", np.full(6, 1868.0))], PACE, None, None, None, "curve")
    assert "missed-pace" not in {f.code for f in curve}
    unpaced = {"paced": {"rr": audit.Asked(1, 4, paced=True)}}  # flow, a mixed pattern
    assert audit.check_pace(_phase("paced", np.full(6, 1000.0)), unpaced["paced"]) == []


def test_a_missed_pace_is_claimed_at_its_stated_false_alarm_rate():
    """Poisson counts of workloads that kept their pace (the null), and of
    ones 5 % short (a 6 s phase at 2,000 IOPS: 2.7 % is its 3σ): the test's
    error rates, measured over many workloads."""
    rng = np.random.default_rng(46)
    trials = 100_000
    for rate, seconds in ((2000.0, 6.0), (50.0, 10.0), (100_000.0, 60.0)):
        kept = rng.poisson(rate * seconds, trials)
        alarms = sum(audit.missed_pace(rate, int(n), seconds) for n in kept)
        assert alarms / trials <= 0.0014 * 1.5  # one-sided 3σ: 0.13 %
    short = rng.poisson(0.95 * 2000.0 * 6.0, 1000)
    assert sum(audit.missed_pace(2000.0, int(n), 6.0) for n in short) >= 985  # 99.4 % expected
    # within 1 %, however long the phase: too little to tell a storage engineer
    assert not audit.missed_pace(100_000.0, int(0.991 * 100_000 * 600), 600.0)


def test_few_samples_are_merged_into_one_finding():
    phases = [_phase(n, np.full(4, 100.0)) for n in ("a", "b", "c")]
    findings = audit.after_run(phases, {}, None)
    (few,) = [f for f in findings if f.code == "few-samples"]
    assert few.phase == "a" and few.message.endswith("— also in b, c")


def _jobs_phase(jobs: int, cpu_pct: float) -> PhaseResult:
    phase = _phase("p", np.full(30, 10_000.0), cpu=cpu_pct)
    agg = replace(phase.scopes[0], jobs=jobs)
    return replace(phase, scopes=(agg, *phase.scopes[1:]))


@pytest.mark.parametrize(
    ("jobs", "cpu_pct", "usable", "blamed"),
    [
        (2, 84.0, 2.0, False),  # 84 % of two CPUs: still some to spare
        (2, 86.0, 2.0, True),  # 86 %: none to spare
        (4, 12.0, 1.0, False),  # crowded (4 jobs, 1 CPU) but 48 % busy
        (4, 13.0, 1.0, True),  # crowded and 52 % busy: jobs queue for the CPU
        (1, 95.0, 4.0, False),  # one busy job of four CPUs: a cpu-bound job, not the machine
        (8, 90.0, None, False),  # CPUs unknown (fio servers): nothing claimed
    ],
)
def test_generator_limit_thresholds(jobs, cpu_pct, usable, blamed):
    findings = audit.after_run(
        [_jobs_phase(jobs, cpu_pct)], {"p": {"rr": audit.Asked(jobs, 1)}}, None, usable
    )
    assert ("generator-limit" in {f.code for f in findings}) is blamed


@pytest.mark.parametrize(
    ("cpu_s", "others_s", "codes"),
    [
        (0.45, 0.0, set()),  # fio alone, 45 % of its CPU: the storage sets the pace
        (0.2, 0.75, {"cpu-contention"}),  # all a neighbour left it: waited, not the limit
        (0.05, 0.5, set()),  # half a CPU to spare: nothing to say
        (0.9, 0.05, {"generator-limit"}),  # fio's own 90 %: named as before
    ],
)
def test_what_other_processes_take_of_fios_cpu_is_named_not_blamed_on_fio(cpu_s, others_s, codes):
    """One job on one CPU over 1 s (measured), beside other processes."""
    phase = replace(_jobs_phase(1, 5.0), generator_cpu=GeneratorCpu(cpu_s, 1.0, others_s))
    findings = audit.after_run([phase], {"p": {"rr": audit.Asked(1, 1)}}, None, 1.0)
    assert {f.code for f in findings} & {"generator-limit", "cpu-contention"} == codes
    for f in findings:
        if f.code == "cpu-contention":
            assert "0.75 of the 1 by other processes and 0.20 by fio" in f.message


def test_a_phase_without_its_precision_says_whether_it_ran_its_maximum():
    noisy = 1000 * (1 + 0.1 * np.random.default_rng(3).standard_normal(60))
    for kept, ended in ((60, "ran its maximum"), (11, "stopped early")):
        # a live stop at 13 s keeps 11 logged seconds; the logs may not bear it out
        state = precision_state(noisy[:kept].tolist(), "iops", 2.0, 10, 60)
        phase = replace(_phase("read", noisy[:kept]), precision=state)
        (finding,) = audit.check_precision(phase)
        assert finding.message.startswith(f"phase 'read' {ended} without the precision asked: ±")
        assert f"after {kept} s, asked ±2 %" in finding.message and "(min)" in finding.advice
    assert audit.check_precision(_phase("read", noisy)) == []  # not an until: precise phase


@pytest.mark.parametrize(
    ("overrides", "codes"),
    [({}, set()), ({"direct": "false", "prefill": "false"}, {"cache-fit", "no-prefill"})],
)
def test_before_run_findings_of_the_built_in_peak_with_and_without_its_fairness(overrides, codes):
    """peak's plan as shipped is fair; buffered I/O on a working set RAM can
    hold and reads of never-written blocks are each named with the fix."""
    resolved = resolve(read_source("peak"), "quick", {"size": "16MiB", **overrides})
    plan = FakeBackend().prepare(resolved, {}, allow_destroy=False, repeats=1)
    findings = {
        f.code: f for f in audit.before_run(plan, Disclosure({"memory": {"total_bytes": 8 << 30}}))
    }
    assert set(findings) & {"cache-fit", "no-prefill"} == codes
    if codes:
        assert "direct I/O" in findings["cache-fit"].advice
        assert "prefill" in findings["no-prefill"].advice
        assert "page cache" in findings["cache-fit"].message


def test_a_file_set_kept_from_an_earlier_run_is_no_unwritten_read():
    """Issue 49: ai-image's documented create=false reuses the data set a
    kept run created; fio lays out any file it reads that is missing, so a
    file set's reads never find unwritten blocks and no-prefill was false.
    peak without its prefill still reads blocks nothing wrote."""
    memory = Disclosure({"memory": {"total_bytes": 8 << 30}})
    for create in ("true", "false"):
        resolved = resolve(read_source("ai-image"), "quick", {"create": create})
        plan = FakeBackend().prepare(resolved, {}, allow_destroy=False, repeats=1)
        assert any(w.spec.fileset for p in plan.phases for w in p.workloads)
        assert "no-prefill" not in {f.code for f in audit.before_run(plan, memory)}, create
    resolved = resolve(read_source("peak"), "quick", {"size": "16MiB", "prefill": "false"})
    plan = FakeBackend().prepare(resolved, {}, allow_destroy=False, repeats=1)
    assert "no-prefill" in {f.code for f in audit.before_run(plan, memory)}


def test_devices_in_memory_or_behind_a_page_cache_are_named():
    """Issue 49 item 7, on disclosures as a machine gives them: zram, a loop
    device over a file on tmpfs, one without direct I/O; a loop device with
    direct I/O over a disk's file is storage."""

    def target(*devices: dict) -> Disclosure:
        disk = {"path": "/dev/x", "kind": "block", "backing_devices": list(devices)}
        return Disclosure({"targets": [disk]})

    def loop(fs: str, dio: bool) -> dict:
        file = {"backing_file": "/data/disk.img", "direct_io": dio, "backing_filesystem": fs}
        return {"name": "loop3", "transport": "loop", "loop": file}

    def codes(d: Disclosure) -> list[tuple[str, str]]:
        return [(f.code, f.message) for f in audit.check_target_location(d)]

    [(code, said)] = codes(target({"name": "zram0", "transport": "zram"}))
    assert code == "memory-backed" and "zram0, compressed RAM (zram)" in said
    [(code, said)] = codes(target(loop("tmpfs", True)))
    assert code == "memory-backed" and "loop3 is a loop device over /data/disk.img on tmpfs" in said
    [(code, said)] = codes(target(loop("ext4", False)))
    assert code == "cached-device" and "through the page cache" in said
    assert codes(target(loop("ext4", True))) == []
    # a disclosure from an older iorig, or a hostile one: nothing claimed
    assert codes(target({"name": "loop3", "transport": "loop"}, "junk")) == []
