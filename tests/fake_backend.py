"""A backend that runs no fio: it replays the recorded output of
tests/data/randread-2jobs (json+ and per-second logs) for every phase,
renamed to the phase's workloads, optionally scaled, failed, interrupted or
with a host missing. ``RunSession``, the searches and the collection step run
for real on it, so their decisions are tested without fio.

    backend = FakeBackend(steps=lambda phase, repeat: Step(scale=2.0))
    plan = backend.prepare(resolved, {}, allow_destroy=False, repeats=1)
"""

from __future__ import annotations

import copy
import json
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from iorig.fio import parse
from iorig.fio.control import HostControl
from iorig.fio.hosts import HostAddress, HostSpec, parse_host
from iorig.fio.runner import FioExit
from iorig.model import Disclosure, GeneratorCpu
from iorig.run.backend import HostLogs, PhaseJob, Progress, RawPhase
from iorig.run.plan import Plan, PlannedPhase, build_plan
from iorig.scenario.loading import ResolvedScenario
from iorig.targets import Target

FIXTURE = Path(__file__).resolve().parent / "data" / "randread-2jobs"


@dataclass(frozen=True)
class Step:
    """What the fake does in one phase."""

    scale: float = 1.0  # the recorded throughput × this
    generator_cpu: GeneratorCpu | None = None  # fio's CPU as if measured from /proc
    fail: str | None = None  # fio exits 1 having printed this, with no JSON
    interrupt: bool = False  # a Ctrl-C (SIGINT to this process) arrives mid-phase
    drop_host: str | None = None  # this host gives no results
    late_ms: Mapping[str, int] | None = None  # hosts starting this many ms late
    cpu_pct: float | None = None  # each fio job's usr CPU (% of one CPU), else as recorded
    # what a broken or hostile fio would report: each job's JSON entry, and
    # each log sample's value, passed through these before they are returned
    edit_job: Callable[[dict], None] | None = None
    edit_log_value: Callable[[str, float], float] | None = None
    # a synthesised per-second series instead of the recorded 2 s: each
    # second's throughput as a multiple of the recorded mean (× scale); the
    # totals follow the series' mean
    seconds: tuple[float, ...] | None = None
    # fio's job numbers (1, 2) whose log files hold no sample, as fio leaves
    # them for a job that ended within its first second or lost its logs
    empty_logs: tuple[int, ...] = ()
    runtime_ms: int | None = None  # each job's runtime in fio's JSON, else as recorded (3 s)
    hold_s: float = 0.0  # the phase goes on this long after its jobs began (events happen)


def _recorded() -> tuple[dict, dict]:
    doc = parse.split_documents((FIXTURE / "output.json").read_text())[-1]
    logs = parse.read_logs(FIXTURE)
    # as lists of samples and histogram lines, which the fake edits one by one;
    # without the averaged latency logs, which iorig's jobs no longer ask for
    jobs = {
        n: {k: list(v) for k, v in kinds.items() if k != "clat"}
        for n, kinds in logs[("rr", None)].items()
    }
    return doc, jobs


_DOC, _LOGS = _recorded()


def _scaled_job(job: dict, name: str, scale: float) -> dict:
    job = copy.deepcopy(job)
    job["jobname"] = name
    read = job["read"]
    # the figures scaled as a fio that did ``scale`` times the I/Os would print
    # them: whole I/Os of the recorded size, rates their totals over the runtime
    ios = round(read["total_ios"] * scale)
    io_bytes = ios * read["io_bytes"] // read["total_ios"] if read["total_ios"] else 0
    runtime_ms = read["runtime"]
    read |= {
        "total_ios": ios,
        "io_bytes": io_bytes,
        "io_kbytes": io_bytes // 1024,
        "iops": ios * 1000 / runtime_ms,
        "bw_bytes": io_bytes * 1000 // runtime_ms,
        "bw": io_bytes * 1000 // runtime_ms // 1024,
        "iops_mean": read["iops_mean"] * scale,
    }
    # completions counted in the histogram follow the I/O count
    bins = read["clat_ns"]["bins"]
    read["clat_ns"]["bins"] = {k: max(1, round(v * scale)) for k, v in bins.items()}
    return job


def _lasting(job: dict, job_runtime_ms: int, runtime_ms: int | None = None) -> dict:
    """A job entry that ran ``job_runtime_ms`` at the same rate: its counts
    follow, its rates stay their totals over ``runtime_ms`` (fio's I/O time,
    default the job's)."""
    read = job["read"]
    ios = read["total_ios"] * job_runtime_ms // job["job_runtime"]
    io_bytes = ios * read["io_bytes"] // read["total_ios"] if read["total_ios"] else 0
    runtime_ms = runtime_ms or job_runtime_ms
    read |= {
        "total_ios": ios,
        "io_bytes": io_bytes,
        "io_kbytes": io_bytes // 1024,
        "iops": ios * 1000 / runtime_ms,
        "bw_bytes": io_bytes * 1000 // runtime_ms,
        "bw": io_bytes * 1000 // runtime_ms // 1024,
        "runtime": runtime_ms,
    }
    job["job_runtime"] = job_runtime_ms
    return job


def _mean(samples: list[Any]) -> float:
    return sum(s.value for s in samples) / len(samples)


def _synthetic_logs(
    scale: float, seconds: tuple[float, ...], shift_ms: int
) -> dict[int, dict[str, list[Any]]]:
    """Logs of len(seconds) whole seconds: each job's IOPS and bandwidth at
    its recorded mean × scale × the second's multiple, its first latency
    samples repeated."""
    out: dict[int, dict[str, list[Any]]] = {}
    for number, kinds in _LOGS.items():
        out[number] = {}
        for kind, samples in kinds.items():
            first = samples[0]
            rows = []
            for k, m in enumerate(seconds, start=1):
                t_ms = 1000 * k + shift_ms
                if kind in ("iops", "bw"):
                    rows.append(replace(first, t_ms=t_ms, value=_mean(samples) * scale * m))
                else:
                    rows.append(replace(first, t_ms=t_ms))
            out[number][kind] = rows
    return out


def _scaled_logs(
    scale: float, shift_ms: int, empty: tuple[int, ...] = (), until_ms: int | None = None
) -> dict[int, dict[str, list[Any]]]:
    """The recorded logs × ``scale``, moved by ``shift_ms``; the jobs in
    ``empty`` logged nothing; with ``until_ms`` only the windows a job that
    ran that long wrote."""
    out: dict[int, dict[str, list[Any]]] = {}
    for number, kinds in _LOGS.items():
        if number in empty:
            out[number] = {kind: [] for kind in kinds}
            continue
        out[number] = {
            kind: [
                replace(s, t_ms=s.t_ms + shift_ms)
                if kind == "clat_hist"
                else replace(s, t_ms=s.t_ms + shift_ms, value=s.value * scale)
                for s in samples
                if until_ms is None or s.t_ms <= until_ms
            ]
            for kind, samples in kinds.items()
        }
    return out


def _edited(
    logs: dict[int, dict[str, list[Any]]], edit: Callable[[str, float], float] | None
) -> dict[int, dict[str, list[Any]]]:
    if edit is None:
        return logs
    return {
        number: {
            kind: [
                replace(s, value=edit(kind, s.value)) if hasattr(s, "value") else s for s in samples
            ]
            for kind, samples in kinds.items()
        }
        for number, kinds in logs.items()
    }


class FakeBackend:
    def __init__(
        self,
        hosts: tuple[str, ...] = ("local",),
        steps: Callable[[PlannedPhase, int], Step] = lambda phase, repeat: Step(),
        *,
        usable_cpus: float | None = None,
        null_iops: float = 1e6,
        engine: str = "libaio",
        fio_version: str = "fio-3.33",
    ) -> None:
        self._hosts = hosts
        self.engine = engine  # what "auto" resolves to
        self.fio_version = fio_version
        self.steps = steps
        self.usable_cpus = usable_cpus  # disclosed as the CPUs fio may use
        self.null_iops = null_iops  # what run_jobs' null engine "generates"
        self.job_texts: list[dict[str, str]] = []  # every run_jobs call
        self.ran: list[tuple[str, int]] = []  # (phase, repeat) in order
        self.cleaned: list[bool] = []  # keep_files of each clean_up
        self.named: list[str] = []  # the run ids it was told (name_run)
        self._stop = threading.Event()
        self._hurry = threading.Event()  # a second Ctrl-C: kill fio at once

    @property
    def hosts(self) -> tuple[str, ...]:
        return self._hosts

    @property
    def remote(self) -> bool:
        return self._hosts != ("local",)

    def prepare(
        self,
        resolved: ResolvedScenario,
        target_paths: Mapping[str, Mapping[str, str]],
        *,
        allow_destroy: bool,
        repeats: int,
    ) -> Plan:
        targets = {
            role: Target(
                role,
                f"/fake/{role}",
                "file",
                Path(f"/fake/{role}.dat"),
                spec.size,
                None,
                False,
                False,
            )
            for role, spec in resolved.scenario.targets.items()
        }
        engines = _Engines(self.engine)
        plan = build_plan(resolved, targets, engines, "fio", self.fio_version, repeats)
        if not self.remote:
            sections: dict = {"fio": {"version": self.fio_version}}
            if self.usable_cpus is not None:
                sections["cpu"] = {"usable_cpus": self.usable_cpus}
            return replace(plan, disclosure=Disclosure(sections))
        addresses = tuple(parse_host(h) for h in self._hosts)
        return replace(plan, hosts=addresses, host_targets={h: targets for h in self._hosts})

    def run_phase(self, job: PhaseJob) -> Iterator[Progress | RawPhase]:
        step = self.steps(job.phase, job.repeat)
        self.ran.append((job.phase.name, job.repeat))
        launched = time.time()
        # fake servers tell when the last host began, as ServerBackend's JobsWatch does
        late_s = max((step.late_ms or {}).values(), default=0) / 1000 if self.remote else 0.0
        yield Progress(0.5, 0.5, None, launched + late_s)
        if step.hold_s:
            self._stop.wait(late_s + step.hold_s)
        if step.interrupt:
            os.kill(os.getpid(), signal.SIGINT)
            self._stop.wait(5)
        yield replace(self._raw(job.phase, step, launched), generator_cpu=step.generator_cpu)

    def _raw(self, phase: PlannedPhase, step: Step, launched: float | None = None) -> RawPhase:
        launched = time.time() if launched is None else launched
        stopped = "cancel" if self._stop.is_set() else None
        hosts = tuple(
            HostLogs(h, f".h{i}" if self.remote else "") for i, h in enumerate(self._hosts)
        )
        if step.fail:
            exit_ = FioExit(1, "", step.fail, stopped, 1.0)
            return self._wrap(exit_, {}, hosts, launched)
        doc = copy.deepcopy(_DOC)
        doc["fio version"] = self.fio_version
        entries, logs = [], {}
        level = step.scale * (sum(step.seconds) / len(step.seconds) if step.seconds else 1.0)
        for host in hosts:
            if host.label == step.drop_host:
                continue
            for w in phase.workloads:
                for job in _DOC["jobs"]:
                    entry = _scaled_job(job, w.label, level)
                    if step.seconds:
                        entry = _lasting(
                            entry, 1000 * len(step.seconds), 1000 * len(step.seconds) + 1
                        )
                    if step.runtime_ms is not None:
                        entry = _lasting(entry, step.runtime_ms)
                    if step.cpu_pct is not None:
                        entry |= {"usr_cpu": step.cpu_pct, "sys_cpu": 0.0}
                    if step.edit_job is not None:
                        step.edit_job(entry)
                    if self.remote:
                        address, port = host.label.rsplit(":", 1)
                        entry |= {"hostname": address, "port": int(port)}
                    entries.append(entry)
                late = (step.late_ms or {}).get(host.label, 0)
                # logs on the unix clock (log_unix_epoch, as both backends run fio)
                shift = round(launched * 1000) + late
                suffix = host.label.rsplit(":", 1)[0] if self.remote else None
                logs[(w.label + host.log_suffix, suffix)] = _edited(
                    _synthetic_logs(step.scale, step.seconds, shift)
                    if step.seconds
                    else _scaled_logs(step.scale, shift, step.empty_logs, step.runtime_ms),
                    step.edit_log_value,
                )
        doc.pop("jobs")
        doc["client_stats" if self.remote else "jobs"] = entries
        exit_ = FioExit(0, json.dumps(doc), "", stopped, 1.0)
        took_s = max((e["job_runtime"] for e in entries), default=0) / 1000
        return self._wrap(exit_, logs, hosts, launched, took_s)

    def _wrap(
        self,
        exit_: FioExit,
        logs: dict,
        hosts: tuple[HostLogs, ...],
        launched: float,
        took_s: float = 0.0,
    ) -> RawPhase:
        # the real clock (events fire on it), and never shorter than the jobs ran
        return RawPhase(
            started_at=launched,
            ended_at=max(time.time(), launched + took_s),
            job_text="[fake]\n",
            command=("fio", "fake"),
            exit=exit_,
            logs=logs,
            hosts=hosts,
            wallclock_logs=True,
            exit_code_counts=not self.remote,
            # this machine: fio's live status tells when its jobs began
            io_started_at=None if self.remote else launched,
        )

    def run_jobs(
        self, texts: Mapping[str, str], timeout_s: float, *, read_only: bool = False
    ) -> FioExit:
        """Every job "generates" ``null_iops`` in all (the null-engine ceiling)."""
        self.job_texts.append(dict(texts))
        doc = copy.deepcopy(_DOC)
        job = doc["jobs"][0]
        job = _scaled_job(job, "generator", self.null_iops / job["read"]["iops"])
        doc["jobs"] = [job]
        return FioExit(0, json.dumps(doc), "", None, 1.0)

    def stop(self, *, at_once: bool = False) -> None:
        self._stop.set()
        if at_once:
            self._hurry.set()

    def begin_run(self, run_id: str, *, keep_files: bool) -> None:
        self.named.append(run_id)

    def clean_up(self, plan: Plan, *, keep_files: bool) -> list[str]:
        self.cleaned.append(keep_files)
        return []

    def control(self, host: HostSpec) -> HostControl:
        assert isinstance(host, HostAddress), "the fake backend's hosts are agents"
        return HostControl(host)


class _Engines(dict):
    def __init__(self, engine: str) -> None:
        super().__init__()
        self.engine = engine

    def __missing__(self, key: object) -> str:
        return self.engine
