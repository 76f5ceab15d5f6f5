"""This machine as a backend: one local fio per phase, with live status."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator, Mapping
from dataclasses import replace
from pathlib import Path

from iorig.analyze.precision import LIVE_MARGIN, STOP_ARTIFACT_S, PrecisionWatch
from iorig.analyze.steady import SteadyWatch
from iorig.analyze.stoprule import StopRule
from iorig.bounded import within
from iorig.errors import UserError
from iorig.fio import parse, runner, status
from iorig.fio.control import HostControl
from iorig.fio.cputime import CpuWatch
from iorig.fio.hosts import HostSpec
from iorig.fio.runner import FioExit, FioProcess
from iorig.machine.leftovers import LaidOut, temporary_directory
from iorig.machine.locks import Claim, target_keys
from iorig.machine.pagecache import drop_cached
from iorig.machine.sysinfo import collect_fio, disclose
from iorig.model import PhaseKind
from iorig.run.backend import HostLogs, PhaseJob, Progress, RawPhase
from iorig.run.jobtext import fileset_layout, job_text, slow_paced, state_role
from iorig.run.live import StatusMeter
from iorig.run.plan import Plan, PlannedPhase, build_plan, phase_workloads
from iorig.run.preflight import preflight
from iorig.run.probe import ProbeSpot, probe_engine, probe_spot
from iorig.scenario.loading import ResolvedScenario
from iorig.scenario.schema import TRIMS, Scenario
from iorig.targets import (
    DATA_FILE_NAME,
    FILESET_DIR_NAME,
    Identity,
    Target,
    check_kind,
    identity,
    identity_change,
    new_paths,
    release,
    remove_new,
    resolve_target,
)
from iorig.targets.discard import discard_problem

LABEL = "local"
SLACK_S = 60.0  # start-up time on top of a phase's length before it counts as hung
CLEANUP_S = 10.0  # for removing a target's data file


def state_args(job: PhaseJob) -> tuple[str, ...]:
    """fio's arguments for a phase that saves or loads write states: they go
    to the run's state directory (``--aux-path``; fio's own default is its
    working directory, which is per phase), and a file there named
    ``trigger`` makes fio save them at once and stop (``--trigger-file``;
    fio removes it): what a fault that may lose the writes in flight (a
    power cut, a killed fio) does first, so that those writes are not
    counted as acknowledged. No trigger command is ever given."""
    roles = {state_role(job.phase, w) for w in job.phase.workloads} - {None}
    if job.state_dir is None or not roles:
        return ()
    args = (f"--aux-path={job.state_dir}",)
    if job.trigger is not None:  # never while a replay runs: fio would save the replay's state
        args += (f"--trigger-file={job.trigger}",)
    return args


def precision_watch(phase: PlannedPhase, *, logged: bool = False) -> PrecisionWatch | None:
    """The live stopping rule of an ``until: precise`` phase; ``logged``: it
    reads the seconds fio logs (``RuleFeed``), so it needs no margin."""
    if phase.precision_pct is None or not phase.duration_s:
        return None
    return PrecisionWatch(
        phase.precision_pct,
        phase.min_s,
        phase.duration_s,
        str(phase.headline),
        skip_s=phase.ramp_s or 0.0,
        margin=1.0 if logged else LIVE_MARGIN,
        # on logged seconds the stored series keeps exactly those the rule saw
        stop_artifact_s=0 if logged else STOP_ARTIFACT_S,
    )


def logs_averaged_seconds(phase: PlannedPhase) -> bool:
    """Whether every job of ``phase`` logs one-second averages (not each
    completion): then the status reveals each logged second as it ends."""
    return not any(w.spec.completions or slow_paced(w) for w in phase.workloads)


class RuleFeed:
    """What the live stop rules read, the seconds the phase will store where
    the status reveals them (``status.LoggedSeconds``), else rates from the
    status's counters: the rules stop fio on the figures they are then
    judged on, not on a view whose windows move a burst of completions
    either way (docs/methodology.md, "Live figures")."""

    def __init__(self, rules: list[StopRule], *, logged: bool, skip_s: float = 0.0) -> None:
        self.rules = rules
        self.logged = status.LoggedSeconds() if logged else None
        self.skip_s = skip_s
        self._sums = (0.0, 0.0)  # the logged seconds' I/Os and bytes so far
        self.stopped_after_s: int | None = None

    def stopped(self) -> None:
        """The rules stopped fio: on the logged seconds given so far, if they read them."""
        if self.logged is not None and not self.logged.lost:
            self.stopped_after_s = self.logged.given

    def feed(self, snap: status.Snapshot) -> bool:
        """True once any rule says stop."""
        if self.logged is None or self.logged.lost:
            return any(
                [r.feed(snap.t_ms, snap.elapsed_s, snap.ios, snap.io_bytes) for r in self.rules]
            )
        if self.logged.given == 0 and self._sums == (0.0, 0.0):
            # the origin: logged second k ends k seconds after it, past the ramp
            # (fio samples nothing in a ramp)
            for rule in self.rules:
                rule.feed(0, self.skip_s + 0.5, 0.0, 0.0)
        stop = False
        for iops, bytes_per_s in self.logged.feed(snap):
            ios, io_bytes = self._sums[0] + iops, self._sums[1] + bytes_per_s
            self._sums = (ios, io_bytes)
            k = self.logged.given  # every second given so far: this one's end
            stop = (
                any([r.feed(k * 1000, self.skip_s + k + 0.5, ios, io_bytes) for r in self.rules])
                or stop
            )
        return stop


def check_discards(scenario: Scenario, targets: Mapping[str, Target]) -> None:
    """Refuse trims where the target would fail them (iorig.targets.discard), before
    anything runs: each target asked once."""
    asked: dict[str, str | None] = {}
    for phase in scenario.phases:
        for w in phase.workloads:
            if not (phase.enabled and w.enabled and w.rw in TRIMS):
                continue
            target = targets[w.target]
            if w.target not in asked:
                asked[w.target] = discard_problem(target.path, target.kind == "block")
            if (problem := asked[w.target]) is not None:
                raise UserError(
                    f"phase {phase.name!r}, workload {w.label!r}: rw {w.rw} trims, and {problem}",
                    hint="trim a device that takes discards (a loop device over a file does), "
                    "or a file on a filesystem that punches holes (ext4, xfs, tmpfs)",
                )


def drop_written(phase: PlannedPhase, timeout_s: float) -> str | None:
    """After a phase that writes the working set once with buffered I/O, its
    targets' data written back and dropped from the page cache (as fio's
    ``invalidate`` would, had it written them): the phases after it then
    read the storage, not what the fill left in memory. Why it could not be
    done in ``timeout_s`` (a filesystem that froze), else None."""
    if not phase.kind.writes_once:
        return None
    paths = {
        w.target.path
        for w in phase.workloads
        if not w.spec.direct and w.target.kind in ("file", "block")
    }
    for path in sorted(paths):
        returned = within(lambda p=path: drop_cached(p), timeout_s)
        if returned is None:
            return (
                f"{path} was not written back in {timeout_s:.0f} s after the phase (its "
                "storage or filesystem stopped answering)"
            )
        if isinstance(exc := returned.error, OSError):
            # the jobs would read what the page cache holds of it: said, not measured
            return f"could not write {path} back and drop it from the page cache: {exc}"
        if exc is not None:
            raise exc
    return None


def _to_lay_out(given: str, role: str, fileset: bool) -> tuple[Path, str] | None:
    """The data file (or file-set directory) ``resolve_target`` will make in
    a directory target and remove after the run, when it does not exist yet."""
    path = Path(given).expanduser()
    if fileset:
        inner, kind = path.resolve() / FILESET_DIR_NAME.format(role=role), "fileset"
    elif (given.endswith("/") or path.is_dir()) and not path.is_block_device():
        inner, kind = path.resolve() / DATA_FILE_NAME.format(role=role), "file"
    else:
        return None
    # the name iorig makes is never resolved (targets: no write through a link)
    return None if os.path.lexists(inner) else (inner, kind)


class LocalBackend:
    """Phases on this machine, each one local fio process."""

    def __init__(self, fio: str, fio_version: str) -> None:
        self.fio = fio
        self.fio_version = fio_version
        self._stop = threading.Event()
        self._identities: dict[str, Identity] = {}  # target role -> as first seen
        self._hurry = threading.Event()  # a second Ctrl-C: kill fio at once
        self._claim = Claim()  # the targets' locks, from before they are touched to clean_up
        self._laid = LaidOut()  # records of what is laid out to remove after the run

    @property
    def hosts(self) -> tuple[str, ...]:
        return (LABEL,)

    # ------------------------------------------------------------ prepare

    def prepare(
        self,
        resolved: ResolvedScenario,
        target_paths: Mapping[str, Mapping[str, str]],
        *,
        allow_destroy: bool,
        repeats: int,
    ) -> Plan:
        scenario = resolved.scenario
        paths = target_paths.get(LABEL, {})
        missing = [role for role in scenario.targets if role not in paths]
        if missing:
            raise UserError(
                f"scenario {scenario.name!r} needs a target for: {', '.join(missing)}",
                hint="pass --target PATH (a file, a directory or a block device), "
                "e.g. --target ./iorig-scratch/",
            )
        targets: dict[str, Target] = {}
        made = []  # what preparing may create, taken back if the run does not start
        try:
            for role, spec in scenario.targets.items():  # all locked before anything is made
                if paths[role]:  # in use by another run: refused, naming it
                    check_kind(paths[role])
                    self._claim.take(
                        paths[role], target_keys(paths[role], role, fileset=spec.fileset)
                    )
            for role, spec in scenario.targets.items():
                if paths[role] and (laid := _to_lay_out(paths[role], role, spec.fileset)):
                    self._laid.planned(*laid)  # recorded before it exists: a kill leaves it
                made += new_paths(paths[role], role=role, fileset=spec.fileset)
                targets[role] = resolve_target(
                    paths[role],
                    role=role,
                    size=spec.size,
                    size_explicit=resolved.size_is_explicit(role),
                    allow_destroy=allow_destroy,
                    fileset=spec.fileset,
                )
                if targets[role].remove_after:
                    self._laid.made(targets[role].path)
            if any(w.op == "stat" for p in scenario.phases for w in p.workloads if w.enabled):
                runner.require_engine(
                    self.fio,
                    "filestat",
                    "stat and access operations (fio ≥ 3.19 has it)",
                    hint="install a newer fio, or run without stat operations (the built-in "
                    "ai-image takes --set stat_ops=false)",
                )
            check_discards(scenario, targets)
            engines = self._probe_engines(resolved, targets)
            plan = build_plan(resolved, targets, engines, self.fio, self.fio_version, repeats)
            preflight(self.fio, plan, self.host_jobs)
            disclosure = disclose(
                [(t.path, t.kind) for t in targets.values()],
                collect_fio(self.fio, self.fio_version, plan.engines),
            )
            return replace(plan, disclosure=disclosure)
        except BaseException:
            for target in targets.values():  # nothing ran: leave no files behind
                release(target, keep=False)
            remove_new(made)
            self._laid.forget()
            self._claim.release()
            raise

    def _probe_engines(
        self, resolved: ResolvedScenario, targets: dict[str, Target]
    ) -> dict[tuple[str, bool], str]:
        engines: dict[tuple[str, bool], str] = {}
        for phase in resolved.scenario.phases:
            for w in phase_workloads(phase, targets):
                key = (w.target, w.direct)
                if w.engine == "auto" and w.op == "io" and key not in engines:
                    engines[key] = self.probe({LABEL: probe_spot(targets[w.target])}, w.direct)
        return engines

    def probe(self, spots: Mapping[str, ProbeSpot], direct: bool) -> str:
        """The engine that does I/O at ``spots`` (a probe file left behind
        by an interrupted fio is removed)."""
        try:
            return probe_engine(self, spots, direct=direct)
        finally:
            for spot in spots.values():
                if not spot.read_only:
                    Path(spot.path).unlink(missing_ok=True)

    def run_jobs(
        self, texts: Mapping[str, str], timeout_s: float, *, read_only: bool = False
    ) -> FioExit:
        (text,) = texts.values()
        with temporary_directory("iorig-probe-") as tmp:
            job = tmp / "job.fio"
            job.write_text(text)
            extra = ("--readonly",) if read_only else ()
            proc = FioProcess(self.fio, job, tmp, status=False, extra_args=extra)
            return proc.run(timeout_s=timeout_s, hurry=self._hurry)

    # ------------------------------------------------------------ phases

    def _target_change(self, plan: Plan) -> str | None:
        """Whether a target is no longer the one the run started on (removed
        and recreated by someone else: later phases would measure a file
        never prefilled). Each target's identity is taken when first seen."""
        for role, target in plan.targets.items():
            now = identity(target)
            if role not in self._identities:
                if now is not None:
                    self._identities[role] = now
                continue
            if change := identity_change(target, self._identities[role], now):
                return change
        return None

    def host_jobs(self, plan: Plan, run_id: str, phase: PlannedPhase) -> dict[str, str]:
        """The phase's job text (one host: this machine); the pre-flight
        parses the same."""
        return {LABEL: job_text(plan, run_id, phase)}

    def run_phase(self, job: PhaseJob) -> Iterator[Progress | RawPhase]:
        phase = job.phase
        if (change := self._target_change(job.plan)) is not None:
            yield self._not_run(job, change)
            return
        (text,) = self.host_jobs(job.plan, job.run_id, phase).values()
        for w in phase.workloads:  # fio does not make a file set's directories
            for directory in layout.directories if (layout := fileset_layout(w)) else ():
                Path(directory).mkdir(parents=True, exist_ok=True)
        jobfile = job.workdir / "job.fio"
        jobfile.write_text(text)
        watch = SteadyWatch(phase.steady) if phase.steady else None
        # a steady-state warm-up ends as soon as its window holds, a precise
        # measurement as soon as its median is known well enough
        logged = logs_averaged_seconds(phase)
        rules: list[StopRule] = [
            r for r in (watch, precision_watch(phase, logged=logged)) if r is not None
        ]
        streams = needs_status(phase, rules)
        proc = FioProcess(
            self.fio, jobfile, job.workdir, status=streams, extra_args=state_args(job)
        )
        feed = RuleFeed(rules, logged=logged, skip_s=phase.ramp_s or 0.0)
        previous: status.Snapshot | None = None
        meter = StatusMeter(job.index, phase.name, LABEL)
        io_started: float | None = None
        started = time.time()
        timeout_s = phase.timeout_s(SLACK_S, job.plan.min_bytes_per_s)
        cpu = CpuWatch()  # fio's own figures leave out io_uring's worker threads
        for elapsed in proc.ticks(self._stop, timeout_s, hurry=self._hurry):
            cpu.sample(proc.pid)
            if not streams:  # no live figures: how far, where its length is a time
                timed = phase.duration_s and not phase.until_done
                fraction = min(elapsed / phase.duration_s, 1.0) if timed else None
                yield Progress(elapsed, fraction, None)
                continue
            for doc in proc.new_snapshots():
                snap = status.snapshot(doc)
                live = status.rates(previous, snap)
                io_started = status.jobs_began(io_started, previous, snap)
                previous = snap
                if phase.duration_s:
                    fraction = live.elapsed_s / phase.duration_s
                    if phase.until_done:  # through its data, as a rule long before its limit
                        fraction = max(fraction, live.io_bytes / max(phase.bytes_to_write, 1))
                else:
                    fraction = live.io_bytes / max(phase.bytes_to_write, 1)
                stop = feed.feed(snap)
                seconds = tuple(meter.feed(snap, time.time()))
                rule = "; ".join(r.describe() for r in rules) or None
                yield Progress(live.elapsed_s, min(fraction, 1.0), live, io_started, seconds, rule)
                if stop:
                    feed.stopped()
                    proc.request_stop()
        assert proc.exit is not None
        dropped = None
        if proc.exit.returncode == 0 and proc.exit.stopped_by is None:
            dropped = drop_written(phase, max(CLEANUP_S, timeout_s - (time.time() - started)))
        yield RawPhase(
            started_at=started,
            ended_at=time.time(),
            job_text=text,
            command=proc.command,
            exit=proc.exit,
            logs=parse.read_logs(job.workdir),
            hosts=(HostLogs(LABEL),),
            wallclock_logs=True,
            exit_code_counts=True,
            steady=watch.state if watch is not None else None,
            problem=self._target_change(job.plan) or dropped,
            io_started_at=io_started,
            generator_cpu=cpu.measured(),
            stopped_after_s=feed.stopped_after_s if proc.exit.stopped_by == "request" else None,
        )

    def _not_run(self, job: PhaseJob, problem: str) -> RawPhase:
        now = time.time()
        return RawPhase(
            started_at=now,
            ended_at=now,
            job_text="",
            command=(),
            exit=FioExit(0, "", "", None, 0.0),
            logs={},
            hosts=(HostLogs(LABEL),),
            wallclock_logs=True,
            exit_code_counts=True,
            problem=f"{problem}; the phase was not run",
        )

    def begin_run(self, run_id: str, *, keep_files: bool) -> None:
        self._claim.name_run(run_id)
        self._laid.begin(run_id, keep=keep_files)

    def stop(self, *, at_once: bool = False) -> None:
        self._stop.set()
        if at_once:
            self._hurry.set()

    def clean_up(self, plan: Plan, *, keep_files: bool) -> list[str]:
        """Release the targets, each in a thread given ``CLEANUP_S``: a
        filesystem that froze or turned read-only yields a warning, never a
        hang or a traceback (the run's figures are stored already)."""
        problems = []
        for target in plan.targets.values():
            returned = within(lambda t=target: release(t, keep_files), CLEANUP_S)
            what = "keep" if keep_files or not target.remove_after else "remove"
            if returned is None:
                problems.append(
                    f"could not {what} {target.path}: its filesystem did not answer in "
                    f"{CLEANUP_S:g} s (frozen or hung); remove it yourself once it answers"
                )
            elif isinstance(exc := returned.error, Exception):
                why = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc
                problems.append(f"could not {what} {target.path}: {why}")
            elif exc is not None:
                raise exc
            else:
                self._laid.done(target.path)  # removed, or kept as asked: not a leftover
        self._claim.release()
        return problems

    def control(self, host: HostSpec) -> HostControl:
        raise UserError(f"stopping a host ({host.label}) needs a multi-host run (--hosts)")


def needs_status(phase: PlannedPhase, rules: list[StopRule]) -> bool:
    """Whether fio streams its status through ``phase``
    (``--status-interval=1``): a phase that goes over its data once (the
    data set's creation, a precondition, a verify) or warms up for a time
    decides nothing from it unless a rule or an event needs it. fio before 3.42 deadlocks in its
    status where I/Os take seconds: its status thread holds stat_sem while
    it waits for each job to report its CPU, a job in a slow I/O reports
    late, and a job ending meanwhile gives up after 5 s ("fio seems to be
    stuck grabbing stat_sem", exit 41 or 52; fixed by fio commit 00084f95). A
    data set written by 85 jobs at QD 4 to a 9.6 MB/s device queues 19 s
    of writes (docs/methodology.md §10)."""
    quiet = phase.kind.size_based or phase.kind is PhaseKind.WARMUP
    return not quiet or bool(rules) or bool(phase.events)
