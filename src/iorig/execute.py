"""Run a plan: one fio invocation per phase, each finished phase stored
before the next starts, progress reported as events, Ctrl-C handled.

On SIGINT/SIGTERM/SIGHUP the current fio is asked to stop (it still writes
what it measured, which is stored as an ``aborted`` phase), no further
phase starts, and the run ends ``aborted``. Any other failure ends it
``failed`` with the reason; it is never left ``running``.
"""

from __future__ import annotations

import contextlib
import signal
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from iorig import __version__, multihost
from iorig.analyze import audit
from iorig.analyze.steady import RoundTracker, evaluate
from iorig.assemble import JobLogs, SectionData, build_scopes
from iorig.fio import parse, status
from iorig.fio.runner import FioExit, FioProcess
from iorig.jobtext import fileset_layout, job_text
from iorig.plan import Plan, PlannedPhase, requested
from iorig.results import PhaseResult
from iorig.store import Store
from iorig.targets import release


@dataclass(frozen=True)
class RunStarted:
    run_id: str
    plan: Plan


@dataclass(frozen=True)
class PhaseStarted:
    phase: PlannedPhase
    repeat: int
    index: int
    total: int | None  # None while a search decides its phases as it goes


@dataclass(frozen=True)
class PhaseProgress:
    phase: PlannedPhase
    repeat: int
    elapsed_s: float
    fraction: float | None  # 0..1 when the phase's length is known
    rates: status.LiveRates | None


@dataclass(frozen=True)
class PhaseFinished:
    phase: PlannedPhase
    result: PhaseResult


Event = RunStarted | PhaseStarted | PhaseProgress | PhaseFinished


@dataclass(frozen=True)
class RunOutcome:
    run_id: str
    status: str  # ok | failed | aborted
    error: str | None
    phases: tuple[PhaseResult, ...]


@contextlib.contextmanager
def cancel_on_signals() -> Iterator[threading.Event]:
    """An event set by SIGINT, SIGTERM or SIGHUP while the block runs."""
    cancel = threading.Event()
    if threading.current_thread() is not threading.main_thread():
        yield cancel
        return

    def handler(signum: int, frame: object) -> None:
        cancel.set()

    sigs = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
    previous = {s: signal.signal(s, handler) for s in sigs}
    try:
        yield cancel
    finally:
        for s, h in previous.items():
            signal.signal(s, h)


def _run_metadata(plan: Plan, command: str, label: str | None) -> dict:
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
    targets = [asdict(t) | {"path": str(t.path)} for t in plan.targets.values()]
    return {
        "label": label,
        "scenario": scenario.name,
        "scenario_version": scenario.version,
        "title": scenario.title,
        "scenario_origin": resolved.source.origin,
        "scenario_text": resolved.source.text,
        "resolved": scenario.model_dump(mode="json"),
        "params": params,
        "profile": resolved.profile,
        "targets": targets,
        "hosts": plan.host_labels,
        "command": command,
        "iorig_version": __version__,
        "fio_version": plan.fio_version,
        "warnings": [
            {"code": "plan", "message": n, "advice": "", "phase": None, "severity": "info"}
            for n in plan.notes
        ]
        + [f.as_dict() for f in audit.before_run(plan, plan.disclosure)],
        "disclosure": plan.disclosure | {"interface_limit": plan.limit},
    }


class RunSession:
    """One run in the database, open while phases execute.

    ``execute`` runs a plan's fixed schedule through it; searches (knee,
    load-point curve) use it to run phases they decide on as they go. On
    leaving, the audit is stored, the run gets its final status (never left
    ``running``) and the targets are released — also on a signal or a bug.
    """

    def __init__(
        self,
        plan: Plan,
        store: Store,
        *,
        command: str,
        on_event: Callable[[Event], None] = lambda e: None,
        keep_files: bool = False,
        label: str | None = None,
        search: dict | None = None,
    ) -> None:
        self.plan = plan
        self.store = store
        self.command = command
        self.on_event = on_event
        self.keep_files = keep_files
        self.label = label
        self.search = search or {}
        self.results: list[PhaseResult] = []
        self.ran: dict[str, PlannedPhase] = {}  # phases run so far, by name (for the audit)
        self.status, self.error = "ok", None
        self.run_id = ""
        self._stack = contextlib.ExitStack()
        self._cancel = threading.Event()
        self._tmp = Path()
        self._count = 0

    def __enter__(self) -> RunSession:
        self.run_id = self.store.create_run(
            **_run_metadata(self.plan, self.command, self.label), search=self.search
        )
        try:
            self._cancel = self._stack.enter_context(cancel_on_signals())
            self._tmp = Path(
                self._stack.enter_context(tempfile.TemporaryDirectory(prefix="iorig-"))
            )
        except BaseException:
            self._finish()
            raise
        self.on_event(RunStarted(self.run_id, self.plan))
        return self

    def __exit__(self, exc_type: type | None, exc: BaseException | None, tb: object) -> None:
        if exc is not None:
            self.status = "aborted" if isinstance(exc, KeyboardInterrupt) else "failed"
            self.error = f"{type(exc).__name__}: {exc}"
        elif self.status == "ok" and self._cancel.is_set():
            self.status, self.error = "aborted", "interrupted by a signal"
        self._finish()

    def _finish(self) -> None:
        try:
            try:
                findings = audit.after_run(
                    self.results, requested(self.ran.values()), self.plan.limit
                )
                self.store.add_warnings(self.run_id, [f.as_dict() for f in findings])
            finally:
                self.store.finish_run(self.run_id, self.status, self.error)
                if self.plan.hosts:
                    if not self.keep_files:
                        multihost.remove_files(self.plan)
                else:
                    for target in self.plan.targets.values():
                        release(target, self.keep_files)
        finally:
            self._stack.close()

    @property
    def stopped(self) -> bool:
        """True once a signal arrived or a phase failed: run nothing more."""
        return self._cancel.is_set() or self.status != "ok"

    def run_phase(
        self, phase: PlannedPhase, repeat: int = 0, total: int | None = None
    ) -> PhaseResult:
        """Run one phase, store it (one transaction) and return its result."""
        self.on_event(PhaseStarted(phase, repeat, self._count, total))
        self._count += 1
        self.ran[phase.name] = phase
        if phase.kind == "idle":
            result = _idle(phase, repeat, self._cancel, self.on_event)
        else:
            workdir = self._tmp / f"{phase.seq:03d}-{repeat:02d}"
            workdir.mkdir()
            run = _hosts_phase if self.plan.hosts else _fio_phase
            result = run(
                self.plan, self.run_id, phase, repeat, workdir, self._cancel, self.on_event
            )
        self.store.save_phase(self.run_id, result)
        self.results.append(result)
        self.on_event(PhaseFinished(phase, result))
        if result.status == "failed" and self.status == "ok":
            self.status, self.error = "failed", f"phase {phase.name!r}: {result.error}"
        return result

    def fail(self, error: str) -> None:
        """End the run as failed for a reason found between phases."""
        if self.status == "ok":
            self.status, self.error = "failed", error

    @property
    def outcome(self) -> RunOutcome:
        return RunOutcome(self.run_id, self.status, self.error, tuple(self.results))


def execute(
    plan: Plan,
    store: Store,
    *,
    command: str,
    on_event: Callable[[Event], None] = lambda e: None,
    keep_files: bool = False,
    label: str | None = None,
    search: dict | None = None,
) -> RunOutcome:
    """Run the plan's phases in order (repeats included), storing each."""
    session = RunSession(
        plan, store, command=command, on_event=on_event, keep_files=keep_files, label=label,
        search=search,
    )  # fmt: skip
    with session:
        schedule = plan.schedule()
        for phase, repeat in schedule:
            if session.stopped:
                break
            session.run_phase(phase, repeat, len(schedule))
    return session.outcome


def _idle(
    phase: PlannedPhase, repeat: int, cancel: threading.Event, on_event: Callable[[Event], None]
) -> PhaseResult:
    started = time.time()
    duration = phase.duration_s or 0.0
    while (elapsed := time.time() - started) < duration:
        on_event(PhaseProgress(phase, repeat, elapsed, elapsed / duration, None))
        if cancel.wait(min(0.5, duration - elapsed)):
            break
    return phase.result(
        repeat,
        status="aborted" if cancel.is_set() else "ok",
        started_at=started,
        ended_at=time.time(),
    )


def _fio_phase(
    plan: Plan,
    run_id: str,
    phase: PlannedPhase,
    repeat: int,
    workdir: Path,
    cancel: threading.Event,
    on_event: Callable[[Event], None],
) -> PhaseResult:
    text = job_text(plan, run_id, phase)
    for w in phase.workloads:  # fio does not make a file set's directories
        for directory in layout.directories if (layout := fileset_layout(w)) else ():
            Path(directory).mkdir(parents=True, exist_ok=True)
    jobfile = workdir / "job.fio"
    jobfile.write_text(text)
    proc = FioProcess(plan.fio, jobfile, workdir)
    duration = phase.duration_s
    timeout = phase.timeout_s(slack_s=60)
    previous: list[status.Snapshot] = []
    rounds = RoundTracker(phase.steady) if phase.steady else None

    def on_snapshot(doc: dict) -> bool:
        snap = status.snapshot(doc)
        live = status.rates(previous[-1] if previous else None, snap)
        previous[:] = [snap]
        if duration:
            fraction = live.elapsed_s / duration
        else:
            fraction = live.io_bytes / max(phase.bytes_to_write, 1)
        on_event(PhaseProgress(phase, repeat, live.elapsed_s, min(fraction, 1.0), live))
        # A steady-state warm-up ends as soon as its window holds.
        return bool(rounds and rounds.feed(snap) and evaluate(rounds.rounds, rounds.rule).converged)

    started = time.time()
    done = proc.run(cancel=cancel, on_snapshot=on_snapshot, timeout_s=timeout)
    ended = time.time()
    scopes, fio_version, problem = _collect(done, workdir, phase, "local")
    steady = evaluate(rounds.rounds, rounds.rule) if rounds else None
    exited = None
    if done.returncode != 0 and done.stopped_by != "request":
        exited = f"fio exited with code {done.returncode}: {_tail(done.stderr)}"
    state, error = phase_state(done, exited or problem)
    return phase.result(
        repeat,
        status=state,
        started_at=started,
        ended_at=ended,
        scopes=scopes,
        job_text=text,
        command=proc.command,
        fio_version=fio_version or plan.fio_version,
        fio_output=done.output,
        fio_stderr=done.stderr,
        error=error,
        steady=steady,
    )


def _hosts_phase(
    plan: Plan,
    run_id: str,
    phase: PlannedPhase,
    repeat: int,
    workdir: Path,
    cancel: threading.Event,
    on_event: Callable[[Event], None],
) -> PhaseResult:
    """A phase on the plan's fio servers (see iorig.multihost)."""

    def progress(elapsed: float, fraction: float | None) -> None:
        on_event(PhaseProgress(phase, repeat, elapsed, fraction, None))

    result, done = multihost.run_phase(plan, run_id, phase, repeat, workdir, cancel, progress)
    # fio's client exit code says nothing (0 with a refused host): hosts' results do
    state, error = phase_state(done, result.error)
    return replace(result, status=state, error=error)


def phase_state(done: FioExit, problem: str | None) -> tuple[str, str | None]:
    """A phase's status and error from how fio ended and what its output lacked."""
    if done.stopped_by == "timeout":
        return "failed", "fio did not finish in time and was stopped"
    if done.stopped_by == "cancel":
        return "aborted", "interrupted; the figures cover the time before the interrupt"
    if mismatches := parse.verify_failures(done.stderr):
        return "failed", verify_message(mismatches)
    if problem:
        return "failed", problem
    return "ok", None


def verify_message(failures: list[parse.VerifyFailure], shown: int = 10) -> str:
    """Which blocks failed verification, by file and offset."""
    listed = "; ".join(
        f"{f.path} offset {f.offset} ({f.offset / 2**20:.2f} MiB), {f.length} bytes: {f.what}"
        for f in failures[:shown]
    )
    more = f"; … and {len(failures) - shown} more" if len(failures) > shown else ""
    return (
        f"data verification failed: {len(failures)} block(s) did not read back as written: "
        f"{listed}{more}"
    )


def _tail(text: str, lines: int = 3) -> str:
    kept = [line for line in text.strip().splitlines() if line.strip()][-lines:]
    return " / ".join(kept) or "(fio printed no error message)"


def _collect(
    done: FioExit, workdir: Path, phase: PlannedPhase, host: str
) -> tuple[tuple, str, str | None]:
    """Scopes from fio's output and logs, fio's version, and a problem if any."""
    try:
        output = parse.parse_final(done.output, host)
    except parse.FioOutputError as exc:
        return (), "", f"{exc}: {_tail(done.stderr)}"
    logs = {(prefix, suffix or host): jobs for (prefix, suffix), jobs in
            parse.read_logs(workdir).items()}  # fmt: skip
    sections = []
    for w in phase.workloads:
        jobs = tuple(j for j in output.jobs if j.name == w.label)
        job_logs = tuple(
            JobLogs(
                iops=tuple(kinds.get("iops", ())),
                bw=tuple(kinds.get("bw", ())),
                clat=tuple(kinds.get("clat", ())),
                hist=tuple(kinds.get("clat_hist", ())),
            )
            for _, kinds in sorted(logs.get((w.label, host), {}).items())
        )
        sections.append(SectionData(w.label, host, jobs, job_logs))
    failed_jobs = [j for j in output.jobs if j.error]
    problem = None
    if failed_jobs:
        j = failed_jobs[0]
        problem = f"fio job {j.name} ended with error {j.error}: {_tail(done.stderr)}"
    return build_scopes(sections), output.version, problem
