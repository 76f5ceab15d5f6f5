"""Events performed: checks before a run (grants, hosts, throttles) and, per
phase, a thread that does each event at its time and undoes what is left
when the phase ends — a stopped host is resumed, a throttle removed, a
command still running after a grace period killed with its process group —
on every exit path.

User commands run only when the command line granted them by name
(``--event-command NAME='…'`` or ``--allow-commands FILE``): a scenario file
may name a command, never carry one.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from iorig.errors import UserError
from iorig.fio.control import ControlError, HostControl
from iorig.fio.hosts import HostAddress, HostSpec
from iorig.fio.ssh import SshControl
from iorig.machine import throttle, throttles
from iorig.model import EventAction, EventRecord, EventStatus, Finding
from iorig.run.plan import Plan, PlannedPhase
from iorig.scenario.events import Action, EventSpec
from iorig.scenario.loading import ResolvedScenario
from iorig.untrusted import read_input

OUTPUT_LIMIT = 64 << 10  # a command's output kept with the run
GRACE_S = 10.0  # a command still running when its phase ends gets this long
STOP_MARGIN_S = 60.0  # an agent resumes a stopped host by itself this long after the phase
# an event that began this much after its time is named: a quarter of the
# logged second it lands in, so the per-second figures place it elsewhere
EVENT_LATE_S = 0.25


# ------------------------------------------------------------ before the run


def parse_grants(items: Sequence[str], files: Sequence[Path]) -> dict[str, str]:
    """``NAME=COMMAND`` items and YAML files of ``NAME: COMMAND`` as one map."""
    grants: dict[str, str] = {}
    for path in files:
        text = read_input(path, "--allow-commands")
        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            raise UserError(f"--allow-commands {path}: {exc}") from None
        if not isinstance(data, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in data.items()
        ):
            raise UserError(
                f"--allow-commands {path}: expected a mapping of names to commands",
                hint="e.g.  fail-node: ssh node3 systemctl stop storage",
            )
        grants |= data
    for item in items:
        name, sep, command = item.partition("=")
        if not sep or not name.strip() or not command.strip():
            raise UserError(
                f"--event-command {item!r:.80}: expected NAME=COMMAND",
                hint="e.g. --event-command fail-node='ssh node3 systemctl stop storage'",
            )
        grants[name.strip()] = command.strip()
    return grants


def _events(resolved: ResolvedScenario) -> list[tuple[str, EventSpec, Action]]:
    return [(p.name, e, e.action) for p in resolved.scenario.phases if p.enabled for e in p.events]


def host_of(subject: str, hosts: Sequence[HostSpec]) -> HostSpec:
    """The host an event names: its number in --hosts (1, 2, …) or its label."""
    if subject.isdigit() and 1 <= int(subject) <= len(hosts):
        return hosts[int(subject) - 1]
    for host in hosts:
        if subject in host.aliases:
            return host
    known = ", ".join(f"{i} = {h.label}" for i, h in enumerate(hosts, 1)) or "none: no --hosts"
    raise UserError(f"event host {subject!r} is not one of the run's hosts ({known})")


def check_events(
    resolved: ResolvedScenario,
    grants: Mapping[str, str],
    hosts: Sequence[HostSpec],
    target_paths: Mapping[str, str],
) -> None:
    """Refuse, before anything runs, events that cannot happen: a command not
    granted, a host that is not in the run or whose agent does not answer, a
    throttle this machine cannot apply."""
    for phase, spec, action in _events(resolved):
        where = f"phase {phase!r}, event {spec.do!r} at {spec.at:g}s"
        try:
            if action.action is EventAction.COMMAND and action.subject not in grants:
                raise UserError(
                    f"{where}: the command {action.subject!r} was not granted; a scenario may "
                    "name a command, only the command line may allow it",
                    hint=f"pass --event-command {action.subject}='COMMAND' "
                    "or --allow-commands FILE",
                )
            if action.action in (EventAction.STOP_HOST, EventAction.START_HOST):
                if not hosts:
                    raise UserError(f"{where}: stopping a host needs a multi-host run (--hosts)")
                host = host_of(action.subject, hosts)
                if isinstance(host, HostAddress):  # over SSH, iorig's keeper answers
                    HostControl(host).ping()
            if action.action in (EventAction.THROTTLE, EventAction.UNTHROTTLE):
                if hosts:
                    raise UserError(f"{where}: throttles act on this machine's devices only")
                if action.subject not in target_paths:
                    raise UserError(f"{where}: the scenario has no target {action.subject!r}")
                if (why := throttle.problem()) is not None:
                    raise UserError(f"{where}: {why}")
                throttle.device_of(action.subject, Path(target_paths[action.subject]))
        except ControlError as exc:
            raise UserError(
                f"{where}: {exc}",
                hint="start the host's fio server with "
                "`iorig agent` (its control port is the fio port + 1)",
            ) from None


# ------------------------------------------------------------ during a phase


@dataclass
class _Command:
    spec: EventSpec
    name: str
    line: str
    proc: subprocess.Popen
    output: object  # the temporary file its output goes to
    started: float
    thread: threading.Thread | None = None
    killed: str = ""


@dataclass
class PhaseEvents:
    """Performs a phase's events, each ``at`` seconds after the phase's jobs
    began I/O (``begin``: the backend tells when it knows; fio takes from
    milliseconds to seconds after its launch, on fio servers more, and an
    event counted from the launch left too few seconds before it for a
    baseline). ``records`` and ``pauses`` (host -> stopped intervals, unix
    seconds) are complete after ``__exit__``."""

    plan: Plan
    phase: PlannedPhase
    grants: Mapping[str, str] = field(default_factory=dict)
    # a command's $IORIG_TRIGGER: the file that makes fio save what its writers
    # had acknowledged, and stop (a fault that may lose writes in flight touches it first)
    trigger: Path | None = None
    records: list[EventRecord] = field(default_factory=list)
    pauses: dict[str, list[tuple[float, float]]] = field(default_factory=dict)
    origin: float = 0.0  # when the jobs began I/O, once ``begin`` told
    _done: threading.Event = field(default_factory=threading.Event)
    _begun: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None
    # how a stop-host/start-host reaches a host (the backend's connection to it)
    controls: Callable[[HostSpec], HostControl | SshControl] = HostControl  # type: ignore[assignment]
    _stopped: dict[str, tuple[HostControl | SshControl, float]] = field(default_factory=dict)
    _throttled: dict[str, str] = field(default_factory=dict)  # role -> major:minor
    _caps_before: dict[str, dict[str, int]] = field(default_factory=dict)  # major:minor -> caps
    _applied: dict[str, dict[str, int]] = field(default_factory=dict)  # major:minor -> iorig's
    _commands: list[_Command] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __enter__(self) -> PhaseEvents:
        if self.phase.events:
            self._thread = threading.Thread(target=self._run, daemon=True)
            self._thread.start()
        return self

    def begin(self, io_started_at: float) -> None:
        """The jobs began I/O at ``io_started_at`` (unix seconds): the events'
        clock starts there (the first call counts)."""
        if not self._begun.is_set():
            self.origin = io_started_at
            self._begun.set()

    def __exit__(self, *exc: object) -> None:
        self._done.set()
        if self._thread is not None:
            self._thread.join()
        self._undo()
        self.records.sort(key=lambda r: (r.at_s, r.started_at))

    def so_far(self) -> tuple[EventRecord, ...]:
        """The events done so far, in the order they were done."""
        with self._lock:
            return tuple(self.records)

    def findings(self, series_origin: float | None = None) -> list[Finding]:
        """Events that failed, as warnings of the run, and events that began
        off their time, as notes. Off time on the phase's stored series
        (``series_origin``: its second 0, from the jobs' own logs) where it
        is known, the clock its impact is read on: the events count from
        the jobs' start as told while they ran (the status's clock, or
        when the hosts' job processes began), which can lie before the
        jobs' first I/O on a busy host, so an event can be early on it."""
        origin = self.origin if series_origin is None else series_origin
        failed = [
            Finding(
                "event",
                f"event '{r.label}' at {r.at_s:g}s failed: {r.detail}",
                "its impact figures describe a fault that may not have happened",
                self.phase.name,
            )
            for r in self.records
            if r.status is EventStatus.FAILED
        ]
        off = [
            _off_time(r, off_s, self.phase.name)
            for r in self.records
            if r.status is EventStatus.DONE
            and abs(off_s := r.started_at - (origin + r.at_s)) > EVENT_LATE_S
        ]
        return failed + off

    def _run(self) -> None:
        while not (self._begun.is_set() or self._done.is_set()):
            self._done.wait(0.05)
        for spec in sorted(self.phase.events, key=lambda e: e.at):
            if not self._begun.is_set():
                self._add(spec, EventStatus.SKIPPED, 0.0, "the phase ended before its jobs began")
                continue
            if self._done.wait(max(0.0, self.origin + spec.at - time.time())):
                self._add(spec, EventStatus.SKIPPED, 0.0, "the phase ended before its time")
                continue
            began = time.time()
            try:
                detail = self._perform(spec, spec.action, began)
            except (ControlError, UserError, OSError) as exc:
                self._add(spec, EventStatus.FAILED, began, str(exc))
                continue
            if detail is not None:
                self._add(spec, EventStatus.DONE, began, detail)

    def _add(
        self,
        spec: EventSpec,
        status: EventStatus,
        began: float,
        detail: str,
        ended_at: float | None = None,
        **more: object,
    ) -> None:
        action = spec.action
        ended = ended_at if ended_at is not None else (time.time() if began else 0.0)
        with self._lock:
            self.records.append(
                EventRecord(
                    at_s=spec.at,
                    action=action.action,
                    argument=action.argument,
                    status=status,
                    started_at=began,
                    ended_at=ended,
                    detail=detail,
                    **more,  # type: ignore[arg-type]
                )
            )

    def _perform(self, spec: EventSpec, action: Action, began: float) -> str | None:
        """Do one event; its detail, or None when it is recorded later (commands)."""
        kind = action.action
        if kind is EventAction.MARK:
            return ""
        if kind is EventAction.STOP_HOST:
            host = host_of(action.subject, self.plan.hosts)
            control = self.controls(host)
            max_s = (self.phase.duration_s or 0) - spec.at + STOP_MARGIN_S
            answer = control.stop(max_s)
            self._stopped[host.label] = (control, began)
            return answer
        if kind is EventAction.START_HOST:
            host = host_of(action.subject, self.plan.hosts)
            if host.label not in self._stopped:
                raise UserError(f"{host.label} was not stopped (its stop-host failed)")
            control, since = self._stopped.pop(host.label)
            answer = control.resume()
            self.pauses.setdefault(host.label, []).append((since, time.time()))
            return answer
        if kind is EventAction.THROTTLE:
            target = self.plan.targets[action.subject]
            majmin = throttle.device_of(action.subject, target.path)
            applied = throttle.caps(iops=action.iops, bytes_per_s=action.bytes_per_s)
            throttles.begin(majmin, applied)  # outlives a killed run: written before the cap
            try:
                before = throttle.apply(majmin, iops=action.iops, bytes_per_s=action.bytes_per_s)
            except OSError:  # the device has what it had: so says its record
                if majmin in self._applied:
                    throttles.begin(majmin, self._applied[majmin])
                else:
                    throttles.end(majmin)
                raise
            self._caps_before.setdefault(majmin, before)  # the first throttle saw the owner's
            self._applied[majmin] = applied
            self._throttled[action.subject] = majmin
            return f"device {majmin} capped"
        if kind is EventAction.UNTHROTTLE:
            if action.subject not in self._throttled:
                raise UserError(f"{action.subject} was not throttled (its throttle failed)")
            majmin = self._throttled.pop(action.subject)
            sharing = sorted(r for r, m in self._throttled.items() if m == majmin)
            if sharing:  # the cap is the device's: it stays until its last role is lifted
                return f"device {majmin} stays capped for {', '.join(sharing)}"
            before = self._caps_before.pop(majmin)
            self._applied.pop(majmin, None)
            throttle.restore(majmin, before)
            throttles.end(majmin)
            kept = ", ".join(f"{name} {value}" for name, value in before.items() if value)
            return f"device {majmin} uncapped" + (f" (its own caps back: {kept})" if kept else "")
        line = self.grants[action.subject]
        output = tempfile.TemporaryFile()  # noqa: SIM115 - closed when the command is recorded
        proc = subprocess.Popen(
            ["/bin/sh", "-c", line],
            stdin=subprocess.DEVNULL,
            stdout=output,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env=self._environment(),
        )
        command = _Command(spec, action.subject, line, proc, output, began)
        command.thread = threading.Thread(target=self._await, args=(command,), daemon=True)
        self._commands.append(command)
        command.thread.start()
        return None

    def _environment(self) -> dict[str, str]:
        env = dict(os.environ)
        env.pop("IORIG_TRIGGER", None)
        if self.trigger is not None:
            env["IORIG_TRIGGER"] = str(self.trigger)
        return env

    def _await(self, command: _Command) -> None:
        """Record a command once it has exited (by itself or killed)."""
        code = command.proc.wait()
        ended = time.time()
        code = 128 - code if code < 0 else code  # killed by a signal: as the shell says it
        detail = "\n".join(filter(None, [_output(command.output), command.killed]))
        self._add(
            command.spec,
            EventStatus.DONE if code == 0 else EventStatus.FAILED,
            command.started,
            detail,
            exit_code=code,
            command=command.line,
            ended_at=ended,
        )

    def _undo(self) -> None:
        """What the phase's events left in place, put back."""
        for label, (control, since) in list(self._stopped.items()):
            with contextlib.suppress(ControlError):
                control.resume()
            self.pauses.setdefault(label, []).append((since, time.time()))
        self._stopped.clear()
        for majmin, before in self._caps_before.items():
            with contextlib.suppress(OSError):  # its record stays: the next run restores it
                throttle.restore(majmin, before)
                throttles.end(majmin)
        self._caps_before.clear()
        self._applied.clear()
        self._throttled.clear()
        deadline = time.time() + GRACE_S
        for command in self._commands:
            assert command.thread is not None
            command.thread.join(max(0.0, deadline - time.time()))
            if command.thread.is_alive():
                command.killed = f"(killed: still running {GRACE_S:g} s after its phase ended)"
                for sig in (signal.SIGTERM, signal.SIGKILL):
                    with contextlib.suppress(ProcessLookupError, PermissionError):
                        os.killpg(command.proc.pid, sig)
                    command.thread.join(1.0)
                    if not command.thread.is_alive():
                        break
        self._commands.clear()


def _output(handle: object) -> str:
    with contextlib.closing(handle):  # type: ignore[type-var]
        handle.seek(0)  # type: ignore[attr-defined]
        data = handle.read(OUTPUT_LIMIT + 1)  # type: ignore[attr-defined]
    text = data.decode("utf-8", "replace")
    return text[:OUTPUT_LIMIT] + ("\n… (cut at 64 KiB)" if len(data) > OUTPUT_LIMIT else "")


def _off_time(record: EventRecord, off_s: float, phase: str) -> Finding:
    """A note that ``record`` began ``off_s`` seconds after (or, negative,
    before) its time on the phase's series."""
    if off_s > 0:
        return Finding(
            "event-late",
            f"event '{record.label}' at {record.at_s:g}s began {off_s:.2f} s late, at "
            f"{record.at_s + off_s:.2f}s of the jobs' I/O (this machine was busy)",
            "its impact is measured from when it happened; keep the machine "
            "that drives the run free of other work",
            phase,
            severity="info",
        )
    return Finding(
        "event-early",
        f"event '{record.label}' at {record.at_s:g}s began {-off_s:.2f} s early, at "
        f"{record.at_s + off_s:.2f}s of the jobs' I/O (their I/O began after "
        "iorig was told they had started)",
        "its impact is measured from when it happened; a host slow to start its "
        "jobs' I/O (a busy machine, a long file layout) delays the series' second 0",
        phase,
        severity="info",
    )
