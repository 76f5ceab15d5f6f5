"""The one collection step: what any backend brought back from a phase
(fio's JSON output and logs) into per-workload, per-host and aggregate
results, with what went wrong.

Hosts are told apart by how fio names their jobs and by the log prefix each
host's job file used (``RawPhase.hosts``). Log times are wall-clock
(``log_unix_epoch=1``, this machine's as fio servers'): each host's start is
read from its logs and its jobs' and the hosts' per-second series are put
on one time axis; hosts' clocks must agree (NTP) for that to be right to
the second.
"""

from __future__ import annotations

import errno
import math
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from itertools import pairwise
from typing import Any

import numpy as np

from iorig.fio import parse
from iorig.fio.assemble import JobLogs, SectionData, build_scopes
from iorig.model import IoErrorCount, PhaseKind, Scope, ScopeResult
from iorig.model.checkpoint import CheckpointRecord, ProcessTime
from iorig.model.combine import window
from iorig.model.training import TrainingRecord
from iorig.run import training
from iorig.run.backend import HostLogs, RawPhase
from iorig.run.plan import PlannedPhase, PlannedWorkload
from iorig.run.plausible import did_nothing, implausible_jobs, implausible_series
from iorig.scenario.checkpoint import SHARD_WORKLOAD


@dataclass(frozen=True)
class Collected:
    scopes: tuple[ScopeResult, ...]
    fio_version: str
    problem: str | None  # why the phase failed, when it did
    origin_s: float | None = None  # unix seconds at the series' second 0 (wall-clock logs)
    io_errors: tuple[IoErrorCount, ...] = ()  # the I/O errors fio reported, per type and host
    training: TrainingRecord | None = None  # a training phase's accelerators' batches
    checkpoint: CheckpointRecord | None = None  # a checkpoint phase's processes
    # each host's series began this many seconds after the first host's
    host_shifts_s: Mapping[str, int] = field(default_factory=dict)


def tail(text: str, lines: int = 3) -> str:
    """The last lines fio printed, on one line."""
    kept = [line.strip() for line in text.strip().splitlines() if line.strip()][-lines:]
    return " / ".join(kept)


def host_start_ms(sample_times_ms: Sequence[int], interval_ms: int = 1000) -> int:
    """When a host's job started, from the timestamps of one of its averaged
    logs (``log_avg_msec=interval_ms``, ``log_unix_epoch=1``).

    fio writes window n (1, 2, …) at, or a few ms after, start + n × interval
    and may repeat the last window for a partial one; each sample's window
    is counted from the first sample, and the earliest bound wins.
    """
    if not sample_times_ms:
        raise ValueError("no samples")
    first = min(sample_times_ms)
    return min(t - (round((t - first) / interval_ms) + 1) * interval_ms for t in sample_times_ms)


def _job_logs(
    kinds: Mapping[str, list[Any]], start_ms: int, paused: Sequence[tuple[int, int]] = ()
) -> JobLogs:
    """A job's logs, times made relative to its host's start (``start_ms``,
    0 for logs that count from the job's own start); the seconds its host
    was stopped on purpose (``paused``, on that axis) logged as zero."""
    kinds = {
        k: parse.HistLog.of(v) if k == "clat_hist" else parse.SampleLog.of(v)
        for k, v in kinds.items()
    }
    if start_ms:
        kinds = {k: v.shifted(start_ms) for k, v in kinds.items()}
    if paused:
        kinds = {k: _zero_filled(v, paused) if k in ("iops", "bw") else v for k, v in kinds.items()}
    return JobLogs.of(kinds)


def _job_start(kinds: Mapping[str, Any]) -> float | None:
    """When a job began at the latest (its logs' clock): from its averaged
    logs' window times, its first taken as its first second's, or, where it
    logged every completion, its first I/O's submission (that completion's
    time less its latency); None where it logged neither. A paced job may
    log no window in its first seconds (a stat job at 63 a second logged
    its first at 2.56 s), so this may be seconds late for it."""
    if times := _times(kinds.get("iops", ())):
        return host_start_ms(times)
    if _completions(kinds) and len(kinds["clat"]):
        log = parse.SampleLog.of(kinds["clat"])
        return float(np.min(log.t_ms - log.value / 1e6))  # latency in ns
    return None


def _started(log: JobLogs, job: parse.JobStats) -> JobLogs:
    """A job's logs with when it began on its host's axis, never before its
    host's first job: where its first window says (``_job_start``); for a
    paced job the earlier of that and its runtime before its last window (it
    ran past every window it wrote), as a paced job's first window may be
    seconds late (a stat job at 63 a second logged its only one at 2.56 s).
    Not so a free-running one's: its windows come every second from its
    first, but its last, partial one may be missing, which put a job begun
    at 0.6 s at 0."""
    times = _times(log.iops)
    if not times or job.job_runtime_ms <= 0:
        return log
    began = host_start_ms(times)
    if job.paced:
        began = min(began, max(times) - job.job_runtime_ms)
    return replace(log, started_ms=max(0, math.floor(began)))


def _overlaps(a_ms: int, b_ms: int, paused: Sequence[tuple[int, int]]) -> bool:
    return any(a_ms < p1 + 1000 and b_ms > p0 - 1000 for p0, p1 in paused)


def _zero_filled(samples: parse.SampleLog, paused: Sequence[tuple[int, int]]) -> parse.SampleLog:
    """A stopped host's fio logs no window while frozen and one late window
    after: the whole seconds between, inside a pause, did no I/O — zero, so
    that the series goes on through the stop instead of ending at it."""
    out = list(samples)
    for ddir in {s.ddir for s in samples}:
        times = sorted(s.t_ms for s in samples if s.ddir == ddir)
        bs = next(s.bs for s in samples if s.ddir == ddir)
        for a, b in pairwise(times):
            if b - a > 1500 and _overlaps(a, b, paused):
                out += [
                    parse.LogSample(k * 1000, 0.0, ddir, bs)
                    for k in range(round(a / 1000) + 1, round(b / 1000))
                ]
    return parse.SampleLog.of(sorted(out, key=lambda s: s.t_ms))


def collect(
    raw: RawPhase,
    phase: PlannedPhase,
    pauses: Mapping[str, Sequence[tuple[float, float]]] | None = None,
) -> Collected:
    """Scopes (aggregate first, then hosts, then workloads), fio's version,
    and the problem if any: no output, a host without results (the others
    are kept, the phase fails naming it), or a fio job that ended with an
    error. ``pauses``: when hosts were stopped on purpose (stop-host
    events, unix seconds); those seconds are the host's zeros, not a stall."""
    several = len(raw.hosts) > 1
    default_name = raw.hosts[0].label if len(raw.hosts) == 1 else "local"
    try:
        output = parse.parse_final(raw.exit.output, default_name, raw.exit.host_names)
    except parse.FioOutputError as exc:
        where = "no results from any host: " if several else ""
        why = f"{where}{exc}: {tail(raw.exit.stderr) or '(fio printed no error message)'}"
        return Collected((), "", why, io_errors=parse.io_errors(raw.exit.stderr))
    by_prefix: dict[str, Mapping[int, Mapping[str, list[Any]]]] = {}
    for (prefix, _suffix), jobs in raw.logs.items():
        by_prefix[prefix] = jobs
    if phase.kind is PhaseKind.VERIFY:
        output = replace(output, jobs=tuple(_reads_only(j) for j in output.jobs))
    wall_s = raw.ended_at - raw.started_at if raw.ended_at > raw.started_at > 0 else None
    if impossible := implausible_jobs(output.jobs, phase, wall_s):
        # no figure of it is stored; fio's output is, to be looked at
        return Collected((), output.version, impossible, io_errors=parse.io_errors(raw.exit.stderr))
    present = {j.host for j in output.jobs}
    missing = [h for h in raw.hosts if h.label not in present]
    starts = _host_starts(raw.hosts, phase, by_prefix) if raw.wallclock_logs else {}
    # Not fio's live status (RawPhase.io_started_at), which stands in only
    # where no job logged a time: a status printed while a job still laid out
    # its file counts that job's runtime from before its I/O, and beside
    # stress-ng put second 0 more than half a second early, every second of
    # a one-job phase one later, and the phase without a second 1 stored none
    first = min(starts.values(), default=0)
    paused = {
        h: [(round(a * 1000) - starts[h], round(b * 1000) - starts[h]) for a, b in spans]
        for h, spans in (pauses or {}).items()
        if h in starts
    }
    sections = [
        _section(
            phase,
            w,
            host,
            jobs=output.jobs,
            by_prefix=by_prefix,
            start=starts.get(host.label, 0),
            paused=paused,
        )
        for host in raw.hosts
        if host not in missing
        for w in phase.workloads
    ]
    shifts = {h: round((s - first) / 1000) for h, s in starts.items()}
    scopes = list(build_scopes(sections, shifts, per_host=several)) if sections else []
    if impossible := implausible_series(scopes):
        return Collected((), output.version, impossible, io_errors=parse.io_errors(raw.exit.stderr))
    problems = [p for p in (did_nothing(output.jobs, phase),) if p]
    stalls = find_stalls(raw, phase, by_prefix, output.jobs, starts, paused)
    if stalls:
        scopes = [_before_stalls(sc, stalls, shifts) for sc in scopes]
        problems.append(
            "; ".join(
                f"{'fio' if h == 'local' else h} logged nothing in seconds {a}–{b} of the phase "
                f"({b - a + 1} s: the host, its network or its storage stalled)"
                for h, (a, b) in stalls.items()
            )
            + "; the per-second figures stop before the stall"
        )
    if missing:
        fallback = tail(raw.exit.stderr, 2) or "it stopped answering or was stopped mid-phase"
        why = {h.label: raw.host_problems.get(h.label, fallback) for h in missing}
        scopes += [
            ScopeResult.failed(Scope(host=h), f"no results from {h}: {w}") for h, w in why.items()
        ]
        kept = "; the other hosts' figures are kept" if len(missing) < len(raw.hosts) else ""
        problems.append(
            f"{len(missing)} of {len(raw.hosts)} hosts gave no results ("
            + "; ".join(f"{h}: {w}" for h, w in why.items())
            + f"){kept}"
        )
    # A job that went on past read or write errors (continue_on_error) did what
    # the scenario asked: its errors are counted, not a failure. Verify errors
    # (EILSEQ) are lost data and always fail the phase.
    failed = [
        j for j in output.jobs if j.error and not (j.continued and j.first_error != errno.EILSEQ)
    ]
    if failed:
        j = failed[0]
        where = f" on {j.host}" if several else ""
        problems.append(
            f"fio job {j.name}{where} ended with error {j.error}: "
            f"{tail(raw.exit.stderr) or '(fio printed no error message)'}"
        )
        if why := fio_failure_why(raw.exit.stderr):
            problems.append(why)
    if phase.kind is PhaseKind.MEASURE and (unlogged := find_unlogged(sections)):
        # the other jobs' seconds alone would understate the phase: no series
        # where a job's are missing (the audit says so); fio's totals are kept
        scopes = [_without_series(sc) if _covers(sc.scope, unlogged) else sc for sc in scopes]
        # A phase that runs until its data is through is judged by fio's totals
        # and runtimes: a checkpoint's buffered writes are done in a fraction of
        # a second and its fsync logs nothing, yet its figure is sound.
        lost = [u for u in unlogged if u.ran_ms >= SURE_WINDOW_MS]
        if lost and not phase.until_done:
            problems.append(lost_logs_message(lost, several))
    # the hosts' clock: where the series' second 0 was
    origin = first / 1000 if starts else None
    printed = parse.io_errors(raw.exit.stderr)
    counted = printed + parse.unprinted_errors(printed, output.jobs, "local")
    record = _training(phase, sections, {h: float(s - first) for h, s in starts.items()})
    problem = "; ".join(problems) or None
    return Collected(
        tuple(scopes),
        output.version,
        problem,
        origin,
        counted,
        record,
        _checkpoint(phase, sections),
        shifts if several else {},
    )


# fio before 3.42 deadlocks in its status reporting where I/Os take seconds
# (run/local.py, needs_status): what it prints, and what it means
STAT_SEM_STUCK = "fio seems to be stuck grabbing stat_sem"
STAT_SEM_WHY = (
    "fio's status reporting deadlocked: its I/Os took seconds while it reported "
    "(many jobs queued on a slow device), which fio before 3.42 cannot survive "
    "(fixed by fio commit 00084f95); use fio 3.42 or later, or fewer jobs or a "
    "lower iodepth on this device"
)


def fio_failure_why(stderr: str) -> str | None:
    """What a failure fio printed means, where iorig knows it."""
    return STAT_SEM_WHY if STAT_SEM_STUCK in stderr else None


# fio stops a job at its runtime to the millisecond, less its last I/Os' wait
LIMIT_SLACK_MS = 100


def stopped_at_limit(raw: RawPhase, phase: PlannedPhase) -> bool:
    """Whether fio ended a phase that runs until its jobs are through
    (``until: done``) at its limit instead: a job ran its whole runtime."""
    if not phase.until_done or not phase.duration_s:
        return False
    default_name = raw.hosts[0].label if len(raw.hosts) == 1 else "local"
    try:
        output = parse.parse_final(raw.exit.output, default_name, raw.exit.host_names)
    except parse.FioOutputError:
        return False
    limit_ms = phase.duration_s * 1000
    return any(j.job_runtime_ms >= limit_ms - LIMIT_SLACK_MS for j in output.jobs)


def _checkpoint(phase: PlannedPhase, sections: Sequence[SectionData]) -> CheckpointRecord | None:
    """A checkpoint phase's processes: each fio job's runtime (its fsync
    included) and bytes, host by host in job order; the checkpoint is what
    every host wrote."""
    planned = phase.checkpoint
    if planned is None:
        return None
    shards = [s for s in sections if s.workload == SHARD_WORKLOAD]
    times = tuple(
        ProcessTime(s.host, i, sum(d.io_bytes for d in job.dirs.values()), job.job_runtime_ms / 1e3)
        for s in shards
        for i, job in enumerate(s.jobs)
    )
    hosts = max(1, len({s.host for s in shards}))
    model = replace(planned.model, checkpoint_bytes=planned.model.checkpoint_bytes * hosts)
    return replace(planned, model=model, processes=times)


def _training(
    phase: PlannedPhase, sections: Sequence[SectionData], shift_ms: Mapping[str, float]
) -> TrainingRecord | None:
    """A training phase's accelerators from its readers' completions, each
    host's moved onto the phase's axis by ``shift_ms``."""
    model = phase.training
    if model is None:
        return None
    readers = {
        s.host: [logs.completions for logs in s.logs]
        for s in sections
        if s.workload == model.workload_label and s.logs
    }
    return TrainingRecord(model, training.traces(model, readers, shift_ms)) if readers else None


def _completions(kinds: Mapping[str, Any]) -> bool:
    """Whether a job logged every completion (see ``JobLogs.of``)."""
    return "clat" in kinds and "iops" not in kinds


def _section(
    phase: PlannedPhase,
    w: PlannedWorkload,
    host: HostLogs,
    *,
    jobs: Sequence[parse.JobStats],
    by_prefix: Mapping[str, Mapping[int, Mapping[str, list[Any]]]],
    start: int,
    paused: Mapping[str, Sequence[tuple[int, int]]],
) -> SectionData:
    """One workload on one host: its jobs, and its logs on the host's axis
    (``start``: its second 0 on the unix clock, see ``_host_starts``)."""
    mine = tuple(j for j in jobs if j.name == w.label and j.host == host.label)
    kinds_by_job = by_prefix.get(w.label + host.log_suffix, {})
    logs = tuple(
        _job_logs(kinds, start, paused.get(host.label, []))
        for _, kinds in sorted(kinds_by_job.items())
    )
    if start and len(logs) == len(mine):  # fio numbers a section's jobs and logs alike
        logs = tuple(_started(log, job) for log, job in zip(logs, mine, strict=True))
    if phase.kind is PhaseKind.VERIFY:
        logs = tuple(_read_logs(log) for log in logs)
    if w.spec.op == "stat":
        mine, logs = _no_bytes(mine, logs)
    return SectionData(w.label, host.label, mine, logs)


def _no_bytes(
    jobs: tuple[parse.JobStats, ...], logs: tuple[JobLogs, ...]
) -> tuple[tuple[parse.JobStats, ...], tuple[JobLogs, ...]]:
    """A stat workload's jobs and logs with their ops and no bytes. fio's
    filestat engine counts each stat() as a read of ``bs`` bytes, in its JSON
    and its bw log (tests/data/filestat), though nothing is read: an AI image
    point past its device's cap read 2 % more than reached the device, every
    second, from its 4 KiB "reads" of stat()."""
    jobs = tuple(
        replace(j, dirs={d: replace(s, io_bytes=0, bytes_per_s=0.0) for d, s in j.dirs.items()})
        for j in jobs
    )

    logs = tuple(
        replace(
            log,
            bw=parse.SampleLog(log.bw.t_ms, 0 * log.bw.value, log.bw.ddir, log.bw.bs),
            completions=parse.SampleLog(
                log.completions.t_ms,
                log.completions.value,  # each stat's latency
                log.completions.ddir,
                0 * log.completions.bs,
            ),
        )
        for log in logs
    )
    return jobs, logs


def _reads_only(job: parse.JobStats) -> parse.JobStats:
    """A verify phase's job as far as it read: a job that replays a writer
    (``verify_only``) counts the writes it regenerated without doing them."""
    return replace(job, dirs={d: s for d, s in job.dirs.items() if d == "read"})


def _read_logs(logs: JobLogs) -> JobLogs:
    def reads(rows: Any) -> Any:
        return rows.of_ddir("read") if len(rows) else rows

    return replace(
        logs,
        iops=reads(logs.iops),
        bw=reads(logs.bw),
        hist=reads(logs.hist),
        completions=reads(logs.completions),
    )


def _times(samples: Any) -> list[int]:
    """The window ends (ms) of a log's samples."""
    if isinstance(samples, parse.SampleLog):
        return samples.t_ms.tolist()
    return [s.t_ms for s in samples]


def _host_starts(
    hosts: Sequence[HostLogs],
    phase: PlannedPhase,
    by_prefix: Mapping[str, Mapping[int, Mapping[str, list[Any]]]],
) -> dict[str, int]:
    """Each host's start (epoch ms): its earliest job's (``_job_start``), job
    by job: jobs start up to a third of a second apart, more than the half
    second that tells one window from the next in ``host_start_ms``.

    Every job's seconds count from it, not each job's from its own start:
    past a 215.6 MB/s cap on the device, the AI image's second 1 held
    1.07-1.10 times the cap with each job's own seconds, 0.99-1.00 times on
    one clock, and the device 0.99-1.03 times in its own first second (12
    runs)."""
    starts: dict[str, list[float]] = defaultdict(list)
    for host in hosts:
        for w in phase.workloads:
            for kinds in by_prefix.get(w.label + host.log_suffix, {}).values():
                if (began := _job_start(kinds)) is not None:
                    starts[host.label].append(began)
    return {host: math.floor(min(t)) for host, t in starts.items()}


# fio closes a job's first one-second window at 1 s and writes it: a job that
# ran this long without one lost its logs. It may not write its last, partial
# window (13 of 20 jobs of runtime=1000ms wrote an empty IOPS log, fio 3.33), so
# a shorter job without one is fio's habit: flagged by the audit, not failed.
SURE_WINDOW_MS = 2000


def _logged_a_second(logs: JobLogs) -> bool:
    """Whether a job's logs hold a window that counts as a second (see
    ``parse.SampleLog.by_second``)."""
    return bool(len(logs.completions)) or any(round(t / 1000) >= 1 for t in _times(logs.iops))


@dataclass(frozen=True)
class Unlogged:
    """Jobs of a section (a workload on a host) that did I/O, by fio's JSON,
    but logged no one-second window."""

    section: SectionData
    jobs: int  # such jobs
    of: int  # the section's jobs that did I/O

    @property
    def ran_ms(self) -> int:
        return max((j.job_runtime_ms for j in self.section.jobs), default=0)


def find_unlogged(sections: Sequence[SectionData]) -> list[Unlogged]:
    """Paced jobs are not judged: their seconds are completed from fio's
    totals (``assemble._completed``), windows or none."""
    out = []
    for section in sections:
        if any(j.paced for j in section.jobs):
            continue
        did = sum(1 for j in section.jobs if any(d.ios > 0 for d in j.dirs.values()))
        logged = sum(1 for logs in section.logs if _logged_a_second(logs))
        if logged < did:
            out.append(Unlogged(section, did - logged, did))
    return out


def lost_logs_message(lost: Sequence[Unlogged], several: bool) -> str:
    where = "; ".join(
        f"workload {u.section.workload!r}{' on ' + u.section.host if several else ''}: "
        f"{u.jobs} of {u.of} jobs in {u.ran_ms / 1000:.1f} s"
        for u in lost
    )
    return (
        f"no per-second figures ({where} of I/O logged no one-second window, where fio "
        "writes one every second): their logs were lost or cut short, or the jobs hung in "
        "their first second; fio's totals are kept, but without the seconds the phase's "
        "median, maximum, minimum and noise cannot be told — check the space in TMPDIR "
        "and repeat the run"
    )


def _covers(scope: Scope, unlogged: Sequence[Unlogged]) -> bool:
    return any(
        scope.workload in (None, u.section.workload) and scope.host in (None, u.section.host)
        for u in unlogged
    )


def _without_series(scope: ScopeResult) -> ScopeResult:
    return replace(scope, series={})


STALL_MS = 2500  # no one-second window for this long: a whole second without a completion
STALL_FALSE_ALARM = 1e-3  # a job's chance of a gap this long without a stall


def stall_ms(completions_per_s: float, seconds: float) -> float:
    """How long a job completing ``completions_per_s`` on average for
    ``seconds`` may log nothing before it counts as stalled: STALL_MS, or
    longer where completions are so sparse that a gap as long comes by
    chance (1 MiB writes on a device capped at 3 MB/s, each taking 3 s). If
    completions came at random (Poisson, more bunched than a device's),
    among its n gaps one exceeds g with probability about n·exp(−λg): the
    least g that keeps that under STALL_FALSE_ALARM."""
    if completions_per_s <= 0:
        return STALL_MS
    gaps = max(completions_per_s * seconds, 1.0)
    chance_s = (math.log(gaps) - math.log(STALL_FALSE_ALARM)) / completions_per_s
    return max(STALL_MS, 1000.0 * chance_s)


def _job_gap_ms(*jobs: parse.JobStats) -> float:
    """The longest a job of ``jobs`` (one, or a workload's alike) may log
    nothing by chance at their completions' pace (``stall_ms``)."""
    seconds = max((j.job_runtime_ms for j in jobs), default=0) / 1000
    ios = sum(d.ios for j in jobs for d in j.dirs.values())
    return stall_ms(ios / len(jobs) / seconds if jobs and seconds else 0.0, seconds)


def find_stalls(
    raw: RawPhase,
    phase: PlannedPhase,
    by_prefix: Mapping[str, Mapping[int, Mapping[str, list[Any]]]],
    jobs: Sequence[parse.JobStats],
    starts: Mapping[str, int],
    paused: Mapping[str, Sequence[tuple[int, int]]] | None = None,
) -> dict[str, tuple[int, int]]:
    """Per host, the first stretch of seconds (1-based, on the host's own
    axis) in which a free-running job logged no one-second window for
    longer than its completions' pace explains (``stall_ms``): a host
    stopped (SIGSTOP, a hang, a lost network) or its storage stopped
    completing I/O. fio averages such a stretch into one late window, so its
    seconds cannot be told apart; a host that started seconds after the
    others (stopped before its first window) counts as stalled from second 1.
    Paced jobs are judged as free-running ones, at the pace of their own
    completions: a slow pace may rightly log nothing for a while, and
    ``stall_ms`` allows it (on main a paced phase stopped for 30 s was
    stored ok, its catch-up seconds counted as measured: issue 48). The
    stretches a host was stopped on purpose (``paused``, ms on each host's
    axis) are not judged."""
    first = min(starts.values(), default=0)
    out: dict[str, tuple[int, int]] = {}
    for host in raw.hosts:
        late_s = (starts.get(host.label, first) - first) / 1000 if starts else 0.0
        found: list[tuple[int, int]] = []
        if late_s * 1000 > STALL_MS:
            found.append((1, round(late_s)))
        start = starts.get(host.label, 0)
        mine = [j for j in jobs if j.host == host.label]
        for w in phase.workloads:
            logs = [k for _, k in sorted(by_prefix.get(w.label + host.log_suffix, {}).items())]
            theirs = [j for j in mine if j.name == w.label]
            # fio numbers a section's jobs and logs alike: each job at its own
            # pace (a host's average held ai-image's 1 op/s checkpoint writer
            # to 20 ops/s and took its 3 s Poisson wait for a stall)
            paces = [_job_gap_ms(j) for j in theirs] if len(theirs) == len(logs) else []
            for i, kinds in enumerate(logs):
                longest = paces[i] if paces else _job_gap_ms(*theirs) if theirs else STALL_MS
                times = sorted({t - start for t in _times(kinds.get("iops", ()))})
                for a, b in pairwise(times):
                    if b - a > longest and not _overlaps(a, b, (paused or {}).get(host.label, ())):
                        found.append((round(a / 1000) + 1, round(b / 1000)))
                        break
        if found:
            out[host.label] = min(found)
    return out


def _before_stalls(
    scope: ScopeResult, stalls: Mapping[str, tuple[int, int]], shifts: Mapping[str, int]
) -> ScopeResult:
    """A scope's per-second series cut before the first stalled second of a
    host it covers (the aggregate covers all): seconds with a host missing
    are not the storage's figures. Totals stay fio's."""
    if scope.scope.host and scope.scope.host not in stalls:
        return scope
    if scope.scope.host:
        cut = stalls[scope.scope.host][0]
    else:
        cut = min(a + shifts.get(h, 0) for h, (a, _b) in stalls.items())
    series = {d: window(s, 1, cut - 1) if len(s) else s for d, s in scope.series.items()}
    return replace(scope, series=series)
