"""From a resolved scenario and prepared targets to concrete phases: plan
types and the pure ``build_plan``. The checks that touch machines (fio,
targets, engines) are the backends' (``run/local.py``, ``run/servers.py``),
asked by ``run/request.py``'s ``prepare``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from iorig.analyze.audit import Asked
from iorig.errors import UserError
from iorig.fio.hosts import HostSpec
from iorig.model import (
    Disclosure,
    HeadlineOf,
    InterfaceLimit,
    Metric,
    PhaseKind,
    PhaseResult,
    SutRecord,
)
from iorig.model.checkpoint import CheckpointRecord
from iorig.model.training import AcceleratorModel
from iorig.scenario.checkpoint import planned_record
from iorig.scenario.events import EventSpec
from iorig.scenario.loading import ResolvedScenario
from iorig.scenario.schema import (
    DEFAULT_PRECISE_MIN_S,
    MIN_BYTES_PER_S,
    REPLAYS,
    TRIMS,
    Phase,
    SteadyRule,
    Workload,
)
from iorig.scenario.training import TRAIN_PHASE, accelerator_model
from iorig.targets import Target
from iorig.units import format_bytes

STARTUP_S = 10.0  # fio's start-up on top of a size-based phase's bytes


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
    kind: PhaseKind
    duration_s: float | None
    headline: Metric
    description: str
    workloads: tuple[PlannedWorkload, ...]
    steady: SteadyRule | None = None
    point: dict[str, Any] = field(default_factory=dict)  # sweep / search coordinates
    ramp_s: float | None = None  # fio ramp_time before each measurement
    events: tuple[EventSpec, ...] = ()  # done to the system at set times of the phase
    # until: precise — asked half-width (% of the median) and the shortest run
    precision_pct: float | None = None
    min_s: float = DEFAULT_PRECISE_MIN_S
    until_done: bool = False  # ends when its workloads are through; duration_s is the limit
    training: AcceleratorModel | None = None  # a training phase's accelerators
    checkpoint: CheckpointRecord | None = None  # a checkpoint phase's (no processes yet)
    # the scenario's phase a sweep's or search's point runs (its name without
    # the point), "" for a phase of the scenario itself: metrics label phases
    # by it, a bounded set, not by names that change with every point
    scenario_phase: str = ""
    headline_workloads: tuple[str, ...] = ()  # what its headline counts; () every workload

    @property
    def scenario_name(self) -> str:
        """The scenario's phase this one runs (``scenario_phase``)."""
        return self.scenario_phase or self.name

    @property
    def bytes_to_write(self) -> int:
        """For size-based phases: what fio writes before it finishes."""
        return sum(w.size_bytes * w.spec.jobs * w.loops for w in self.workloads)

    def result(
        self, repeat: int, host_shifts_s: Mapping[str, int] | None = None, **measured: Any
    ) -> PhaseResult:
        """A result of this phase: what it was planned as, plus ``measured``
        (status, times, scopes, fio's output …); ``host_shifts_s``: each
        host's series began that many seconds after the first host's."""
        engines = ",".join(sorted({w.engine for w in self.workloads}))
        named = self.headline_workloads
        return PhaseResult(
            **{"engine": engines, "scopes": ()} | measured,
            seq=self.seq,
            name=self.name,
            kind=self.kind,
            planned_s=self.duration_s,
            headline=self.headline,
            repeat=repeat,
            point=self.point,
            headline_of=HeadlineOf(named, dict(host_shifts_s or {})) if named else None,
        )

    def timeout_s(self, slack_s: float, min_bytes_per_s: float = MIN_BYTES_PER_S) -> float:
        """How long fio may take before it is taken for hung (a dead NFS
        server, a frozen filesystem, a silent fio server): half again its
        ramp and runtime plus ``slack_s`` for start-up; a size-based phase
        (prefill, creation, checksum) its bytes at ``min_bytes_per_s`` (a
        rate below any working storage), twice (fio may lay the file out
        first), plus ``STARTUP_S``."""
        if self.duration_s is None:
            return 2 * self.bytes_to_write / min_bytes_per_s + STARTUP_S
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
    disclosure: Disclosure = field(default_factory=Disclosure)
    # fio servers the phases run on (empty: this machine), and each one's
    # targets by role; ``targets`` then holds the first host's, for sizes
    hosts: tuple[HostSpec, ...] = ()
    host_targets: dict[str, dict[str, Target]] = field(default_factory=dict)
    min_bytes_per_s: float = MIN_BYTES_PER_S  # below it a size-based phase is hung
    # user commands events may run, by name, as the command line granted them
    event_grants: dict[str, str] = field(default_factory=dict)
    sut: SutRecord = field(default_factory=SutRecord)  # as the user described it

    @property
    def host_labels(self) -> list[str]:
        return [h.label for h in self.hosts] or ["local"]

    @property
    def limit(self) -> InterfaceLimit | None:
        """Smallest known interface bandwidth on the path, or None (unknown)."""
        return self.disclosure.interface_limit

    def schedule(self) -> list[tuple[PlannedPhase, int]]:
        """(phase, repeat) in execution order. With repeats, the stretch from the
        first to the last measured phase runs that many times, each with fresh
        fio processes; what comes before (prefill, warm-up) runs once."""
        measured = [i for i, p in enumerate(self.phases) if p.kind is PhaseKind.MEASURE]
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


# one direction: a pace in I/Os is a pace of that direction (fio paces each
# direction of a mixed pattern on its own)
ONE_DIRECTION = frozenset({"read", "randread", "write", "randwrite", "trim", "randtrim"})


def paced_iops(spec: Workload) -> float | None:
    """The rate of I/Os a workload's pace asks of one host, all its jobs
    together; None when unpaced or not one rate of I/Os."""
    if spec.flow is not None or spec.rw not in ONE_DIRECTION:
        return None
    if spec.rate_iops:
        # fio's linear rate_iops paces bytes of the smallest block size
        linear = spec.fio_options.get("rate_process", "poisson") != "poisson"
        return None if spec.bssplit and linear else float(spec.jobs * spec.rate_iops)
    if spec.rate:
        return None if spec.bssplit else spec.jobs * spec.rate / spec.bs
    return None


def requested(phases: Iterable[PlannedPhase]) -> dict[str, dict[str, Asked]]:
    """Phase -> workload -> what it asked of fio, for the audit."""
    return {
        p.name: {
            w.label: Asked(
                w.spec.jobs,
                w.spec.iodepth,
                any(x is not None for x in (w.spec.rate_iops, w.spec.rate, w.spec.flow)),
                paced_iops(w.spec),
            )
            for w in p.workloads
        }
        for p in phases
    }


def phase_workloads(phase: Phase, roles: Iterable[str]) -> list[Workload]:
    """A phase's workloads; a precondition phase without any writes every
    target (SNIA PTS workload-independent preconditioning: the whole target,
    twice, with 128 KiB sequential writes)."""
    if phase.workloads or phase.kind is not PhaseKind.PRECONDITION:
        return list(phase.workloads)
    roles = list(roles)
    return [
        Workload(
            name=f"precondition-{role}" if len(roles) > 1 else None,
            target=role,
            rw="write",
            bs=128 * 1024,
            iodepth=16,
        )
        for role in roles
    ]


def check_replays(phases: Iterable[PlannedPhase]) -> None:
    """A verify phase's ``verify_state`` workload checks the writes of the
    latest earlier ``verify_state`` writer of its name, which fio replays from
    the job's definition and its saved state. fio numbers its jobs in job-file
    order and seeds each job and names its saved state by that number, so the
    two must be the same job in the same place: one shape, first in their
    phases."""
    writers: dict[str, tuple[PlannedPhase, PlannedWorkload, int]] = {}
    for phase in phases:
        stateful = [w for w in phase.workloads if w.spec.verify_state]
        if [w.label for w in phase.workloads[: len(stateful)]] != [w.label for w in stateful]:
            raise UserError(
                f"phase {phase.name!r}: put the verify_state workloads first (fio numbers its "
                "jobs in job-file order, and seeds each and names its saved state by that number)"
            )
        index = 0
        for w in stateful:
            where = f"phase {phase.name!r}, workload {w.label!r}"
            if phase.kind is not PhaseKind.VERIFY:
                if w.spec.rw not in REPLAYS:
                    raise UserError(f"{where}: verify_state on a reader belongs in a verify phase")
                if w.spec.jobs > 1 and (w.spec.offset_increment or 0) < w.size_bytes:
                    raise UserError(
                        f"{where}: with verify_state each job needs its own slice "
                        "(offset_increment at least the working set)"
                    )
                writers[w.label] = (phase, w, index)
            elif (found := writers.get(w.label)) is None:
                raise UserError(
                    f"{where}: no earlier phase has a verify_state writer named {w.label!r} "
                    "whose writes it could check",
                    hint="the writer's phase may be disabled by a parameter",
                )
            else:
                wphase, writer, windex = found
                mine = (
                    w.spec.rw,
                    w.spec.bs,
                    w.size_bytes,
                    w.offset_bytes,
                    w.spec.jobs,
                    w.spec.offset_increment,
                    w.spec.verify_interval,
                    w.target.path,
                    index,
                )
                theirs = (
                    REPLAYS[writer.spec.rw],
                    writer.spec.bs,
                    writer.size_bytes,
                    writer.offset_bytes,
                    writer.spec.jobs,
                    writer.spec.offset_increment,
                    writer.spec.verify_interval,
                    writer.target.path,
                    windex,
                )
                if mine != theirs:
                    raise UserError(
                        f"{where} does not replay the writer {w.label!r} of phase "
                        f"{wphase.name!r}: give it rw {theirs[0]} and the writer's bs, size, "
                        "offset, jobs, offset_increment, verify_interval and target, in the same "
                        "place among the phase's verify_state workloads"
                    )
            index += w.spec.jobs


def trim_engine(where: str, w: Workload, target: Target, chosen: str) -> str:
    """The engine of a trim workload. fio discards on a block device with any
    engine; it trims a file only with its falloc engine, which punches holes
    and whose "writes" only allocate, so a file takes trim and randtrim, not
    trimwrite. Whether the target takes them is iorig.targets.discard's to ask."""
    if target.kind == "block":
        return chosen
    if target.kind == "remote":
        raise UserError(
            f"{where}: trims on fio servers: iorig cannot ask whether a host's target takes "
            "discards",
            hint="run the trims on this machine",
        )
    if w.rw not in ("trim", "randtrim"):
        raise UserError(
            f"{where}: rw {w.rw} on a file: fio trims a file by punching holes (its falloc "
            "engine), which cannot also write the blocks",
            hint="use a block device, or rw trim / randtrim on the file",
        )
    if w.engine != "auto":
        raise UserError(
            f"{where}: engine {w.engine} cannot trim a file: fio trims a file only with its "
            "falloc engine (hole punches)",
            hint="leave the engine to iorig (auto; in a fio job file: ioengine=falloc)",
        )
    return "falloc"


def training_model(resolved: ResolvedScenario, phase: str) -> AcceleratorModel | None:
    """The accelerators a scenario's training phase emulates (None for any other phase)."""
    spec = resolved.scenario.training
    if spec is None or phase != TRAIN_PHASE:
        return None
    return accelerator_model(spec)


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
    notes = list(resolved.notes)
    for seq, phase in enumerate(resolved.scenario.phases):
        if not phase.enabled:
            notes.append(f"phase {phase.name!r} is disabled by the scenario's parameters")
            continue
        if phase.kind is PhaseKind.IDLE and not phase.duration:
            notes.append(f"pause {phase.name!r} has zero length and is skipped")
            continue
        planned = []
        for w in phase_workloads(phase, targets):
            if not w.enabled:
                continue
            # the PTS writes twice
            loops = 2 if phase.kind is PhaseKind.PRECONDITION else w.loops
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
            if w.rw in TRIMS:
                engine = trim_engine(
                    f"phase {phase.name!r}, workload {w.label!r}", w, target, engine
                )
            planned.append(PlannedWorkload(w.label, w, target, size, w.offset, engine, loops))
        phases.append(
            PlannedPhase(
                seq=seq,
                name=phase.name,
                kind=phase.kind,
                duration_s=phase.duration,
                headline=phase.headline,
                headline_workloads=tuple(phase.headline_workloads or ()),
                description=phase.description,
                workloads=tuple(planned),
                steady=phase.steady_rule,
                point=resolved.phase_points.get(phase.name, {}),
                # a sweep names its points' phases "PHASE:POINT"; a scenario's
                # phase names have no colon (scenario/schema.py)
                scenario_phase=(
                    phase.name.partition(":")[0] if phase.name in resolved.phase_points else ""
                ),
                ramp_s=phase.ramp,
                events=tuple(phase.events),
                precision_pct=phase.precision_pct,
                min_s=phase.min_s,
                until_done=phase.until == "done",
                training=training_model(resolved, phase.name),
                checkpoint=(
                    planned_record(resolved.scenario.checkpoint, phase.name)
                    if resolved.scenario.checkpoint is not None
                    else None
                ),
            )
        )
    check_replays(phases)
    if not any(p.kind is PhaseKind.MEASURE for p in phases):
        notes.append("the scenario has no measure phase: nothing will be scored")
    if repeats < 1:
        raise UserError(f"--repeat must be at least 1, got {repeats}")
    return Plan(
        resolved, targets, tuple(phases), fio, fio_version, notes=tuple(notes), repeats=repeats
    )
