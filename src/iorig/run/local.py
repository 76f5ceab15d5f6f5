"""This machine as a backend: one local fio per phase, with live status."""

from __future__ import annotations

import tempfile
import threading
import time
from collections.abc import Iterator, Mapping
from dataclasses import replace
from pathlib import Path

from iorig.analyze.steady import SteadyWatch
from iorig.errors import UserError
from iorig.fio import parse, runner, status
from iorig.fio.runner import FioExit, FioProcess
from iorig.plan import Plan, PlannedPhase, build_plan, phase_workloads
from iorig.run.backend import HostLogs, PhaseJob, Progress, RawPhase
from iorig.run.jobtext import fileset_layout, job_text
from iorig.run.preflight import preflight
from iorig.run.probe import ProbeSpot, probe_engine, probe_spot
from iorig.scenario import ResolvedScenario
from iorig.sysinfo import collect_fio, disclose
from iorig.targets import Target, new_paths, release, remove_new, resolve_target

LABEL = "local"
SLACK_S = 60.0  # start-up time on top of a phase's length before it counts as hung


class LocalBackend:
    """Phases on this machine, each one local fio process."""

    def __init__(self, fio: str, fio_version: str) -> None:
        self.fio = fio
        self.fio_version = fio_version
        self._stop = threading.Event()

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
            for role, spec in scenario.targets.items():
                made += new_paths(paths[role], role=role, fileset=spec.fileset)
                targets[role] = resolve_target(
                    paths[role],
                    role=role,
                    size=spec.size,
                    size_explicit=resolved.size_is_explicit(role),
                    allow_destroy=allow_destroy,
                    fileset=spec.fileset,
                )
            if any(w.op == "stat" for p in scenario.phases for w in p.workloads if w.enabled):
                runner.require_engine(
                    self.fio,
                    "filestat",
                    "stat and access operations (fio ≥ 3.19 has it)",
                    hint="install a newer fio, or run without stat operations (the built-in "
                    "ai-image takes --set stat_ops=false)",
                )
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
        with tempfile.TemporaryDirectory(prefix="iorig-probe-") as tmp:
            job = Path(tmp) / "job.fio"
            job.write_text(text)
            extra = ("--readonly",) if read_only else ()
            proc = FioProcess(self.fio, job, Path(tmp), status=False, extra_args=extra)
            return proc.run(timeout_s=timeout_s)

    # ------------------------------------------------------------ phases

    def host_jobs(self, plan: Plan, run_id: str, phase: PlannedPhase) -> dict[str, str]:
        """The phase's job text (one host: this machine); the pre-flight
        parses the same."""
        return {LABEL: job_text(plan, run_id, phase)}

    def run_phase(self, job: PhaseJob) -> Iterator[Progress | RawPhase]:
        phase = job.phase
        (text,) = self.host_jobs(job.plan, job.run_id, phase).values()
        for w in phase.workloads:  # fio does not make a file set's directories
            for directory in layout.directories if (layout := fileset_layout(w)) else ():
                Path(directory).mkdir(parents=True, exist_ok=True)
        jobfile = job.workdir / "job.fio"
        jobfile.write_text(text)
        proc = FioProcess(self.fio, jobfile, job.workdir)
        watch = SteadyWatch(phase.steady) if phase.steady else None
        previous: status.Snapshot | None = None
        started = time.time()
        for _ in proc.ticks(self._stop, phase.timeout_s(SLACK_S)):
            for doc in proc.new_snapshots():
                snap = status.snapshot(doc)
                live = status.rates(previous, snap)
                previous = snap
                if phase.duration_s:
                    fraction = live.elapsed_s / phase.duration_s
                else:
                    fraction = live.io_bytes / max(phase.bytes_to_write, 1)
                yield Progress(live.elapsed_s, min(fraction, 1.0), live)
                # a steady-state warm-up ends as soon as its window holds
                if watch is not None and watch.feed(snap.t_ms, snap.ios, snap.io_bytes):
                    proc.request_stop()
        assert proc.exit is not None
        yield RawPhase(
            started_at=started,
            ended_at=time.time(),
            job_text=text,
            command=proc.command,
            exit=proc.exit,
            logs=parse.read_logs(job.workdir),
            hosts=(HostLogs(LABEL),),
            wallclock_logs=False,
            exit_code_counts=True,
            steady=watch.state if watch is not None else None,
        )

    def stop(self) -> None:
        self._stop.set()

    def clean_up(self, plan: Plan, *, keep_files: bool) -> None:
        for target in plan.targets.values():
            release(target, keep_files)
