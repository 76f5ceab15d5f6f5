"""Many hosts, one answer: phases on several fio servers driven by one local
fio client (fio's own client/server mode).

What fio 3.33 does in client mode, and what iorig does about it (measured,
see tests/data/clientserver-3hosts/README.md):

* every host gets its own job file (its targets, its own log prefix: fio
  names client-mode logs by address only, so two servers on one address
  would overwrite each other's) with ``log_unix_epoch=1``: log timestamps
  are relative to each host's own start otherwise, and nothing else in the
  output says when a host started;
* ``client_stats`` names a host by the address given and its port; its
  "All clients" entry has no histogram and is never used — the aggregate is
  built here from every host's bins;
* the exit code says nothing (0 with a refused host, 1 after a disconnect):
  a host without results in the output is a failed host, the others' data
  are kept and the phase fails naming it;
* client mode streams no status, so progress shows time only and the
  rates come at the end of the phase;
* ``--eta=always`` lets fio drop a server that stops answering; iorig's own
  deadline stops the client if it still hangs.
"""

from __future__ import annotations

import contextlib
import math
import subprocess
import tempfile
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import asdict, replace
from pathlib import Path

from iorig.analyze.steady import SteadyState, evaluate
from iorig.assemble import JobLogs, SectionData, build_scopes
from iorig.errors import UserError
from iorig.fio import parse
from iorig.fio.jobfile import Section, render
from iorig.fio.remote import (
    HostAddress,
    ServerInfo,
    check_versions,
    host_start_ms,
    local_protocol_version,
    server_versions,
)
from iorig.fio.runner import FioExit, FioProcess
from iorig.jobtext import job_text
from iorig.plan import Plan, PlannedPhase
from iorig.results import ALL, PhaseResult, ScopeResult
from iorig.scenario import SteadyRule
from iorig.targets import Target

PROBE_TIMEOUT_S = 5.0


# ------------------------------------------------------------ before a run


def check_servers(fio: str, version: str, hosts: list[HostAddress]) -> dict[str, dict]:
    """Every host answers and runs exactly this fio; refuse before any I/O.
    Returns what each server told about itself, for the disclosure."""
    try:
        protocol = local_protocol_version(fio, timeout_s=PROBE_TIMEOUT_S)
    except UserError:
        protocol = None
    results = server_versions(fio, hosts, PROBE_TIMEOUT_S, local_protocol=protocol)
    check_versions(version, results, local_protocol=protocol)
    return {
        host.label: asdict(info) for host, info in results.items() if isinstance(info, ServerInfo)
    }


def probe_engine(
    fio: str,
    targets: dict[HostAddress, Target],
    *,
    direct: bool,
    candidates: tuple[str, ...],
    workdir: Path,
) -> str:
    """The first engine that can do I/O at every host's target (one probe job
    per engine, all hosts at once). A file target is probed with a small
    file beside it, removed again; a device is only read."""
    failures: dict[str, list[str]] = defaultdict(list)
    for engine in candidates:
        clients = []
        for i, (host, target) in enumerate(targets.items()):
            device = str(target.path).startswith("/dev/")
            options: dict = {
                "ioengine": engine,
                "filename": str(target.path) if device else f"{target.path}.iorig-probe",
                "bs": 4096,
                "size": 1 << 20,
                "io_size": 64 << 10,
                "direct": direct,
            }
            options |= {"rw": "read", "readonly": True} if device else {"rw": "rw", "unlink": True}
            job = workdir / f"probe-{engine}-{i}.fio"
            job.write_text(render({}, [Section("probe", options)]))
            clients.append((f"--client={host.fio_client_arg()}", job))
        done = _run_client(fio, workdir, tuple(clients), timeout_s=60)
        ok = _hosts_that_did_io(done)
        if all(h.label in ok for h in targets):
            return engine
        for host in targets:
            if host.label not in ok:
                failures[host.label].append(engine)
    listed = "; ".join(f"{h}: {', '.join(e)} failed" for h, e in failures.items())
    raise UserError(
        f"no fio engine could do I/O at the target on every host ({listed})",
        hint="check that each server's working directory (or the target path) is writable "
        "and, for direct I/O, on a filesystem that supports it",
    )


def _run_client(
    fio: str, workdir: Path, clients: tuple[tuple[str, Path], ...], timeout_s: float
) -> FioExit:
    proc = FioProcess(fio, None, workdir, clients=clients)
    return proc.run(cancel=threading.Event(), timeout_s=timeout_s)


def _hosts_that_did_io(done: FioExit) -> set[str]:
    try:
        output = parse.parse_final(done.output)
    except parse.FioOutputError:
        return set()
    return {j.host for j in output.jobs if not j.error and any(d.ios for d in j.dirs.values())}


# ------------------------------------------------------------ one phase


def host_jobs(plan: Plan, run_id: str, phase: PlannedPhase) -> list[tuple[HostAddress, str]]:
    """Each host's job text: its own targets and log prefix ``<workload>.h<i>``."""
    return [
        (host, job_text(plan, run_id, phase, targets=plan.host_targets[host.label],
                        log_suffix=f".h{i}", host=host.label))
        for i, host in enumerate(plan.hosts)
    ]  # fmt: skip


def combined_text(texts: list[tuple[HostAddress, str]]) -> str:
    """All hosts' job files in one artifact, each under a comment naming it."""
    return "\n".join(f"; ===== host {host.label}\n{text}" for host, text in texts)


def run_phase(
    plan: Plan,
    run_id: str,
    phase: PlannedPhase,
    repeat: int,
    workdir: Path,
    cancel: threading.Event,
    on_progress: Callable[[float, float | None], None],
) -> tuple[PhaseResult, FioExit]:
    """Run one phase on every host; the result has per-host and aggregate
    scopes, and a host that gave no results fails the phase by name."""
    texts = host_jobs(plan, run_id, phase)
    clients = []
    for i, (host, text) in enumerate(texts):
        job = workdir / f"job-h{i}.fio"
        job.write_text(text)
        clients.append((f"--client={host.fio_client_arg()}", job))
    duration = phase.duration_s
    timeout = phase.timeout_s(slack_s=90)  # fio drops a silent server after ~42 s
    proc = FioProcess(plan.fio, None, workdir, clients=tuple(clients))

    def tick(elapsed: float) -> None:
        on_progress(elapsed, min(elapsed / duration, 1.0) if duration else None)

    started = time.time()
    done = proc.run(cancel=cancel, timeout_s=timeout, on_tick=tick)
    ended = time.time()
    scopes, version, problem = collect(done, workdir, phase, plan.hosts)
    result = phase.result(
        repeat,
        status="ok",
        started_at=started,
        ended_at=ended,
        scopes=scopes,
        job_text=combined_text(texts),
        command=proc.command,
        fio_version=version or plan.fio_version,
        fio_output=done.output,
        fio_stderr=done.stderr,
        error=problem,
    )
    if phase.steady is not None and result.aggregate is not None:
        result = replace(result, steady=steady_after(result, phase.steady))
    return result, done


def collect(
    done: FioExit, workdir: Path, phase: PlannedPhase, hosts: tuple[HostAddress, ...]
) -> tuple[tuple[ScopeResult, ...], str, str | None]:
    """Per-host and aggregate scopes, fio's version, and what went wrong."""
    try:
        output = parse.parse_final(done.output)
    except parse.FioOutputError as exc:
        return (), "", f"no results from any host ({exc})"
    present = {j.host for j in output.jobs}
    missing = [h for h in hosts if h.label not in present]
    logs: dict[tuple[str, str], dict[int, dict[str, list]]] = {}
    for (log_prefix, _), jobs in parse.read_logs(workdir).items():
        prefix, _, index = log_prefix.rpartition(".h")  # "<workload>.h<host index>"
        if index.isdigit() and int(index) < len(hosts):
            logs[(prefix, hosts[int(index)].label)] = jobs
    starts = _host_starts(logs)
    first = min(starts.values(), default=0)
    sections = []
    for host in hosts:
        if host in missing:
            continue
        for w in phase.workloads:
            jobs = tuple(j for j in output.jobs if j.name == w.label and j.host == host.label)
            kinds_by_job = logs.get((w.label, host.label), {})
            start = starts.get(host.label, 0)
            job_logs = tuple(_relative(kinds, start) for _, kinds in sorted(kinds_by_job.items()))
            sections.append(SectionData(w.label, host.label, jobs, job_logs))
    shifts = {h: round((s - first) / 1000) for h, s in starts.items()}
    scopes = list(build_scopes(sections, shifts)) if sections else []
    problems = []
    if missing:
        why = _tail(done.stderr) or "it stopped answering or was stopped mid-phase"
        for host in missing:
            scopes.append(
                ScopeResult("", host.label, 0, {}, {}, 0.0, 0.0, 0.0, 0, "failed",
                            f"no results from {host.label}: {why}")
            )  # fmt: skip
        problems.append(
            f"{len(missing)} of {len(hosts)} hosts gave no results "
            f"({', '.join(h.label for h in missing)}): {why}; the other hosts' figures are kept"
        )
    failed = [j for j in output.jobs if j.error]
    if failed:
        j = failed[0]
        problems.append(f"fio job {j.name} on {j.host} ended with error {j.error}")
    return tuple(scopes), output.version, "; ".join(problems) or None


def _host_starts(logs: dict) -> dict[str, int]:
    """Each host's start (epoch ms) from its averaged logs' window times."""
    times: dict[str, list[int]] = defaultdict(list)
    for (_, host), jobs in logs.items():
        for kinds in jobs.values():
            times[host] += [s.t_ms for s in kinds.get("iops", [])]
    return {host: host_start_ms(t) for host, t in times.items() if t}


def _relative(kinds: dict[str, list], start_ms: int) -> JobLogs:
    """A job's logs with epoch timestamps made relative to its host's start."""

    def shift(samples: list) -> tuple:
        return tuple(replace(s, t_ms=s.t_ms - start_ms) for s in samples)

    return JobLogs(
        iops=shift(kinds.get("iops", [])),
        bw=shift(kinds.get("bw", [])),
        clat=shift(kinds.get("clat", [])),
        hist=shift(kinds.get("clat_hist", [])),
    )


def _tail(text: str, lines: int = 2) -> str:
    kept = [line.strip() for line in text.strip().splitlines() if line.strip()][-lines:]
    return " / ".join(kept)


def steady_after(result: PhaseResult, rule: SteadyRule) -> SteadyState:
    """Steady state judged after the fact from the aggregate per-second
    series: client mode streams no status, so the warm-up cannot stop early."""
    scope = result.aggregate
    series = scope.series.get(ALL) if scope else None
    values = [] if series is None else getattr(series, rule.metric).tolist()
    size = max(1, round(rule.round))
    rounds = [sum(values[i : i + size]) / size for i in range(0, len(values) - size + 1, size)]
    # the first round at which the window held, as if the warm-up had stopped there
    for end in range(rule.window, len(rounds) + 1):
        state = evaluate(rounds[:end], rule)
        if state.converged:
            return replace(state, rounds=tuple(rounds))
    return evaluate(rounds, rule)


# ------------------------------------------------------------ after a run


def remove_files(plan: Plan) -> None:
    """Delete the data files iorig placed in the servers' working directories
    (best effort, bounded: fio's ``unlink`` on a tiny read of each)."""
    with scratch_dir() as tmp:
        _remove_files(plan, Path(tmp))


def _remove_files(plan: Plan, workdir: Path) -> None:
    clients = []
    for i, host in enumerate(plan.hosts):
        sections = [
            Section(f"remove-{role}", {"ioengine": "psync", "rw": "read", "bs": 4096,
                                       "size": 4096, "filename": str(t.path), "unlink": True})
            for role, t in plan.host_targets[host.label].items()
            if t.remove_after
        ]  # fmt: skip
        if sections:
            job = workdir / f"remove-h{i}.fio"
            job.write_text(render({}, sections))
            clients.append((f"--client={host.fio_client_arg()}", job))
    if clients:  # best effort: the run's figures are stored already
        with contextlib.suppress(OSError, subprocess.SubprocessError):
            _run_client(plan.fio, workdir, tuple(clients), timeout_s=60)


def host_spread(values: dict[str, float]) -> tuple[str, str, float] | None:
    """(slowest host, fastest host, coefficient of variation) of per-host figures."""
    finite = {h: v for h, v in values.items() if not math.isnan(v)}
    if len(finite) < 2:
        return None
    mean = sum(finite.values()) / len(finite)
    var = sum((v - mean) ** 2 for v in finite.values()) / (len(finite) - 1)
    return (
        min(finite, key=finite.get),
        max(finite, key=finite.get),
        (math.sqrt(var) / mean if mean else math.nan),
    )  # type: ignore[arg-type]


def scratch_dir() -> tempfile.TemporaryDirectory:
    return tempfile.TemporaryDirectory(prefix="iorig-hosts-")
