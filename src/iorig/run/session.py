"""Run a plan on a backend: one phase at a time, each finished phase stored
before the next starts, progress reported as events, Ctrl-C handled.

On SIGINT/SIGTERM/SIGHUP the backend is asked to stop the current phase (fio
still writes what it measured, which is stored as an ``aborted`` phase), no
further phase starts, and the run ends ``aborted``. Any other failure ends
it ``failed`` with the reason; it is never left ``running``.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

from iorig import __version__
from iorig.analyze import audit
from iorig.analyze.devices import merge as merge_devices
from iorig.analyze.generator import Ceiling, GeneratorShape
from iorig.analyze.integrity import SHOWN, lost_message
from iorig.analyze.precision import STOP_ARTIFACT_S, StoppingRule, precision_state
from iorig.analyze.steady import steady_of_series
from iorig.errors import UserError
from iorig.fio import parse
from iorig.fio.runner import FioExit
from iorig.machine.leftovers import temporary_directory
from iorig.model import (
    ALL,
    Finding,
    PhaseKind,
    PhaseResult,
    PhaseStatus,
    RunRecord,
    RunStatus,
    Series,
)
from iorig.model.combine import drop_last, first_seconds
from iorig.run.actions import PhaseEvents
from iorig.run.asfio import differences
from iorig.run.backend import PhaseBackend, PhaseJob, RawPhase
from iorig.run.collect import collect, fio_failure_why, stopped_at_limit, tail
from iorig.run.devwatch import DeviceWatch
from iorig.run.events import (
    Event,
    PhaseFinished,
    PhaseProgress,
    PhaseStarted,
    RunOutcome,
    RunStarted,
)
from iorig.run.generator import heavy_phases, measure_ceiling
from iorig.run.plan import Plan, PlannedPhase, requested
from iorig.run.safekeeping import Keeper
from iorig.scenario.schema import WRITES
from iorig.store import Store, Unwritable, new_run_id
from iorig.units import format_bytes

CEILING_S = 0.25  # the null engine is at full speed at once: a quarter second is plenty


@contextlib.contextmanager
def signals_call(action: Callable[[], None]) -> Iterator[None]:
    """Call ``action`` on SIGINT, SIGTERM or SIGHUP while the block runs."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, frame: object) -> None:
        action()

    sigs = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
    previous = {s: signal.signal(s, handler) for s in sigs}
    try:
        yield
    finally:
        for s, h in previous.items():
            signal.signal(s, h)


def _targets(plan: Plan) -> list[dict[str, Any]]:
    """The run's targets as stored: each host's own on fio servers (their
    paths, kinds and sizes differ by host), else the local ones."""
    if plan.host_targets:
        return [
            asdict(t) | {"path": str(t.path), "host": host}
            for host, roles in plan.host_targets.items()
            for t in roles.values()
        ]
    return [asdict(t) | {"path": str(t.path)} for t in plan.targets.values()]


def run_record(plan: Plan, run_id: str, command: str, label: str | None, search: dict) -> RunRecord:
    """The new run as it is stored before its first phase (``running``)."""
    resolved = plan.resolved
    scenario = resolved.scenario
    params = {
        name: {
            "value": list(resolved.sweep[name])
            if name in resolved.sweep
            else resolved.params[name],
            "text": resolved.param_text(name),
            "origin": resolved.param_origins[name],
        }
        for name in scenario.parameters
    }
    notes = [Finding("plan", n, "", None, "info") for n in plan.notes]
    return RunRecord(
        id=run_id,
        label=label,
        scenario=scenario.name,
        scenario_version=scenario.version,
        title=scenario.title,
        scenario_origin=resolved.source.origin,
        scenario_text=resolved.source.text,
        resolved=scenario.model_dump(mode="json"),
        params=params,
        profile=resolved.profile,
        targets=_targets(plan),
        hosts=plan.host_labels,
        command=command,
        iorig_version=__version__,
        fio_version=plan.fio_version,
        status=RunStatus.RUNNING,
        error=None,
        # where a fio job file runs otherwise than bare fio would run it, option by
        # option: never merged, each difference is a finding of its own
        warnings=tuple(notes + audit.before_run(plan, plan.disclosure) + differences(plan)),
        disclosure=plan.disclosure,
        hostname=socket.gethostname(),
        pid=os.getpid(),
        started_at=time.time(),
        ended_at=None,
        search=search,
        sut=plan.sut,
    )


class RunSession:
    """One run in the database, open while phases execute on a backend.

    ``execute`` runs a plan's fixed schedule through it; searches (knee,
    load-point curve, thread search) use it to run phases they decide on as
    they go. On leaving, the audit is stored, the run gets its final status
    (never left ``running``) and the backend cleans up its targets — also on
    a signal or a bug.
    """

    def __init__(
        self,
        plan: Plan,
        store: Store,
        backend: PhaseBackend,
        *,
        command: str,
        on_event: Callable[[Event], None] = lambda e: None,
        keep_files: bool = False,
        label: str | None = None,
        search: dict | None = None,
    ) -> None:
        self.plan = plan
        # the phases it will run, where known before it starts (``execute``
        # says them; a search or an A/B decides them as it goes)
        self.schedule: tuple[tuple[PlannedPhase, int], ...] | None = None
        self.store = store
        self.backend = backend
        self.command = command
        self.on_event = on_event
        self.keep_files = keep_files
        self.label = label
        self.search = search or {}
        self.results: list[PhaseResult] = []
        self.ran: dict[str, PlannedPhase] = {}  # phases run so far, by name (for the audit)
        self.status, self.error = RunStatus.OK, None
        self.run_id = ""
        self._stack = contextlib.ExitStack()
        self._cancel = threading.Event()
        self._tmp = Path()
        self._count = 0
        self._event_findings: list[Finding] = []  # events that failed
        self._device_findings: list[tuple[str, Finding]] = []  # devices' (devwatch.py)

    def __enter__(self) -> RunSession:
        record = run_record(self.plan, new_run_id(), self.command, self.label, self.search)
        self.backend.begin_run(record.id, keep_files=self.keep_files)  # its locks name it
        self._keeper = Keeper(self.store, record)  # the database, or a recovery file
        self.run_id = self._keeper.create()
        try:
            self._stack.enter_context(signals_call(self.interrupt))
            # stamped with this process: a killed run's is removed by the next run
            self._tmp = self._stack.enter_context(temporary_directory("iorig-"))
            # its listener may fail too (an output that cannot be written)
            self.on_event(
                RunStarted(
                    self.run_id, self.plan, self.label, self.schedule, self.search.get("kind")
                )
            )
        except BaseException as exc:
            self.__exit__(type(exc), exc, exc.__traceback__)  # never left "running"
            raise
        return self

    def __exit__(self, exc_type: type | None, exc: BaseException | None, tb: object) -> None:
        if exc is not None:
            interrupted = isinstance(exc, KeyboardInterrupt)
            self.status = RunStatus.ABORTED if interrupted else RunStatus.FAILED
            self.error = f"{type(exc).__name__}: {exc}"
        elif self.status is RunStatus.OK and self._cancel.is_set():
            self.status, self.error = RunStatus.ABORTED, "interrupted by a signal"
        self._finish()

    def _finish(self) -> None:
        try:
            findings: list[Finding] = []
            try:
                usable = self.plan.disclosure.usable_cpus
                findings = audit.after_run(
                    self.results,
                    requested(self.ran.values()),
                    self.plan.limit,
                    usable,
                    self._ceilings(usable),
                    self.search.get("kind"),
                )
            finally:
                findings = self._event_findings + merge_devices(self._device_findings) + findings
                try:
                    self._keeper.finish(self.status, self.error, findings, self.results)
                finally:
                    problems = self.backend.clean_up(self.plan, keep_files=self.keep_files)
                    if problems and self._keeper.recovery is None:
                        with contextlib.suppress(Unwritable):  # warnings only: never fatal
                            self.store.add_warnings(
                                self.run_id,
                                [Finding("cleanup", p, "", None, "warning") for p in problems],
                            )
        finally:
            self._stack.close()

    def _ceilings(self, usable_cpus: float | None) -> dict[str, Ceiling]:
        """fio's null-engine rate for the phases whose fio was busy, so the
        audit can tell a generator-bound phase (a finished run only)."""
        if self.stopped:
            return {}
        out: dict[str, Ceiling] = {}
        measured: dict[GeneratorShape, Ceiling | None] = {}
        for name, shape in heavy_phases(self.results, self.ran, usable_cpus).items():
            if self._cancel.is_set():
                break
            if shape not in measured:
                try:
                    measured[shape] = measure_ceiling(
                        self.backend, self.backend.hosts, shape, CEILING_S
                    )
                except UserError:
                    measured[shape] = None  # the audit does without it
            if (found := measured[shape]) is not None:
                out[name] = found
        return out

    def interrupt(self) -> None:
        """Stop the running phase and start no other (what a signal does); a
        second signal stops it at once (fio killed, what it had not written
        lost)."""
        again = self._cancel.is_set()
        self._cancel.set()
        self.store.stop_waiting()  # a locked database: a recovery file, not a wait
        self.backend.stop(at_once=again)

    @property
    def interrupted(self) -> bool:
        """A signal arrived: run nothing more at all."""
        return self._cancel.is_set()

    @property
    def stopped(self) -> bool:
        """True once a signal arrived or a phase failed: run nothing more."""
        return self._cancel.is_set() or self.status is not RunStatus.OK

    def run_phase(
        self, phase: PlannedPhase, repeat: int = 0, total: int | None = None
    ) -> PhaseResult:
        """Run one phase, store it (one transaction) and return its result."""
        self.on_event(PhaseStarted(phase, repeat, self._count, total))
        index = self._count
        self._count += 1
        self.ran[phase.name] = phase
        if phase.kind is PhaseKind.IDLE:
            result = self._idle(phase, repeat)
        elif phase.ramp_s and (cold := self._warm_up(phase, repeat, index)) is not None:
            result = cold
        else:
            workdir = self._tmp / f"{phase.seq:03d}-{repeat:02d}"
            workdir.mkdir()
            state = self._tmp / "state"
            state.mkdir(exist_ok=True)
            measured = replace(phase, ramp_s=None)  # warmed up just before (_warm_up)
            result = self._fio_phase(
                PhaseJob(self.plan, self.run_id, measured, repeat, workdir, state, index)
            )
        self.results.append(result)
        unstored = self._keeper.save_phase(result, self.results)  # or kept in a recovery file
        self.on_event(PhaseFinished(phase, result))
        if result.status is PhaseStatus.FAILED and self.status is RunStatus.OK:
            self.status, self.error = RunStatus.FAILED, f"phase {phase.name!r}: {result.error}"
        if unstored:  # a signal's run stays aborted: it stopped waiting for the lock
            self.status = RunStatus.ABORTED if self._cancel.is_set() else RunStatus.FAILED
            self.error = unstored
        return result

    def fail(self, error: str) -> None:
        """End the run as failed for a reason found between phases."""
        if self.status is RunStatus.OK:
            self.status, self.error = RunStatus.FAILED, error

    @property
    def outcome(self) -> RunOutcome:
        recovery = self._keeper.recovery if self.run_id else None
        return RunOutcome(self.run_id, self.status, self.error, tuple(self.results), recovery)

    def _idle(self, phase: PlannedPhase, repeat: int) -> PhaseResult:
        started = time.time()
        duration = phase.duration_s or 0.0
        while (elapsed := time.time() - started) < duration:
            self.on_event(PhaseProgress(phase, repeat, elapsed, elapsed / duration, None))
            if self._cancel.wait(min(0.5, duration - elapsed)):
                break
        return phase.result(
            repeat,
            status=PhaseStatus.ABORTED if self._cancel.is_set() else PhaseStatus.OK,
            started_at=started,
            ended_at=time.time(),
        )

    def _warm_up(self, phase: PlannedPhase, repeat: int, index: int) -> PhaseResult | None:
        """A phase's ramp, run as a fio of its own just before it: the same
        jobs for ``ramp_s``, none of its figures kept. None when it ran; else
        the phase's result, failed or aborted with the warm-up's reason.
        Not fio's own ``ramp_time``: fio 3.33 skips one longer than the
        runtime (SPEC's 900 s before 300 s points), and counts the bytes of
        the I/Os in flight as it ends but not the I/Os (docs/methodology.md)."""
        warm = replace(
            phase,
            kind=PhaseKind.WARMUP,
            duration_s=phase.ramp_s,
            ramp_s=None,
            events=(),
            steady=None,
            precision_pct=None,
            until_done=False,
        )
        workdir = self._tmp / f"{phase.seq:03d}-{repeat:02d}-warm-up"
        workdir.mkdir()
        raw: RawPhase | None = None
        job = PhaseJob(self.plan, self.run_id, warm, repeat, workdir, None, index)
        for item in self.backend.run_phase(job):
            if isinstance(item, RawPhase):
                raw = item
            else:
                self.on_event(PhaseProgress(phase, repeat, item.elapsed_s, None, None))
        assert raw is not None, "a backend ends a phase with its raw result"
        warmed = phase_result(warm, repeat, raw, self.plan.fio_version)
        if warmed.status is PhaseStatus.OK:
            return None
        return phase.result(
            repeat,
            status=warmed.status,
            started_at=raw.started_at,
            ended_at=raw.ended_at,
            job_text=raw.job_text,
            command=raw.command,
            fio_version=warmed.fio_version,
            fio_output=raw.exit.output,
            fio_stderr=raw.exit.stderr,
            error=f"its warm-up: {warmed.error}",
        )

    def _fio_phase(self, job: PhaseJob) -> PhaseResult:
        raw: RawPhase | None = None
        devices = DeviceWatch(self.plan, job.phase)  # their counters before fio starts
        with PhaseEvents(
            self.plan, job.phase, self.plan.event_grants, job.trigger, controls=self.backend.control
        ) as events:
            for item in self.backend.run_phase(job):
                if isinstance(item, RawPhase):
                    raw = item
                else:
                    if item.io_started_at is not None:
                        events.begin(item.io_started_at)
                    self.on_event(
                        PhaseProgress(
                            job.phase,
                            job.repeat,
                            item.elapsed_s,
                            item.fraction,
                            item.rates,
                            item.live,
                            item.rule,
                            events.so_far(),
                        )
                    )
        assert raw is not None, "a backend ends a phase with its raw result"
        if raw.problem is None and (full := workdir_full(job.workdir)) is not None:
            raw = replace(raw, problem=full)
        result = phase_result(job.phase, job.repeat, raw, self.plan.fio_version, events.pauses)
        self._event_findings += events.findings(result.series_origin)
        if result.status is PhaseStatus.OK and stopped_at_limit(raw, job.phase):
            self._event_findings.append(limit_finding(self.plan, job.phase))
        self._device_findings += devices.findings(result)  # after the events were undone
        return replace(result, events=tuple(events.records))


def limit_finding(plan: Plan, phase: PlannedPhase) -> Finding:
    """``stopped-at-limit``: a phase that runs until its jobs are through
    (a fio job file's sized jobs) was stopped at its limit; a warning where
    the limit was not the user's (``duration`` left at its default)."""
    asked = plan.resolved.param_origins.get("duration", "default") != "default"
    return Finding(
        "stopped-at-limit",
        f"phase {phase.name!r} was stopped at its limit of {phase.duration_s:g} s before its "
        "jobs were through (they end after their size): its figures cover those seconds, "
        "not the whole job",
        "give it more time: --set duration=…, or the job's own runtime= (without one, iorig's "
        "limit is the job's bytes at 1 MiB/s plus 10 s)",
        phase.name,
        "info" if asked else "warning",
    )


# fio's output and logs go to the working directory (in TMPDIR): with less
# than this left after a phase they may have been cut short
WORKDIR_LOW_BYTES = 1 << 20
WORKDIR_NEEDED_BYTES = 16 << 20  # refused before a run with less free


def _free_bytes(path: Path) -> int | None:
    try:
        st = os.statvfs(path)
    except OSError:
        return None
    return st.f_bavail * st.f_frsize


def workdir_full(workdir: Path) -> str | None:
    """Why a phase's results cannot be trusted when its working directory's
    filesystem filled up (fio's JSON or logs cut short), else None."""
    free = _free_bytes(workdir)
    if free is None or free >= WORKDIR_LOW_BYTES:
        return None
    return (
        f"no space left in iorig's working directory {workdir.parent} (TMPDIR): fio's results "
        f"and logs may be cut short ({free} bytes free after the phase); free space there or "
        "set TMPDIR to a directory with room"
    )


def check_workdir_space() -> None:
    """Refuse to start when TMPDIR cannot hold fio's results and logs."""
    where = Path(tempfile.gettempdir())
    free = _free_bytes(where)
    if free is not None and free < WORKDIR_NEEDED_BYTES:
        raise UserError(
            f"TMPDIR {where} has only {format_bytes(free)} free: iorig keeps fio's results and "
            "logs there while a phase runs and needs at least "
            f"{format_bytes(WORKDIR_NEEDED_BYTES)}",
            hint="free space there, or set TMPDIR to a directory with room",
        )


def phase_result(
    phase: PlannedPhase,
    repeat: int,
    raw: RawPhase,
    fio_version: str,
    pauses: Mapping[str, list[tuple[float, float]]] | None = None,
) -> PhaseResult:
    """A phase's result from what the backend brought back; ``pauses``: when
    hosts were stopped on purpose (stop-host events), unix seconds."""
    collected = collect(raw, phase, pauses or {})
    exited = None
    if raw.exit_code_counts and raw.exit.returncode != 0 and raw.exit.stopped_by != "request":
        exited = f"fio exited with code {raw.exit.returncode}: {tail(raw.exit.stderr) or '-'}"
        if why := fio_failure_why(raw.exit.stderr):
            exited += f" — {why}"
    state, error = phase_state(raw.exit, raw.problem or exited or collected.problem)
    result = phase.result(
        repeat,
        status=state,
        started_at=raw.started_at,
        ended_at=raw.ended_at,
        scopes=collected.scopes,
        host_shifts_s=collected.host_shifts_s,
        job_text=raw.job_text,
        command=raw.command,
        fio_version=collected.fio_version or fio_version,
        fio_output=raw.exit.output,
        fio_stderr=raw.exit.stderr,
        error=error,
        steady=raw.steady,
        # wall-clock logs say when each host began; else fio's live status did
        series_origin=collected.origin_s if collected.origin_s is not None else raw.io_started_at,
        io_errors=collected.io_errors,
        training=collected.training,
        checkpoint=collected.checkpoint,
        generator_cpu=raw.generator_cpu,
    )
    if raw.exit.stopped_by == "request":
        # fio asked to stop ends on a window cut short and drained (1 MiB
        # writes at QD 128 on an 80 MiB/s cap: …, 80, 80, 73, 89 MiB/s): those
        # seconds are artifacts of the stop, not of the storage. A rule that
        # read the logged seconds stopped after a known count of whole ones:
        # those are kept, no more, no fewer, the seconds it judged
        keep = judged_seconds(phase, result, raw.stopped_after_s)

        def trimmed(x: Series) -> Series:
            return drop_last(x, STOP_ARTIFACT_S) if keep is None else first_seconds(x, keep)

        scopes = tuple(
            replace(s, series={d: trimmed(x) for d, x in s.series.items()}) for s in result.scopes
        )
        result = replace(result, scopes=scopes)
    if phase.steady is not None and raw.steady is None and result.aggregate is not None:
        # no live status (fio servers): judged on the per-second series after the fact
        series = result.aggregate.series.get(ALL)
        if series is not None:
            steady = steady_of_series(
                series.iops.tolist(), series.bytes_per_s.tolist(), phase.steady
            )
            result = replace(result, steady=steady)
    if phase.precision_pct is not None and result.aggregate is not None:
        series = result.aggregate.series.get(ALL)
        if series is not None and phase.duration_s:
            state = precision_state(
                series.values(phase.headline).tolist(),
                str(phase.headline),
                phase.precision_pct,
                phase.min_s,
                phase.duration_s,
            )
            result = replace(result, precision=state)
    return result


def judged_seconds(phase: PlannedPhase, result: PhaseResult, complete: int | None) -> int | None:
    """How many whole seconds a phase a live rule stopped keeps: the
    ``complete`` ones logged before the stop (None: unknown, the last two
    are dropped instead), and of an ``until: precise`` phase only up to the
    first check point at which they know their median well enough, as the
    rule would have stopped on them. The live rule read the same seconds,
    but a late status gives it two or more at once, their mean each (fio's
    1,800 and 2,200 read as 2,000 twice beside a loaded CPU); this keeps the
    stored verdict the rule's own on the stored seconds."""
    if complete is None or phase.precision_pct is None or not phase.duration_s:
        return complete
    series = result.aggregate.series.get(ALL) if result.aggregate is not None else None
    if series is None:
        return complete
    values = series.values(phase.headline)[:complete].tolist()
    rule = StoppingRule(phase.precision_pct, max_s=int(phase.duration_s), min_s=int(phase.min_s))
    return next((n for n in range(1, len(values) + 1) if rule.decide(values[:n]).stop), complete)


def phase_state(done: FioExit, problem: str | None) -> tuple[PhaseStatus, str | None]:
    """A phase's status and error from how fio ended and what its output lacked."""
    if done.stopped_by == "timeout":
        return PhaseStatus.FAILED, "fio did not finish in time and was stopped"
    if done.stopped_by == "cancel":
        return PhaseStatus.ABORTED, "interrupted; the figures cover the time before the interrupt"
    if mismatches := parse.verify_failures(done.stderr):
        return PhaseStatus.FAILED, verify_message(mismatches)
    if parse.missing_verify_state(done.stderr):
        return PhaseStatus.FAILED, MISSING_STATE
    if problem:
        return PhaseStatus.FAILED, problem
    return PhaseStatus.OK, None


def verify_message(failures: list[parse.VerifyFailure], shown: int = SHOWN) -> str:
    """Which blocks failed verification, by file and offset, with what fio
    expected and found there (the first ``shown``), and how many."""
    listed = [
        f"{f.host + ': ' if f.host else ''}{f.path} offset {f.offset} "
        f"({f.offset / 2**20:.2f} MiB), {f.length} bytes: {f.detail}"
        for f in failures[:shown]
    ]
    return lost_message(len(failures), listed)


MISSING_STATE = (
    "the writes to check were not recorded: fio saves what a writing job had acknowledged "
    "when the job ends (or on its trigger file), and the job that wrote them ended without "
    "(killed, or its host stopped); its writes cannot be told apart from the blocks it "
    "never wrote"
)


def execute(
    plan: Plan,
    store: Store,
    backend: PhaseBackend,
    *,
    command: str,
    on_event: Callable[[Event], None] = lambda e: None,
    keep_files: bool = False,
    label: str | None = None,
    search: dict | None = None,
) -> RunOutcome:
    """Run the plan's phases in order (repeats included), storing each."""
    schedule = plan.schedule()
    session = RunSession(
        plan,
        store,
        backend,
        command=command,
        on_event=on_event,
        keep_files=keep_files,
        label=label,
        search=search,
    )
    session.schedule = tuple(schedule)
    with session:
        for at, (phase, repeat) in enumerate(schedule):
            if session.stopped and not _checks_anyway(session, phase, schedule[at:]):
                continue
            session.run_phase(phase, repeat, len(schedule))
    return session.outcome


def _checks_anyway(
    session: RunSession, phase: PlannedPhase, rest: list[tuple[PlannedPhase, int]]
) -> bool:
    """After a failed phase, the data checks still run (and a pause before
    one): a fault that broke the measured phase is what the check is for.
    Not after an interrupt, nor when a failed phase wrote without keeping
    fio's write state: its writes in flight at the failure were never
    acknowledged and may read back torn, which a check without the state
    would call lost data (so also not when writing the data set failed)."""
    failed = [session.ran[r.name] for r in session.results if r.status is not PhaseStatus.OK]
    if session.interrupted or any(_writes_untracked(p) for p in failed):
        return False
    if phase.kind is PhaseKind.VERIFY:
        return True
    return phase.kind is PhaseKind.IDLE and any(p.kind is PhaseKind.VERIFY for p, _ in rest)


def _writes_untracked(phase: PlannedPhase) -> bool:
    """The phase writes, and some writer keeps no record of what completed."""
    return any(
        w.spec.rw in WRITES and w.spec.read_pct != 100 and not w.spec.verify_state
        for w in phase.workloads
    )
