"""From a resolved scenario and the user's targets to concrete phases.

``prepare`` does the checks that touch the machine (fio present and recent
enough, targets safe and sized, engines probed) before anything is written
to the database; ``build_plan`` is the pure part.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from iorig.errors import UserError
from iorig.fio import runner
from iorig.fio.remote import HostAddress
from iorig.results import PhaseResult
from iorig.scenario import ResolvedScenario, SteadyRule, Workload
from iorig.sysinfo import collect_fio, disclose, interface_limit
from iorig.targets import Target, release, remote_target, resolve_target
from iorig.units import format_bytes

ENGINE_ORDER = ("io_uring", "libaio", "psync")


@dataclass(frozen=True)
class PlannedWorkload:
    label: str  # workload name within the phase; also the fio section name
    spec: Workload
    target: Target
    size_bytes: int  # working set
    offset_bytes: int
    engine: str
    loops: int = 1  # times fio goes over the working set (precondition: 2)


@dataclass(frozen=True)
class PlannedPhase:
    seq: int
    name: str
    kind: str
    duration_s: float | None
    headline: str
    description: str
    workloads: tuple[PlannedWorkload, ...]
    steady: SteadyRule | None = None
    point: dict[str, Any] = field(default_factory=dict)  # sweep / search coordinates
    ramp_s: float | None = None  # fio ramp_time before each measurement

    @property
    def bytes_to_write(self) -> int:
        """For size-based phases: what fio writes before it finishes."""
        return sum(w.size_bytes * w.spec.jobs * w.loops for w in self.workloads)

    def result(self, repeat: int, **measured: Any) -> PhaseResult:
        """A result of this phase: what it was planned as, plus ``measured``
        (status, times, scopes, fio's output …)."""
        engines = ",".join(sorted({w.engine for w in self.workloads}))
        return PhaseResult(
            **{"engine": engines, "scopes": ()} | measured,
            seq=self.seq,
            name=self.name,
            kind=self.kind,
            planned_s=self.duration_s,
            headline=self.headline,
            repeat=repeat,
            point=self.point,
        )

    def timeout_s(self, slack_s: float) -> float | None:
        """How long fio may take before it is taken for hung (a dead NFS
        server, a silent fio server): half again its ramp and runtime plus
        ``slack_s`` for start-up; None for size-based phases (no bound)."""
        if self.duration_s is None:
            return None
        return (self.duration_s + (self.ramp_s or 0.0)) * 1.5 + slack_s


@dataclass(frozen=True)
class Plan:
    resolved: ResolvedScenario
    targets: dict[str, Target]
    phases: tuple[PlannedPhase, ...]
    fio: str
    fio_version: str
    notes: tuple[str, ...] = ()
    repeats: int = 1
    disclosure: dict = field(default_factory=dict)
    # fio servers the phases run on (empty: this machine), and each one's
    # targets by role; ``targets`` then holds the first host's, for sizes
    hosts: tuple[HostAddress, ...] = ()
    host_targets: dict[str, dict[str, Target]] = field(default_factory=dict)

    @property
    def host_labels(self) -> list[str]:
        return [h.label for h in self.hosts] or ["local"]

    @property
    def limit(self) -> dict | None:
        """Smallest known interface bandwidth on the path, or None (unknown)."""
        return interface_limit(self.disclosure)

    def schedule(self) -> list[tuple[PlannedPhase, int]]:
        """(phase, repeat) in execution order. With repeats, the stretch from the
        first to the last measured phase runs that many times, each with fresh
        fio processes; what comes before (prefill, warm-up) runs once."""
        measured = [i for i, p in enumerate(self.phases) if p.kind == "measure"]
        if self.repeats <= 1 or not measured:
            return [(p, 0) for p in self.phases]
        first, last = measured[0], measured[-1]
        block = self.phases[first : last + 1]
        return (
            [(p, 0) for p in self.phases[:first]]
            + [(p, r) for r in range(self.repeats) for p in block]
            + [(p, 0) for p in self.phases[last + 1 :]]
        )

    @property
    def engines(self) -> list[str]:
        return sorted({w.engine for p in self.phases for w in p.workloads})


def requested(phases: Iterable[PlannedPhase]) -> dict[str, dict[str, tuple[int, int, bool]]]:
    """Phase -> workload -> (jobs, iodepth, rate-limited), for the audit."""
    return {
        p.name: {
            # rate-limited or flow-controlled jobs keep fewer I/Os in flight by design
            w.label: (
                w.spec.jobs,
                w.spec.iodepth,
                any(x is not None for x in (w.spec.rate_iops, w.spec.rate, w.spec.flow)),
            )
            for w in p.workloads
        }
        for p in phases
    }


def build_plan(
    resolved: ResolvedScenario,
    targets: dict[str, Target],
    engines: dict[tuple[str, bool], str],
    fio: str,
    fio_version: str,
    repeats: int = 1,
) -> Plan:
    """Concrete phases: working sets sized, engines chosen, empty pauses dropped."""
    phases = []
    notes = []
    for seq, phase in enumerate(resolved.scenario.phases):
        if not phase.enabled:
            notes.append(f"phase {phase.name!r} is disabled by the scenario's parameters")
            continue
        if phase.kind == "idle" and not phase.duration:
            notes.append(f"pause {phase.name!r} has zero length and is skipped")
            continue
        workloads = phase.workloads
        loops = 1
        if phase.kind == "precondition":
            # SNIA PTS workload-independent preconditioning: the whole target
            # written twice with 128 KiB sequential writes.
            loops = 2
            workloads = workloads or [
                Workload(name=f"precondition-{role}" if len(targets) > 1 else None, target=role,
                         rw="write", bs=128 * 1024, iodepth=16)
                for role in targets
            ]  # fmt: skip
        planned = []
        for w in workloads:
            if not w.enabled:
                continue
            target = targets[w.target]
            if w.fileset is not None:
                # each job's files: nrfiles × filesize, named by the set (see jobfile)
                engine = (
                    "filestat"
                    if w.op == "stat"
                    else (w.engine if w.engine != "auto" else engines[(w.target, w.direct)])
                )
                size = w.files * (w.file_size or 0)
                planned.append(PlannedWorkload(w.label, w, target, size, 0, engine, loops))
                continue
            size = w.size if w.size is not None else target.size_bytes - w.offset
            # with offset_increment every job has its own slice; the last must fit too
            end = w.offset + (w.jobs - 1) * (w.offset_increment or 0) + size
            if size <= 0 or end > target.size_bytes:
                raise UserError(
                    f"phase {phase.name!r}, workload {w.label!r}: offset {format_bytes(w.offset)} "
                    f"+ working set {format_bytes(size)}"
                    + (f" × {w.jobs} jobs" if w.offset_increment else "")
                    + f" does not fit in target {w.target!r} ({format_bytes(target.size_bytes)})",
                    hint="raise --size or lower the workload's size/offset",
                )
            if size < w.bs:
                raise UserError(
                    f"phase {phase.name!r}: the working set ({format_bytes(size)}) is smaller "
                    f"than one block ({format_bytes(w.bs)})",
                    hint="raise --size",
                )
            engine = w.engine if w.engine != "auto" else engines[(w.target, w.direct)]
            planned.append(PlannedWorkload(w.label, w, target, size, w.offset, engine, loops))
        phases.append(
            PlannedPhase(
                seq=seq,
                name=phase.name,
                kind=phase.kind,
                duration_s=phase.duration,
                headline=phase.headline,
                description=phase.description,
                workloads=tuple(planned),
                steady=phase.steady_rule,
                point=resolved.phase_points.get(phase.name, {}),
                ramp_s=phase.ramp,
            )
        )
    if not any(p.kind == "measure" for p in phases):
        notes.append("the scenario has no measure phase: nothing will be scored")
    if repeats < 1:
        raise UserError(f"--repeat must be at least 1, got {repeats}")
    return Plan(
        resolved, targets, tuple(phases), fio, fio_version, notes=tuple(notes), repeats=repeats
    )


def prepare(
    resolved: ResolvedScenario,
    target_paths: dict[str, str],
    *,
    allow_destroy: bool,
    fio_path: str | None = None,
    repeats: int = 1,
    hosts: list[HostAddress] | None = None,
    host_paths: dict[HostAddress, dict[str, str]] | None = None,
) -> Plan:
    """Check the machine and the targets, then build the plan. Raises UserError.

    With ``hosts`` the phases run on those fio servers: every one must answer
    with this machine's fio version, and gets its targets from ``host_paths``
    (default: a file in its working directory)."""
    fio = runner.find_fio(fio_path)
    version = runner.fio_version(fio)
    if hosts:
        return _prepare_hosts(
            resolved, hosts, host_paths or {}, fio, version, allow_destroy, repeats
        )
    scenario = resolved.scenario
    missing = [role for role in scenario.targets if role not in target_paths]
    if missing:
        raise UserError(
            f"scenario {scenario.name!r} needs a target for: {', '.join(missing)}",
            hint="pass --target PATH (a file, a directory or a block device), "
            "e.g. --target ./iorig-scratch/",
        )
    size_explicit = resolved.param_origins.get("size", "default") != "default"
    targets: dict[str, Target] = {}
    try:
        for role, spec in scenario.targets.items():
            targets[role] = resolve_target(
                target_paths[role],
                role=role,
                size=spec.size,
                size_explicit=size_explicit,
                allow_destroy=allow_destroy,
                fileset=spec.fileset,
            )
        if any(w.op == "stat" for p in scenario.phases for w in p.workloads if w.enabled):
            runner.require_engine(
                fio,
                "filestat",
                "stat and access operations (fio ≥ 3.19 has it)",
                hint="install a newer fio, or run without stat operations (the built-in "
                "ai-image takes --set stat_ops=false)",
            )
        engines = _probe_engines(resolved, targets, fio)
        plan = build_plan(resolved, targets, engines, fio, version, repeats)
        disclosure = disclose(
            [(t.path, t.kind) for t in targets.values()], collect_fio(fio, version, plan.engines)
        )
        return replace(plan, disclosure=disclosure)
    except BaseException:
        for target in targets.values():  # nothing ran: leave no files behind
            release(target, keep=False)
        raise


def _probe_engines(
    resolved: ResolvedScenario, targets: dict[str, Target], fio: str
) -> dict[tuple[str, bool], str]:
    engines: dict[tuple[str, bool], str] = {}
    for phase in resolved.scenario.phases:
        # a precondition phase without workloads writes every target with direct I/O
        implicit = [Workload(target=r, rw="write", bs=4096) for r in targets]
        for w in phase.workloads or (implicit if phase.kind == "precondition" else []):
            key = (w.target, w.direct)
            if w.engine == "auto" and w.op == "io" and key not in engines:
                target = targets[w.target]
                location = (
                    target.path if target.kind in ("block", "fileset") else Path(target.path).parent
                )
                engines[key] = runner.probe_engine(
                    fio,
                    location,
                    block_device=target.kind == "block",
                    direct=w.direct,
                    candidates=ENGINE_ORDER,
                ).engine
    return engines


def _prepare_hosts(
    resolved: ResolvedScenario,
    hosts: list[HostAddress],
    host_paths: dict[HostAddress, dict[str, str]],
    fio: str,
    version: str,
    allow_destroy: bool,
    repeats: int,
) -> Plan:
    from iorig import multihost  # the client/server side is only loaded when used

    scenario = resolved.scenario
    if any(spec.fileset for spec in scenario.targets.values()):
        raise UserError(
            f"scenario {scenario.name!r} works on file sets, which iorig runs on this machine "
            "only (fio's servers cannot make the directories)",
            hint="run it on each host, or drop --hosts",
        )
    servers = multihost.check_servers(fio, version, hosts)
    size_explicit = resolved.param_origins.get("size", "default") != "default"
    host_targets = {
        host.label: {
            role: remote_target(
                host_paths.get(host, {}).get(role),
                host=host.label,
                role=role,
                size=spec.size,
                size_explicit=size_explicit,
                allow_destroy=allow_destroy,
            )
            for role, spec in scenario.targets.items()
        }
        for host in hosts
    }
    engines: dict[tuple[str, bool], str] = {}
    with multihost.scratch_dir() as tmp:
        for phase in scenario.phases:
            implicit = [Workload(target=r, rw="write", bs=4096) for r in scenario.targets]
            for w in phase.workloads or (implicit if phase.kind == "precondition" else []):
                key = (w.target, w.direct)
                if w.engine == "auto" and key not in engines:
                    engines[key] = multihost.probe_engine(
                        fio,
                        {h: host_targets[h.label][w.target] for h in hosts},
                        direct=w.direct,
                        candidates=ENGINE_ORDER,
                        workdir=Path(tmp),
                    )
    first = host_targets[hosts[0].label]
    plan = build_plan(resolved, first, engines, fio, version, repeats)
    # The machine iorig runs on is only the client here: its facts are kept
    # apart, and what each server told about itself is all iorig knows of it.
    disclosure = {
        "fio": collect_fio(fio, version, plan.engines),
        "servers": servers,
        "client": disclose([], collect_fio(fio, version, plan.engines)),
    }
    return replace(plan, hosts=tuple(hosts), host_targets=host_targets, disclosure=disclosure)
