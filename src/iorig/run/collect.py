"""The one collection step: what any backend brought back from a phase
(fio's JSON output and logs) into per-workload, per-host and aggregate
results, with what went wrong.

Hosts are told apart by how fio names their jobs and by the log prefix each
host's job file used (``RawPhase.hosts``). Where log times are wall-clock
(fio servers, ``log_unix_epoch=1``), each host's start is read from its logs
and the hosts' per-second series are put on one time axis; hosts' clocks
must agree (NTP) for that to be right to the second.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from iorig.fio import parse
from iorig.fio.assemble import JobLogs, SectionData, build_scopes
from iorig.model import Scope, ScopeResult
from iorig.plan import PlannedPhase
from iorig.run.backend import HostLogs, RawPhase


@dataclass(frozen=True)
class Collected:
    scopes: tuple[ScopeResult, ...]
    fio_version: str
    problem: str | None  # why the phase failed, when it did


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


def _job_logs(kinds: Mapping[str, list[Any]], start_ms: int) -> JobLogs:
    """A job's logs, times made relative to its host's start."""
    if start_ms:
        kinds = {k: [replace(s, t_ms=s.t_ms - start_ms) for s in v] for k, v in kinds.items()}
    return JobLogs.of(kinds)


def collect(raw: RawPhase, phase: PlannedPhase) -> Collected:
    """Scopes (aggregate first, then hosts, then workloads), fio's version,
    and the problem if any: no output, a host without results (the others
    are kept, the phase fails naming it), or a fio job that ended with an
    error."""
    several = len(raw.hosts) > 1
    default_name = raw.hosts[0].label if len(raw.hosts) == 1 else "local"
    try:
        output = parse.parse_final(raw.exit.output, default_name)
    except parse.FioOutputError as exc:
        where = "no results from any host: " if several else ""
        return Collected(
            (), "", f"{where}{exc}: {tail(raw.exit.stderr) or '(fio printed no error message)'}"
        )
    by_prefix: dict[str, Mapping[int, Mapping[str, list[Any]]]] = {}
    for (prefix, _suffix), jobs in raw.logs.items():
        by_prefix[prefix] = jobs
    present = {j.host for j in output.jobs}
    missing = [h for h in raw.hosts if h.label not in present]
    starts = _host_starts(raw.hosts, phase, by_prefix) if raw.wallclock_logs else {}
    first = min(starts.values(), default=0)
    sections = []
    for host in raw.hosts:
        if host in missing:
            continue
        start = starts.get(host.label, 0)
        for w in phase.workloads:
            jobs = tuple(j for j in output.jobs if j.name == w.label and j.host == host.label)
            kinds_by_job = by_prefix.get(w.label + host.log_suffix, {})
            job_logs = tuple(_job_logs(kinds, start) for _, kinds in sorted(kinds_by_job.items()))
            sections.append(SectionData(w.label, host.label, jobs, job_logs))
    shifts = {h: round((s - first) / 1000) for h, s in starts.items()}
    scopes = list(build_scopes(sections, shifts)) if sections else []
    problems = []
    if missing:
        why = tail(raw.exit.stderr, 2) or "it stopped answering or was stopped mid-phase"
        scopes += [ScopeResult.failed(Scope(host=h.label), f"no results from {h.label}: {why}")
                   for h in missing]  # fmt: skip
        kept = "; the other hosts' figures are kept" if len(missing) < len(raw.hosts) else ""
        problems.append(
            f"{len(missing)} of {len(raw.hosts)} hosts gave no results "
            f"({', '.join(h.label for h in missing)}): {why}{kept}"
        )
    failed = [j for j in output.jobs if j.error]
    if failed:
        j = failed[0]
        where = f" on {j.host}" if several else ""
        problems.append(
            f"fio job {j.name}{where} ended with error {j.error}: "
            f"{tail(raw.exit.stderr) or '(fio printed no error message)'}"
        )
    return Collected(tuple(scopes), output.version, "; ".join(problems) or None)


def _host_starts(
    hosts: Sequence[HostLogs],
    phase: PlannedPhase,
    by_prefix: Mapping[str, Mapping[int, Mapping[str, list[Any]]]],
) -> dict[str, int]:
    """Each host's start (epoch ms): from its averaged logs' window times, or,
    where it only logged every completion, its first completion."""
    windows: dict[str, list[int]] = defaultdict(list)
    completions: dict[str, list[int]] = defaultdict(list)
    for host in hosts:
        for w in phase.workloads:
            for kinds in by_prefix.get(w.label + host.log_suffix, {}).values():
                windows[host.label] += [s.t_ms for s in kinds.get("iops", [])]
                if "iops" not in kinds:
                    completions[host.label] += [s.t_ms for s in kinds.get("clat", [])]
    starts = {host: host_start_ms(t) for host, t in windows.items() if t}
    starts |= {h: min(t) for h, t in completions.items() if t and h not in starts}
    return starts
