"""Where phases run: the one interface every backend implements.

A backend prepares a plan (the checks that touch its machines: fio, targets,
engines, what it can disclose), runs one phase at a time yielding progress
and finally what fio brought back (``RawPhase``), stops on request, and
cleans up its targets. This machine (``LocalBackend``) and fio servers
(``ServerBackend``) are the two today; Kubernetes pods or SSH-started servers
would be one more file each. ``RunSession`` drives any of them, and the one
collection step (``collect.py``) turns what any of them brings back into
results.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from iorig.fio.control import HostControl
from iorig.fio.hosts import HostSpec
from iorig.fio.runner import FioExit
from iorig.fio.ssh import SshControl
from iorig.fio.status import LiveRates
from iorig.model import GeneratorCpu, SteadyState
from iorig.model.live import LiveSecond
from iorig.run.jobtext import state_role
from iorig.run.plan import Plan, PlannedPhase
from iorig.scenario.loading import ResolvedScenario


@dataclass(frozen=True)
class Progress:
    """How a running phase is doing."""

    elapsed_s: float
    fraction: float | None  # 0..1 when the phase's length is known
    rates: LiveRates | None  # None where fio streams no status (its client mode)
    # unix seconds when the phase's jobs began I/O, once the backend knows
    # (the phase's events count from it); the launch where it cannot tell
    io_started_at: float | None = None
    # the live seconds read since the last progress (model/live.py, run/live.py)
    live: tuple[LiveSecond, ...] = ()
    rule: str | None = None  # the phase's stop rule's state, in words, where it runs live


@dataclass(frozen=True)
class HostLogs:
    """How one host shows up in fio's output and logs: ``label`` is how fio's
    JSON names its jobs (``local``, or ``address:port`` of a fio server) and
    how the results name it; every log of its workload ``w`` has the prefix
    ``w + log_suffix``."""

    label: str
    log_suffix: str = ""


@dataclass(frozen=True)
class RawPhase:
    """What a backend brings back from one phase, as fio wrote it."""

    started_at: float  # unix seconds
    ended_at: float
    job_text: str
    command: tuple[str, ...]
    exit: FioExit
    # parse.read_logs of fio's working directory: (prefix, suffix) -> job -> kind -> rows
    logs: Mapping[tuple[str, str | None], Mapping[int, Mapping[str, list[Any]]]]
    hosts: tuple[HostLogs, ...]
    # log times are unix epoch ms (log_unix_epoch, as both backends run fio),
    # the phase's jobs and hosts aligned on them; False for recordings whose
    # logs count from each job's own start
    wallclock_logs: bool
    exit_code_counts: bool  # a non-zero exit means failure (not so for fio's client)
    steady: SteadyState | None = None  # judged live, when the backend could
    # why a host brought nothing back, where the backend knows (host -> reason)
    host_problems: Mapping[str, str] = field(default_factory=dict)
    problem: str | None = None  # what else failed the phase (e.g. a target replaced)
    # unix seconds when fio's jobs began I/O, where fio's live status told
    # (this machine): second 0 where no job logged a time to read it from
    io_started_at: float | None = None
    # fio's CPU as measured from /proc while it ran (this machine); None where
    # the backend cannot see fio's processes (fio servers)
    generator_cpu: GeneratorCpu | None = None
    # a live rule that read fio's logged seconds stopped fio after this many:
    # the series keeps exactly those, the seconds the stop was judged on
    stopped_after_s: int | None = None


TRIGGER = "trigger"  # in a run's state directory: fio saves its write states at once


@dataclass(frozen=True)
class PhaseJob:
    """One phase to run, with the run's context."""

    plan: Plan
    run_id: str
    phase: PlannedPhase
    repeat: int
    workdir: Path  # fresh and empty, for job files, fio's output and logs
    # The run's one directory for what outlives a phase: fio's saved write
    # states (``verify_state``), from the phase that writes to the verify phase
    # that checks, and the trigger file that makes fio save them at once.
    # Removed with the run's working directory; None: no states kept.
    state_dir: Path | None = None
    index: int = 0  # the phase's place among the run's phases, from 0

    @property
    def trigger(self) -> Path | None:
        """The file that makes this phase's fio save its write states at once
        and stop (fio's ``--trigger-file``); None when it saves none."""
        saves = any(state_role(self.phase, w) == "save" for w in self.phase.workloads)
        return self.state_dir / TRIGGER if saves and self.state_dir is not None else None


class PhaseBackend(Protocol):
    """Runs a plan's phases somewhere."""

    @property
    def hosts(self) -> Sequence[str]:
        """The hosts' labels, as results name them."""
        ...

    def prepare(
        self,
        resolved: ResolvedScenario,
        target_paths: Mapping[str, Mapping[str, str]],
        *,
        allow_destroy: bool,
        repeats: int,
    ) -> Plan:
        """Check fio and the targets (``target_paths``: host -> role -> path)
        and build the plan; raise UserError before anything is written."""
        ...

    def begin_run(self, run_id: str, *, keep_files: bool) -> None:
        """The run begins (after ``prepare``): its id, which the locks on its
        targets name from now on (another run refused there is told which),
        and whether what it lays out is kept after it."""
        ...

    def run_phase(self, job: PhaseJob) -> Iterator[Progress | RawPhase]:
        """Run one phase: progress while it runs, the raw result last."""
        ...

    def run_jobs(
        self, texts: Mapping[str, str], timeout_s: float, *, read_only: bool = False
    ) -> FioExit:
        """Run one small job file per host (label -> job text) at once and
        wait for it: the engine probe and the null-engine ceiling."""
        ...

    def stop(self, *, at_once: bool = False) -> None:
        """Ask the running phase to stop (it still brings back what it
        measured); no phase starts after this. ``at_once`` (a second
        Ctrl-C): kill fio now, whatever it has not written yet."""
        ...

    def clean_up(self, plan: Plan, *, keep_files: bool) -> list[str]:
        """Release the plan's targets (remove what iorig created unless
        ``keep_files``), then their locks and what the backend holds open
        (connections to hosts). Never raises or hangs for a cleanup problem: what could not
        be done comes back as warnings."""
        ...

    def control(self, host: HostSpec) -> HostControl | SshControl:
        """How a ``stop-host``/``start-host`` event reaches ``host`` (a host
        of the plan); UserError where hosts cannot be stopped."""
        ...
