"""Fairness audit: what could have inflated or distorted a run, each finding
with advice (docs/methodology.md §9). Pure functions over the plan, the disclosure
and the stored results; ``before_run`` runs on the plan, ``after_run`` on
the results.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from iorig.analyze.generator import CEILING_FRACTION, JOB_BOUND_PCT, Ceiling, generator_load
from iorig.analyze.precision import STOP_ARTIFACT_S, limit_share, precision_text
from iorig.analyze.search import kept_pace
from iorig.model import (
    ALL,
    Disclosure,
    Finding,
    InterfaceLimit,
    PhaseKind,
    PhaseResult,
    PhaseStatus,
    series_stats,
)
from iorig.scenario.schema import READS
from iorig.units import format_bytes, format_rate, format_si

DEPTH_SHORTFALL = 0.8
# a paced workload missed its pace: fewer I/Os than a Poisson pace gives
# with three standard deviations to spare (``kept_pace``: a false alarm in
# about 1 in 740 workloads that did keep pace), and short by more than this
PACE_PRACTICAL = 0.01
PACE_JUDGING_SEARCHES = frozenset({"curve", "loadpoints"})
COV_LIMIT = 0.10
FIRST_SECOND_RATIO = 0.7
MIN_SECONDS = 10


# ------------------------------------------------------------ before a run


MLPERF_MEMORY_TIMES = 5  # MLPerf Storage: a training data set of at least 5 × memory


def check_cache_fit(plan: Any, memory_bytes: int | None) -> list[Finding]:
    """Buffered I/O on a working set the page cache can hold. A training data
    set is held to MLPerf Storage's rule (5 × memory, or direct I/O); a
    checkpoint that fsyncs its writes within their time and is read after fio
    dropped its files' cached pages is not inflated by the cache."""
    if not memory_bytes:
        return []
    out = []
    for phase in plan.phases:
        checkpoint = getattr(phase, "checkpoint", None)
        if checkpoint is not None and checkpoint.model.fsync:
            continue
        if getattr(phase, "training", None) is not None:
            out += _training_cache_fit(phase, memory_bytes)
            continue
        for w in phase.workloads:
            # writes fsynced within their time are written back, not absorbed
            if w.spec.fsync_at_end and w.spec.rw not in READS:
                continue
            # a file set's jobs each have files of their own
            size = w.size_bytes * (w.spec.jobs if w.spec.fileset is not None else 1)
            if not w.spec.direct and size < 2 * memory_bytes:
                out.append(
                    Finding(
                        "cache-fit",
                        f"buffered I/O (direct=false) on a working set of "
                        f"{format_bytes(size)}, less than twice the RAM "
                        f"({format_bytes(memory_bytes)}): reads can be served from the page "
                        "cache and writes absorbed by it, so results show memory, not storage",
                        "use direct I/O (the default) or a working set of at least twice the RAM",
                        phase.name,
                    )
                )
                break
    return out


def _training_cache_fit(phase: Any, memory_bytes: int) -> list[Finding]:
    data_set = sum(w.size_bytes * w.spec.jobs for w in phase.workloads)
    if phase.training.direct or data_set >= MLPERF_MEMORY_TIMES * memory_bytes:
        return []
    return [
        Finding(
            "cache-fit",
            f"phase {phase.name!r} reads a data set of {format_bytes(data_set)} a host with "
            f"buffered I/O, less than {MLPERF_MEMORY_TIMES} × the RAM "
            f"({format_bytes(memory_bytes)}): this breaks MLPerf Storage's rule, as a data set "
            "the page cache holds gives a misleadingly high AU. fio drops each file's cached "
            "pages as it opens it, every epoch, but a client's own cache (NFS, FUSE) may still "
            "answer",
            f"read with direct I/O (direct=true, the default) or give a data set of at least "
            f"{MLPERF_MEMORY_TIMES} × the RAM (dataset_size)",
            phase.name,
        )
    ]


def _covers(intervals: list[tuple[int, int]], size: int) -> bool:
    """Whether the union of [start, end) intervals covers [0, size)."""
    reached = 0
    for start, end in sorted(intervals):
        if start > reached:
            return False
        reached = max(reached, end)
    return reached >= size


def check_prefill(plan: Any) -> list[Finding]:
    """Reads of a region no earlier phase has written completely. Not a
    file set's: fio lays out every file a job reads that is missing or
    short, writing each byte before the job's first read, so its reads
    find written data whether a creation phase ran or the files were kept
    from an earlier run (ai-image's documented create=false)."""
    written: dict[str, list[tuple[int, int]]] = {}
    out = []
    for phase in plan.phases:
        for w in phase.workloads:
            role = w.target.role
            if w.engine == "null" or w.spec.fileset is not None:
                continue
            if w.spec.rw not in READS or _covers(written.get(role, []), w.target.size_bytes):
                continue
            out.append(
                Finding(
                    "no-prefill",
                    f"phase {phase.name!r} reads target {role!r} before any phase "
                    "wrote all of it: never-written blocks can be answered without touching "
                    "the media (thin provisioning, sparse files, unmapped SSD blocks)",
                    "add a prefill or precondition phase (the built-ins have one; "
                    "do not disable it)",
                    phase.name,
                )
            )
            break
        if PhaseKind(phase.kind).writes_once:
            for w in phase.workloads:
                if w.spec.fileset is not None:
                    continue
                step = w.spec.offset_increment or 0
                for job in range(w.spec.jobs if step else 1):
                    start = w.offset_bytes + job * step
                    written.setdefault(w.target.role, []).append((start, start + w.size_bytes))
    return out


def check_data_pattern(plan: Any) -> list[Finding]:
    out = []
    for phase in plan.phases:
        for w in phase.workloads:
            if w.spec.rw in READS and w.spec.rw not in ("randrw", "rw"):
                continue
            if w.spec.compress or w.spec.dedupe:
                out.append(
                    Finding(
                        "reducible-data",
                        f"phase {phase.name!r} writes reducible data: {w.spec.compress:g}% "
                        f"compressible, {w.spec.dedupe:g}% duplicate buffers; storage that "
                        "compresses or deduplicates will show higher throughput than with "
                        "real data",
                        "state the data pattern with any result; check the real ratio with "
                        "`iorig doctor --data`",
                        phase.name,
                        "info",
                    )
                )
    return out


def check_distribution(plan: Any) -> list[Finding]:
    out = []
    for phase in plan.phases:
        for w in phase.workloads:
            if w.spec.distribution != "random" and w.spec.rw.startswith("rand"):
                out.append(
                    Finding(
                        "access-skew",
                        f"phase {phase.name!r} uses a skewed access distribution "
                        f"({w.spec.distribution}): a hot subset gets most I/O, which caches "
                        "and tiers favour",
                        "report the distribution with the result",
                        phase.name,
                        "info",
                    )
                )
    return out


def check_target_location(disclosure: Disclosure) -> list[Finding]:
    out = []
    for target in disclosure.targets:
        if "path" not in target:
            continue
        fs = target.get("filesystem") or {}
        if fs.get("type") in MEMORY_FILESYSTEMS:
            out.append(_in_memory(f"{target['path']} is on {fs['type']}"))
        out += _memory_devices(target)
        if target.get("shares_os_device"):
            out.append(
                Finding(
                    "os-device",
                    f"{target['path']} is on the same device as the operating system: its "
                    "I/O (logs, swap, package updates) competes with the test and the "
                    "device's caches are shared",
                    "test a dedicated device where you can",
                    severity="info",
                )
            )
    return out


MEMORY_FILESYSTEMS = ("tmpfs", "ramfs")
MEMORY_DEVICES = {"zram": "compressed RAM (zram)", "ram": "a RAM disk (brd)"}


def _in_memory(where: str) -> Finding:
    return Finding(
        "memory-backed",
        f"{where}: that is RAM, not storage",
        "point --target at the storage you mean to measure",
    )


def _memory_devices(target: dict[str, Any]) -> list[Finding]:
    """Block devices under a target that are RAM or answer from a page
    cache: zram and RAM disks, a loop device over a file on tmpfs, a loop
    device without direct I/O (issue 49: p50 3.2 µs and 175 K IOPS in a
    second over an ext4 file)."""
    out = []
    for device in target.get("backing_devices") or []:
        if not isinstance(device, dict):
            continue
        name, transport = str(device.get("name")), device.get("transport")
        loop = device.get("loop") if isinstance(device.get("loop"), dict) else None
        if transport in MEMORY_DEVICES:
            out.append(_in_memory(f"{target['path']} is on {name}, {MEMORY_DEVICES[transport]}"))
        elif loop and loop.get("backing_filesystem") in MEMORY_FILESYSTEMS:
            out.append(
                _in_memory(
                    f"{name} is a loop device over {loop['backing_file']} on "
                    f"{loop['backing_filesystem']}"
                )
            )
        elif loop and not loop.get("direct_io"):
            out.append(
                Finding(
                    "cached-device",
                    f"{name} reads and writes {loop['backing_file']} through the page cache "
                    "(its direct I/O is off): a block read or written before is answered "
                    "from memory, and writes wait for no storage, so its figures are the "
                    "cache's, not the storage's under the file",
                    f"losetup --direct-io=on /dev/{name}, or measure the storage under the "
                    "file itself",
                )
            )
    return out


def check_null_engine(plan: Any) -> list[Finding]:
    return [
        Finding(
            "null-engine",
            f"phase {phase.name!r} runs fio's null engine: no storage is touched; its figures "
            "are what the load generator can produce, not what any storage does",
            "use a real engine (auto) to measure storage",
            phase.name,
        )
        for phase in plan.phases
        if any(w.engine == "null" for w in phase.workloads)
    ]


def merge_by_code(findings: list[Finding]) -> list[Finding]:
    """One finding per kind: the first one's text, naming the other phases
    that have it too, so a quick run does not print the same advice ten times."""
    merged: dict[str, Finding] = {}
    others: dict[str, list[str]] = {}
    for f in findings:
        if f.code not in merged:
            merged[f.code] = f
            others[f.code] = []
        elif f.phase and f.phase != merged[f.code].phase and f.phase not in others[f.code]:
            others[f.code].append(f.phase)
    out = []
    for code, f in merged.items():
        if others[code]:
            f = replace(f, message=f"{f.message} — also in {', '.join(others[code])}")
        out.append(f)
    return out


def before_run(plan: Any, disclosure: Disclosure) -> list[Finding]:
    return merge_by_code(
        check_cache_fit(plan, disclosure.memory_bytes)
        + check_prefill(plan)
        + check_data_pattern(plan)
        + check_distribution(plan)
        + check_target_location(disclosure)
        + check_null_engine(plan)
    )


# ------------------------------------------------------------- after a run


@dataclass(frozen=True)
class Asked:
    """What a workload asked of fio on each host: jobs, queue depth,
    whether it is paced (rate, rate_iops or flow: fewer I/Os in flight by
    design) and the I/O rate its pace comes to, all jobs together
    (``paced_iops``; None when unpaced or when the pace is not one rate of
    I/Os: flow, a mixed direction, bytes/s over a block-size mix)."""

    jobs: int
    iodepth: int
    paced: bool = False
    paced_iops: float | None = None


def _outstanding(iops: float, lat_ns: float) -> float:
    """Little's law: I/Os in flight = rate × time each one spends in flight."""
    return iops * lat_ns / 1e9


def check_generator(
    phase: PhaseResult,
    requested: dict[str, Asked],
    usable_cpus: float | None = None,
    ceiling: Ceiling | None = None,
) -> list[Finding]:
    """Whether the load generator, not the storage, set the pace: fio's CPU
    use against the CPUs it may run on, one CPU-bound job, a rate near the
    null engine's ceiling, or fewer I/Os in flight than asked for.

    ``requested``: workload label -> what it asked of fio.
    """
    out = []
    load = generator_load(phase, usable_cpus)
    if load is not None and load.limiting:
        out.append(
            Finding(
                "generator-limit",
                f"phase {phase.name!r}: the load generator is the limit, not the storage: "
                f"{load.describe()}",
                f"give fio more CPUs (it may use {load.usable_cpus:g} here: check taskset, "
                "cpusets, the VM's vCPUs), use fewer jobs with a deeper queue"
                + ("" if "io_uring" in phase.engine else " or a cheaper engine (io_uring)")
                + "; `iorig doctor --generator` shows what fio can generate on this machine",
                phase.name,
            )
        )
    if load is not None and load.contended and not load.limiting:
        out.append(
            Finding(
                "cpu-contention",
                f"phase {phase.name!r}: the CPUs fio may run on were busy, "
                f"{load.others_cpus:.2f} of the {load.usable_cpus:g} by other processes and "
                f"{load.cpus_busy:.2f} by fio: fio's I/Os waited for a CPU as well as "
                "for the storage",
                "run nothing else on the CPUs fio may use during a benchmark (or pin fio "
                "to CPUs of its own with taskset)",
                phase.name,
            )
        )
    totals = phase.aggregate.totals.get(ALL) if phase.aggregate else None
    if ceiling is not None and totals is not None and ceiling.iops > 0:
        share = totals.iops / ceiling.iops
        text = (
            f"phase {phase.name!r} reached {format_si(totals.iops)} IOPS, "
            f"{share * 100:.0f} % of the {format_si(ceiling.iops)} IOPS fio's null "
            f"engine (no storage at all) generates on {ceiling.host} with "
            f"{ceiling.shape.describe()}"
        )
        if share >= CEILING_FRACTION:
            out.append(
                Finding(
                    "generator-ceiling",
                    f"{text}: fio's own cost per I/O, not the storage, sets the pace",
                    "use more jobs on more CPUs, a deeper queue or a cheaper engine",
                    phase.name,
                )
            )
        else:
            out.append(Finding("generator-headroom", text, "", phase.name, "info"))
    for scope in phase.workload_scopes(list(requested)):
        workload = scope.scope.workload
        asked = requested[workload]
        if scope.busiest_job_cpu_pct >= JOB_BOUND_PCT:
            out.append(
                Finding(
                    "cpu-bound",
                    f"phase {phase.name!r}, workload {workload!r}: a fio job used "
                    f"{scope.busiest_job_cpu_pct:.0f}% of a CPU, all one job can use: that "
                    "job, not the storage, may be the limit",
                    "use more jobs (on more CPUs) or a deeper queue, or a more efficient "
                    "engine (io_uring)",
                    phase.name,
                )
            )
        totals = scope.totals.get(ALL)
        if totals is None or asked.paced or phase.engine == "psync":
            continue
        achieved = _outstanding(totals.iops, totals.total_lat_mean_ns)
        wanted = asked.jobs * asked.iodepth
        if wanted > 1 and achieved < DEPTH_SHORTFALL * wanted:
            out.append(
                Finding(
                    "shallow-queue",
                    f"phase {phase.name!r}, workload {workload!r}: by Little's law only "
                    f"{achieved:.1f} I/Os were in flight on average, of {wanted} requested "
                    "(jobs × iodepth)",
                    "the generator could not keep the queue full (CPU, engine or device "
                    "queue limit); results understate what the storage does at that depth",
                    phase.name,
                )
            )
    return out


def missed_pace(asked_iops: float, ios: int, seconds: float) -> bool:
    """Whether ``ios`` I/Os in ``seconds`` fell short of a pace of
    ``asked_iops``: the load points' rule (``kept_pace``) at a tolerance of
    ``PACE_PRACTICAL``, beyond what Poisson arrivals (iorig's pace; fio's
    linear one varies less) give by chance at three standard deviations."""
    if seconds <= 0:
        return False
    return not kept_pace(asked_iops, ios / seconds, seconds, PACE_PRACTICAL)


def check_pace(phase: PhaseResult, requested: dict[str, Asked]) -> list[Finding]:
    """A paced workload that did fewer I/Os than its pace asked, on any
    host: the storage or the generator could not keep up, and the phase's
    figures are of a lighter load than the scenario says (docs/guide/
    disclosure.md). One finding per phase, naming each short workload."""
    if phase.kind is not PhaseKind.MEASURE or phase.status is not PhaseStatus.OK:
        return []
    short = []
    for scope in phase.workload_scopes(list(requested)):
        asked = requested[scope.scope.workload].paced_iops
        totals = scope.totals.get(ALL)
        if asked is None or totals is None or totals.iops <= 0:
            continue
        seconds = totals.ios / totals.iops
        if missed_pace(asked, totals.ios, seconds):
            host = scope.scope.host
            where = scope.scope.workload + (f" on {host}" if host not in (None, "local") else "")
            short.append(
                f"{where} did {format_si(totals.iops)} IOPS of the {format_si(asked)} "
                f"asked ({(totals.iops / asked - 1) * 100:+.1f} % over {seconds:.1f} s)"
            )
    if not short:
        return []
    return [
        Finding(
            "missed-pace",
            f"phase {phase.name!r}: a paced workload did not keep its pace: "
            + "; ".join(short)
            + ". Its figures are of a lighter load than the scenario asks",
            "look at the per-second chart for stalls and at the generator findings; "
            "run nothing else beside the benchmark, or ask for a pace the storage and "
            "the generator can keep",
            phase.name,
        )
    ]


def check_unlogged(phase: PhaseResult) -> list[Finding]:
    """A measured phase with I/O but not one whole second every job logged:
    fio writes no window for a job that ends within about a second (the
    collection fails a longer one), and a series without some jobs would
    understate the phase, so none is kept."""
    totals = phase.aggregate.totals.get(ALL) if phase.aggregate else None
    if totals is None or totals.ios == 0 or phase.status is not PhaseStatus.OK:
        return []
    which = f"phase {phase.name!r}" + (f" (repeat {phase.repeat + 1})" if phase.repeat else "")
    return [
        Finding(
            "no-series",
            f"{which} has no per-second figures: fio logged no whole second for some of its "
            "jobs; its median, maximum, minimum and noise are unknown, and only fio's totals "
            "for the whole phase are kept",
            f"measure for at least {MIN_SECONDS} s (60 s or more for decisions)",
            phase.name,
        )
    ]


def check_stability(phase: PhaseResult) -> list[Finding]:
    scope = phase.aggregate
    if phase.kind is not PhaseKind.MEASURE or scope is None:
        return []
    if not len(scope.series.get(ALL, ())):
        return check_unlogged(phase)
    values = scope.series[ALL].values(phase.headline)
    stats = series_stats(values)
    out = []
    if stats.n < MIN_SECONDS:
        out.append(
            Finding(
                "few-samples",
                f"phase {phase.name!r} has {stats.n} whole seconds of samples: its median, "
                "maximum, minimum and any comparison rest on very little",
                f"measure for at least {MIN_SECONDS} s (60 s or more for decisions) or repeat "
                "the run (--repeat)",
                phase.name,
            )
        )
    if stats.n > 2 and not math.isnan(stats.cov) and stats.cov >= COV_LIMIT:
        out.append(
            Finding(
                "unstable",
                f"phase {phase.name!r} varies a lot from second to second (coefficient of "
                f"variation {stats.cov * 100:.0f}%)",
                "look at the per-second chart; warm up until steady (until: steady) or "
                "measure longer",
                phase.name,
            )
        )
    if stats.n > 3:
        rest = float(np.median(np.asarray(values[1:], dtype=float)))
        if rest > 0 and values[0] < FIRST_SECOND_RATIO * rest:
            out.append(
                Finding(
                    "slow-start",
                    f"phase {phase.name!r}: the first second ran at "
                    f"{values[0] / rest * 100:.0f}% of the rest (a cache or device still "
                    "warming up)",
                    "add or lengthen a warm-up phase",
                    phase.name,
                )
            )
    return out


def check_limit(phase: PhaseResult, limit: InterfaceLimit | None) -> list[Finding]:
    scope = phase.aggregate
    if limit is None or scope is None or ALL not in scope.totals:
        return []
    rate = scope.totals[ALL].bytes_per_s
    series = scope.series.get(ALL)
    share = limit_share(rate, series.bytes_per_s if series is not None else [], limit.bytes_per_s)
    # above beyond the phase's own noise: a link's figure is a hair off now and then
    if not share.above:
        return []
    return [
        Finding(
            "above-limit",
            f"phase {phase.name!r} moved {format_rate(rate)}, above the "
            f"{format_rate(limit.bytes_per_s)} the link allows ({limit.source}) beyond its "
            f"noise ({share.low * 100:.1f}–{share.high * 100:.1f}% of it): a cache or data "
            "reduction answered, not the device",
            "use direct I/O, incompressible data and a working set larger than every cache",
            phase.name,
        )
    ]


def check_steady(phase: PhaseResult) -> list[Finding]:
    st = phase.steady
    if st is None or st.converged:
        return []
    last = st.check
    detail = (
        f" (last window: range {last.range_frac * 100:.0f}%, slope {last.slope_frac * 100:.0f}% "
        "of the mean)"
        if last
        else f" ({len(st.rounds)} rounds, fewer than the {st.window}-round window)"
    )
    return [
        Finding(
            "not-steady",
            f"warm-up {phase.name!r} did not reach steady state in {len(st.rounds)} rounds of "
            f"{st.round_s:g} s{detail}; measured phases after it may still drift",
            "allow a longer warm-up (its duration is the maximum) or precondition the device",
            phase.name,
        )
    ]


def check_precision(phase: PhaseResult) -> list[Finding]:
    state = phase.precision
    if state is None or state.precise or phase.status is not PhaseStatus.OK:
        return []
    # a live stop is judged again on the logged seconds (two views of the same
    # I/O), which may fall short: then the phase did not run its maximum (a
    # phase that did keeps all but at most the seconds a stop distorts and one
    # partial window)
    ran_all = state.seconds >= state.max_s - STOP_ARTIFACT_S - 1
    ended = "ran its maximum" if ran_all else "stopped early"
    return [
        Finding(
            "not-precise",
            f"phase {phase.name!r} {ended} without the precision asked: {precision_text(state)}",
            "allow a longer maximum (duration) or minimum (min), accept a wider precision, "
            "or look at the per-second chart for drift or steps",
            phase.name,
        )
    ]


def after_run(
    phases: list[PhaseResult],
    requested: dict[str, dict[str, Asked]],
    limit: InterfaceLimit | None,
    usable_cpus: float | None = None,
    ceilings: dict[str, Ceiling] | None = None,
    search_kind: str | None = None,
) -> list[Finding]:
    """``usable_cpus``: what fio could run on (None for fio servers, whose CPUs
    iorig cannot see); ``ceilings``: phase -> the null engine's rate for it;
    ``search_kind``: the run's search, whose load points' paces its own table
    judges (a curve's or load points' loads past the storage miss by design)."""
    out: list[Finding] = []
    ceilings = ceilings or {}
    for phase in phases:
        asked = requested.get(phase.name, {})
        if phase.kind in (PhaseKind.MEASURE, PhaseKind.WARMUP) and phase.engine != "null":
            out += check_generator(phase, asked, usable_cpus, ceilings.get(phase.name))
        if search_kind not in PACE_JUDGING_SEARCHES:
            out += check_pace(phase, asked)
        out += check_stability(phase) + check_limit(phase, limit) + check_steady(phase)
        out += check_precision(phase)
    return merge_by_code(out)
