"""What a run command asks for, as one frozen ``RunRequest``, and the
ordered checks that turn a resolved scenario and a request into a plan on a
backend (``prepare``): the system-under-test description, events and their
grants, targets, hosts, the working directory's space, what killed runs
left, and the backend's own preparation. Every refusal comes before any
target file exists.

The command line builds the request once from the options every run
command shares (``cli/options.py``); tests build it directly.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from pydantic import ValidationError

from iorig.errors import UserError
from iorig.fio.hosts import MAX_HOSTS, HostSpec, parse_entry, parse_hosts, too_many_hosts
from iorig.machine.recovery import recover
from iorig.model.records import JOB_FILE_ORIGIN
from iorig.run import make_backend
from iorig.run.actions import check_events, parse_grants
from iorig.run.backend import PhaseBackend
from iorig.run.plan import Plan
from iorig.run.session import check_workdir_space
from iorig.scenario.events import EventSpec, parse_cli_event
from iorig.scenario.fiojobs import DATA_RULES
from iorig.scenario.loading import ResolvedScenario, ScenarioSource, parse_assignments
from iorig.scenario.schema import Phase
from iorig.scenario.sut import system_under_test
from iorig.store.files import refuse_own
from iorig.targets import bind_host_targets, bind_targets, written_path
from iorig.units import parse_rate
from iorig.untrusted import check_utf8_path, read_input


@dataclass(frozen=True)
class RunRequest:
    """A run command's shared options, as given: what changes in the
    scenario, where it runs, and what is kept with the run."""

    # what runs: changes to the scenario's parameters
    sets: tuple[str, ...] = ()  # --set name=value, and --name value
    size: str | None = None
    profile: str | None = None  # --quick is the profile "quick"
    workload: Mapping[str, str | int] = field(default_factory=dict)  # ad-hoc: --bs, --iodepth …
    # where, and how safely
    targets: tuple[str, ...] = ()
    hosts: tuple[HostSpec, ...] = ()
    allow_destroy: bool = False
    keep_files: bool = False
    fio: str | None = None
    repeats: int = 1
    data_rules: bool = False  # --iorig-data-rules: a fio job file with iorig's data rules
    min_bytes_per_s: float | None = None  # below it a size-based phase counts as hung
    events: tuple[str, ...] = ()  # --event PHASE@TIME=ACTION
    event_commands: tuple[str, ...] = ()  # --event-command NAME='COMMAND'
    command_files: tuple[Path, ...] = ()  # --allow-commands FILE
    # kept with the run
    label: str | None = None
    sut_file: Path | None = None
    notes: tuple[str, ...] = ()
    # watched: the address of a Prometheus endpoint with the live figures,
    # and how long at most it waits after the run for scrapers to get the last
    metrics: str | None = None
    metrics_linger_s: float = 30.0
    # the results database the run goes into: no target may be one of its files
    database: Path | None = None

    @property
    def quick(self) -> bool:
        return self.profile == "quick"

    def overrides(self, **instead: object) -> dict[str, str]:
        """The scenario's parameter overrides: ``--set`` items, then ``--size``
        and the ad-hoc options given; ``instead`` replaces an ad-hoc option
        (``None`` leaves it out)."""
        options = {"size": self.size, **self.workload, **instead}
        if self.data_rules:  # a fio job file's scenario has the parameter (check_data_rules)
            options[DATA_RULES] = "true"
        return collect_overrides(list(self.sets), **options)

    def check_data_rules(self, source: ScenarioSource) -> None:
        """``--iorig-data-rules`` is for a fio job file: iorig's own scenarios
        and ad-hoc runs always follow its data rules."""
        if self.data_rules and not source.origin.startswith(JOB_FILE_ORIGIN):
            raise UserError(
                "--iorig-data-rules applies to fio job files: iorig's own scenarios and "
                "ad-hoc runs always follow iorig's data rules",
                hint="leave it out, or give a fio job file (.fio)",
            )


def collect_overrides(items: list[str], **options: object) -> dict[str, str]:
    """``--set`` items plus the options that were given, as overrides. With a
    scenario, ``--duration 2s`` is ``--set duration=2s`` (the scenario must have
    the parameter; resolving says so when it does not)."""
    overrides = parse_assignments(items)
    for name, value in options.items():
        if value is None:
            continue
        if name in overrides:
            raise UserError(f"{name} is given twice (--{name.replace('_', '-')} and --set)")
        overrides[name] = str(value)
    return overrides


def host_list(hosts: str | None, hosts_file: Path | None) -> list[HostSpec]:
    """The hosts of --hosts and --hosts-file (empty: this machine)."""
    found: list[HostSpec] = []
    if hosts is not None:  # an empty --hosts is a mistake, not this machine
        found += parse_hosts(hosts)
    if hosts_file is not None:
        lines = read_input(hosts_file, "--hosts-file").splitlines()
        seen = set(found)
        for number, line in enumerate(lines, start=1):
            entry = line.split("#", 1)[0].strip()
            if not entry:
                continue
            if len(found) == MAX_HOSTS:
                raise too_many_hosts(f"{hosts_file} (with --hosts)" if hosts else str(hosts_file))
            try:
                host = parse_entry(entry)
            except UserError as exc:
                raise UserError(f"{hosts_file}:{number}: {exc.message}", hint=exc.hint) from None
            if host in seen:
                raise UserError(f"{hosts_file}:{number}: host {host.label} is listed twice")
            seen.add(host)
            found.append(host)
    return found


def parse_min_rate(text: str | None) -> float | None:
    """``--min-rate``: a positive rate, e.g. 1MiB/s."""
    if text is None:
        return None
    try:
        rate = parse_rate(text)
    except ValueError as exc:
        raise UserError(f"--min-rate: {exc}") from None
    if not math.isfinite(rate) or rate < 1:
        raise UserError(f"--min-rate: {text!r} is not a positive rate", hint="e.g. 1MiB/s")
    return rate


def with_events(resolved: ResolvedScenario, items: Sequence[str]) -> ResolvedScenario:
    """The scenario with ``--event`` items added to their phases."""
    if not items:
        return resolved
    scenario = resolved.scenario
    added: dict[str, list[EventSpec]] = {}
    for item in items:
        try:
            phase, spec = parse_cli_event(item)
        except ValueError as exc:
            raise UserError(str(exc).splitlines()[0]) from None
        if phase not in {p.name for p in scenario.phases}:
            names = ", ".join(p.name for p in scenario.phases)
            raise UserError(f"--event {item!r:.80}: no phase {phase!r} (phases: {names})")
        added.setdefault(phase, []).append(spec)
    phases = []
    for p in scenario.phases:
        try:
            phases.append(
                Phase.model_validate(
                    p.model_dump() | {"events": [*p.events, *added.get(p.name, [])]}
                )
            )
        except ValidationError as exc:
            problems = "; ".join(e["msg"].removeprefix("Value error, ") for e in exc.errors())
            raise UserError(f"--event for phase {p.name!r}: {problems}") from None
    return replace(resolved, scenario=scenario.model_copy(update={"phases": phases}))


def _keeps_state(resolved: ResolvedScenario) -> str | None:
    """The first enabled workload that saves or loads fio's write state."""
    for phase in resolved.scenario.phases:
        for w in phase.workloads:
            if phase.enabled and w.enabled and w.verify_state:
                return w.label
    return None


def check_not_own(
    resolved: ResolvedScenario, local: Mapping[str, str], database: Path | None
) -> None:
    """No target is one of iorig's own files (the results database, its
    sidecars, recovery files), nor a file set's directory holding the
    database: with --allow-destroy a run would write over the results."""
    if database is None:
        return
    for role, given in local.items():
        if not given:
            continue
        fileset = resolved.scenario.targets[role].fileset
        try:
            written = written_path(given, role=role, fileset=fileset)
        except OSError:  # a name too long, a loop of links: the target's checks say so
            continue
        refuse_own(written, database, f"target {role!r}:")
        db = Path(os.path.realpath(database))
        if fileset and Path(os.path.realpath(written)) in db.parents:
            raise UserError(
                f"target {role!r}: the file set's directory {written} holds the results "
                f"database {database}",
                hint="give the file set a directory of its own",
            )


def prepare(
    resolved: ResolvedScenario,
    request: RunRequest,
    *,
    on_note: Callable[[str], None] = lambda note: None,
    backend_for: Callable[[Sequence[HostSpec], str | None], PhaseBackend] = make_backend,
) -> tuple[Plan, PhaseBackend]:
    """The backend (this machine, or the fio servers of the request's hosts)
    and the plan it prepared on the bound targets. Everything the request
    could get wrong is refused before any target file exists; ``on_note``
    hears at once what killed runs had left and was put back."""
    described = system_under_test(resolved, request.sut_file, request.notes)
    resolved = with_events(resolved, request.events)
    grants = parse_grants(request.event_commands, request.command_files)
    roles = list(resolved.scenario.targets)
    hosts = list(request.hosts)
    if hosts and (keeps := _keeps_state(resolved)):
        # fio 3.33 saves a job's write state on the server but loads it from
        # the client: the check could never run (refused before any file exists)
        raise UserError(
            f"workload {keeps!r} checks exactly what was acknowledged (verify_state), which "
            "works on this machine only, not on fio servers",
            hint="run the scenario without --hosts",
        )
    targets = list(request.targets)
    local = {} if hosts else bind_targets(roles, targets)
    for path in local.values():
        check_utf8_path(path)
    check_not_own(resolved, local, request.database)
    check_events(resolved, grants, hosts, local)  # a command not granted: nothing runs
    check_workdir_space()  # before any target file exists
    backend = backend_for(hosts, request.fio)
    if hosts:
        bound = bind_host_targets(roles, targets, hosts)
        paths = {host.label: paths for host, paths in bound.items()}
    else:
        paths = {backend.hosts[0]: local}
    restored = recover()  # what killed runs left: caps put back, files removed (and said)
    for line in restored:
        on_note(line)
    plan = backend.prepare(
        resolved, paths, allow_destroy=request.allow_destroy, repeats=request.repeats
    )
    plan = replace(plan, event_grants=grants, sut=described, notes=plan.notes + tuple(restored))
    if request.min_bytes_per_s:
        plan = replace(plan, min_bytes_per_s=request.min_bytes_per_s)
    return plan, backend
