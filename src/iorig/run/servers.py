"""Many hosts, one answer: phases on several fio servers driven by one local
fio client (fio's own client/server mode).

What fio 3.33 does in client mode, and what iorig does about it (measured,
see tests/data/clientserver-3hosts/README.md):

* every host gets its own job file (its targets, its own log prefix
  ``<workload>.h<i>``: fio names client-mode logs by address only, so two
  servers on one address would overwrite each other's) with
  ``log_unix_epoch=1``: log timestamps are relative to each host's own start
  otherwise, and nothing else in the output says when a host started;
* ``client_stats`` names a host by the address given and its port; its
  "All clients" entry has no histogram and is never used — the aggregate is
  built from every host's bins;
* the exit code says nothing (0 with a refused host, 1 after a disconnect):
  a host without results in the output is a failed host, the others' data
  are kept and the phase fails naming it;
* client mode streams no status, so progress shows time only, the rates
  come at the end of the phase, and a steady-state warm-up is judged after
  the fact;
* ``--eta=always`` lets fio drop a server that stops answering; iorig's own
  deadline stops the client if it still hangs.

A host reached over SSH (fio/ssh.py) or an authenticated agent
(``tls://``, fio/tlsrelay.py) is a fio server like the others, behind a
Unix socket on this machine forwarded or relayed to it: its connection is
opened when the run is prepared and closed when it is cleaned up (or its
preparation fails), and fio's name for it (``h<i>.sock``) is mapped to the
host's own.
"""

from __future__ import annotations

import contextlib
import signal
import threading
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import asdict, replace
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

from iorig.errors import UserError
from iorig.fio import parse, ssh
from iorig.fio.control import ControlError, HostControl, JobsWatch
from iorig.fio.hostio import HostIo
from iorig.fio.hosts import Endpoint, HostAddress, HostSpec, SocketEndpoint, SshHost, TlsHost
from iorig.fio.jobfile import FileSetLayout, OptionValue, Section, render
from iorig.fio.protocol import ServerInfo, check_versions, local_protocol_version, server_versions
from iorig.fio.runner import FioExit, FioProcess
from iorig.machine.leftovers import stamp, temporary_directory
from iorig.machine.sysinfo import collect_fio, disclose
from iorig.model import Disclosure
from iorig.run.backend import HostLogs, PhaseJob, Progress, RawPhase
from iorig.run.hostlocks import HostLock, lock_hosts
from iorig.run.jobtext import fileset_layout, job_text
from iorig.run.live import HostIoMeter, HostIoWatch, HostJobShape
from iorig.run.plan import Plan, PlannedPhase, build_plan, phase_workloads
from iorig.run.preflight import preflight
from iorig.run.probe import probe_engine, probe_spot
from iorig.scenario.loading import ResolvedScenario
from iorig.scenario.schema import Scenario
from iorig.targets import Target, remote_target

if TYPE_CHECKING:
    from iorig.fio import tlsrelay

PROBE_TIMEOUT_S = 5.0
SLACK_S = 90.0  # fio drops a silent server after ~42 s; then iorig's deadline
CLEANUP_TIMEOUT_S = 60.0
# After Ctrl-C, what the data files' removal is given on hosts that answered
# the stop: a fio client's one tiny job takes 1.3-1.4 s on a quiet machine
# (fio 3.33 on loopback); 1 s never removed a file, so every Ctrl-C of a
# multi-host run left them behind
STOPPED_CLEANUP_TIMEOUT_S = 2.5
# After Ctrl-C the data files' removal ends this long after the stop at the
# latest, leaving the rest for storing and leaving (docs/guide/running.md): a
# hung host's client is killed 2 s in, then the healthy hosts' removal
STOP_BUDGET_S = 4.0
MIN_CLEANUP_S = 0.2  # less is no chance for a fio client to start
# A client asked to stop passes it to its server and gets the results back
# within a second; one whose server hangs heeds nothing but SIGKILL.
CLIENT_STOP = ((signal.SIGINT, 1.5), (signal.SIGTERM, 0.5), (signal.SIGKILL, 1.0))


class ServerBackend:
    """Phases on fio servers (``iorig agent``, or hosts over SSH), all hosts at once."""

    def __init__(self, fio: str, fio_version: str, hosts: Sequence[HostSpec]) -> None:
        self.fio = fio
        self.fio_version = fio_version
        self.specs = tuple(hosts)
        self._stop = threading.Event()  # a phase is asked to stop (Ctrl-C)
        self._hurry = threading.Event()  # and at once (a second Ctrl-C)
        self._stopped_at: float | None = None  # time.monotonic() of the first stop
        # hosts whose client got no answer to a stop request (a hung host or
        # device): after Ctrl-C their files are not waited for
        self._unanswered: set[str] = set()
        self._ssh: dict[str, ssh.SshConnection] = {}
        self._ssh_dir: Path | None = None
        self._agents: tlsrelay.AgentLinks | None = None
        self._locks: list[HostLock] = []  # the hosts' targets, held by them
        # the file sets phases used, to remove their files after the run (a
        # search plans phases as it goes: the plan does not list them all)
        self._filesets: dict[str, dict[FileSetLayout, int]] = {}

    @property
    def hosts(self) -> tuple[str, ...]:
        return tuple(h.label for h in self.specs)

    @property
    def addresses(self) -> tuple[Endpoint, ...]:
        """Where fio's client reaches each host: its agent, or (after
        ``connect``) the socket forwarded to it over SSH or relayed to it
        over TLS."""
        return tuple(self._endpoint(h) for h in self.specs)

    def _endpoint(self, spec: HostSpec) -> Endpoint:
        if isinstance(spec, HostAddress):
            return spec
        if isinstance(spec, TlsHost):
            assert self._agents is not None, "agents are connected before fio reaches them"
            return self._agents.endpoint(spec)
        endpoint = self._ssh[spec.label].endpoint if spec.label in self._ssh else None
        assert endpoint is not None, "SSH hosts are connected before fio reaches them"
        return endpoint

    @property
    def _names(self) -> dict[str, str]:
        """fio's name of each host reached through a socket -> the host's label."""
        return {
            _socket_name(i): spec.label
            for i, (spec, address) in enumerate(zip(self.specs, self.addresses, strict=True))
            if isinstance(address, SocketEndpoint)
        }

    def connect(self) -> None:
        """Open the SSH hosts' connections and the authenticated agents'
        relays (all or none; once)."""
        over_tls = [h for h in self.specs if isinstance(h, TlsHost)]
        if over_tls and self._agents is None:
            from iorig.fio import tlsrelay  # asyncio and ssl: for tls:// hosts only

            self._agents = tlsrelay.connect_agents(over_tls)
            stamp(self._agents.workdir)  # a killed run's is removed by the next run
        over_ssh = [h for h in self.specs if isinstance(h, SshHost)]
        if over_ssh and self._ssh_dir is None:
            with self._closed_on_failure():
                self._ssh_dir, self._ssh = ssh.connect_all(over_ssh)
                stamp(self._ssh_dir)

    def close(self, *, keep_files: bool = False) -> dict[str, str]:
        """Free the hosts' target locks, close the SSH hosts' connections
        (everything iorig started there stops and its directories go; kept
        with ``keep_files``: returned) and the agents' relays (an agent ends
        the jobs of a connection that closes)."""
        locks, self._locks = self._locks, []
        for held in locks:
            held.release()
        if self._agents is not None:
            agents, self._agents = self._agents, None
            agents.close()
        if self._ssh_dir is None:
            return {}
        workdir, connections, self._ssh_dir = self._ssh_dir, self._ssh, None
        return ssh.close_all(workdir, connections, keep_files=keep_files)

    def _jobs_started(self, host: HostSpec) -> float | None:
        return self.control(host).jobs_started()

    def _host_io(self, host: HostSpec) -> HostIo:
        return self.control(host).io()

    def _live_watch(self, job: PhaseJob, began_s: float) -> HostIoWatch:
        """Each host's I/O counters while ``job`` runs (run/live.py)."""
        shape = HostJobShape.of(job.phase)
        meters = {
            h.label: HostIoMeter(job.index, job.phase.name, h.label, shape, began_s)
            for h in self.specs
        }
        return HostIoWatch({h.label: partial(self._host_io, h) for h in self.specs}, meters)

    def control(self, host: HostSpec) -> HostControl | ssh.SshControl:
        """How a stop-host/start-host event reaches ``host``."""
        if isinstance(host, SshHost):
            if host.label not in self._ssh:
                raise UserError(f"{host.label} is not connected")
            return ssh.SshControl(self._ssh[host.label])
        if isinstance(host, TlsHost):
            if self._agents is None:
                raise UserError(f"{host.label} is not connected")
            return self._agents.control(host)
        return HostControl(host)

    # ------------------------------------------------------------ prepare

    def check_servers(self) -> dict[str, dict]:
        """Every host answers and runs exactly this fio; refuse before any I/O.
        Returns what each server told about itself, for the disclosure."""
        self.connect()
        try:
            protocol = local_protocol_version(self.fio, timeout_s=PROBE_TIMEOUT_S)
        except UserError:
            protocol = None
        endpoints = dict(zip(self.addresses, self.specs, strict=True))
        found = server_versions(self.fio, list(endpoints), PROBE_TIMEOUT_S, local_protocol=protocol)
        results = {endpoints[address]: result for address, result in found.items()}
        check_versions(self.fio_version, results, local_protocol=protocol)
        return {
            host.label: asdict(info)
            for host, info in results.items()
            if isinstance(info, ServerInfo)
        }

    @contextlib.contextmanager
    def _closed_on_failure(self) -> Iterator[None]:
        """Nothing started on a host outlives a failed preparation."""
        try:
            yield
        except BaseException:
            self.close()
            raise

    def prepare(
        self,
        resolved: ResolvedScenario,
        target_paths: Mapping[str, Mapping[str, str]],
        *,
        allow_destroy: bool,
        repeats: int,
    ) -> Plan:
        scenario = resolved.scenario
        with self._closed_on_failure():
            servers = self.check_servers()
            host_targets = {
                host: {
                    role: remote_target(
                        target_paths.get(host, {}).get(role),
                        host=host,
                        role=role,
                        size=spec.size,
                        size_explicit=resolved.size_is_explicit(role),
                        allow_destroy=allow_destroy,
                        fileset=spec.fileset,
                    )
                    for role, spec in scenario.targets.items()
                }
                for host in self.hosts
            }
            # before anything exists there: a target another run uses refuses this one
            self._locks, unlocked = lock_hosts(self.specs, host_targets, self._lock_one)
            if not allow_destroy:
                self._refuse_existing(host_targets, _fileset_names(scenario))
            self._lay_out(host_targets)
            engines: dict[tuple[str, bool], str] = {}
            for phase in scenario.phases:
                for w in phase_workloads(phase, scenario.targets):
                    key = (w.target, w.direct)
                    if w.engine == "auto" and key not in engines:
                        spots = {h: probe_spot(host_targets[h][w.target]) for h in self.hosts}
                        engines[key] = probe_engine(self, spots, direct=w.direct)
            plan = build_plan(
                resolved, host_targets[self.hosts[0]], engines, self.fio, self.fio_version, repeats
            )
            # The machine iorig runs on is only the client here: its facts are kept
            # apart, and what each server told about itself is all iorig knows of it.
            fio_facts = collect_fio(self.fio, self.fio_version, plan.engines)
            disclosure = Disclosure(
                {
                    "fio": fio_facts,
                    "servers": servers,
                    "client": dict(disclose([], fio_facts).sections),
                }
            )
            plan = replace(
                plan,
                hosts=self.specs,
                host_targets=host_targets,
                disclosure=disclosure,
                notes=plan.notes + tuple(unlocked),
            )
            preflight(self.fio, plan, self.host_jobs)
            return plan

    def _lock_one(self, spec: HostSpec, paths: list[str]) -> HostLock:
        if isinstance(spec, SshHost):
            return self._ssh[spec.label].lock(paths)
        return self.control(spec).lock(paths)

    def _refuse_existing(
        self, host_targets: Mapping[str, Mapping[str, Target]], filesets: Mapping[str, set[str]]
    ) -> None:
        """Refuse a relative target that already exists on its host: iorig
        did not create it (a file it made is removed after the run), and it
        cannot look inside it. Probed with a 4 KiB read that may not create
        the file (``allow_file_create=0``): a file that exists is read. A
        file set is probed by the first file of each of its sets."""
        texts = {
            host: render(
                {},
                [
                    probe
                    for role, t in targets.items()
                    for probe in (
                        [_exists_probe(role, t)]
                        if role not in filesets
                        else [_exists_probe(role, t, s) for s in sorted(filesets[role])]
                    )
                ],
            )
            for host, targets in host_targets.items()
        }
        done = self.run_jobs(texts, PROBE_TIMEOUT_S * 4)
        jobs = _jobs_of(done)
        found = [
            f"{host_targets[j.host][j.name.removeprefix('exists-')].path} on {j.host}"
            for j in jobs
            if j.host in host_targets
            and j.name.removeprefix("exists-") in host_targets[j.host]
            and any(d.ios for d in j.dirs.values())
        ]
        if found:
            raise UserError(
                f"refusing to overwrite {', '.join(found)}: the file exists already and iorig "
                "cannot tell what it holds (a file iorig made is removed after its run)",
                hint="remove it on the server, choose another --target, or pass --allow-destroy "
                "if it may be overwritten (also for a file kept with --keep-files)",
            )

    def _lay_out(self, host_targets: Mapping[str, Mapping[str, Target]]) -> None:
        """Give every remote data file its full size before the first phase.

        fio lays a file out again (deleting what it held) when a job needs it
        larger than it is: a database duplicated after its creation was
        zeroed. Laid out once at the target's size, no later job regrows it.
        Devices are left alone."""
        texts = {}
        for host, targets in host_targets.items():
            sections = [
                _layout(role, t)
                for role, t in targets.items()
                if not str(t.path).startswith("/dev/") and not t.fileset
            ]
            if sections:
                texts[host] = render({}, sections)
        if not texts:
            return
        done = self.run_jobs(texts, CLEANUP_TIMEOUT_S)
        jobs = _jobs_of(done)
        laid_out = {j.host for j in jobs if not j.error}
        failed = [
            h for h in texts if h not in laid_out or any(j.error for j in jobs if j.host == h)
        ]
        if failed:
            raise UserError(
                f"could not lay out the data files on {', '.join(failed)}: "
                f"{done.stderr.strip()[-300:] or 'no answer'}",
                hint="check free space and permissions in each server's working directory",
            )

    def run_jobs(
        self, texts: Mapping[str, str], timeout_s: float, *, read_only: bool = False
    ) -> FioExit:
        # --readonly is the client's own option and is not sent to servers: a
        # read-only probe is only read jobs
        return self._run_jobs(texts, timeout_s, self._hurry)

    def _run_jobs(
        self, texts: Mapping[str, str], timeout_s: float, hurry: threading.Event
    ) -> FioExit:
        with temporary_directory("iorig-hosts-") as tmp:
            clients = self._clients(tmp, texts)
            for _ in _run_all(clients.values(), threading.Event(), timeout_s, hurry):
                pass
            return _combined(clients, self._names)

    def _clients(self, workdir: Path, texts: Mapping[str, str]) -> dict[str, FioProcess]:
        """One fio client per host: a host that hangs holds up only its own
        client, which iorig can stop without losing the others' results."""
        clients = {}
        for i, (host, address) in enumerate(zip(self.specs, self.addresses, strict=True)):
            if host.label in texts:
                job = workdir / f"job-h{i}.fio"
                job.write_text(texts[host.label])
                clients[host.label] = FioProcess(
                    self.fio,
                    None,
                    workdir,
                    clients=((f"--client={_client_arg(workdir, i, address)}", job),),
                    tag=f"-h{i}",
                    stop_steps=CLIENT_STOP,
                )
        return clients

    # ------------------------------------------------------------ phases

    def host_jobs(self, plan: Plan, run_id: str, phase: PlannedPhase) -> dict[str, str]:
        """Each host's job text: its own targets and log prefix ``<workload>.h<i>``."""
        return {
            host.label: job_text(
                plan,
                run_id,
                phase,
                targets=plan.host_targets[host.label],
                log_suffix=f".h{i}",
                host=host.label,
            )
            for i, host in enumerate(self.specs)
        }

    def run_phase(self, job: PhaseJob) -> Iterator[Progress | RawPhase]:
        phase = job.phase
        texts = self.host_jobs(job.plan, job.run_id, phase)
        self._remember_filesets(job.plan, phase)
        clients = self._clients(job.workdir, texts)
        duration = phase.duration_s
        started = time.time()
        timeout_s = phase.timeout_s(SLACK_S, job.plan.min_bytes_per_s)
        # a phase's events count from when every host's jobs began (fio's client
        # takes a second or more to start them, longer on a busy machine)
        asks = [partial(self._jobs_started, h) for h in self.specs]
        jobs = JobsWatch(asks, started) if phase.events else None
        live = self._live_watch(job, started)  # its first reading, before the jobs start
        try:
            for elapsed in _run_all(clients.values(), self._stop, timeout_s, self._hurry):
                fraction = min(elapsed / duration, 1.0) if duration else None
                began = jobs.started_at if jobs is not None else started
                if began is not None:  # the live seconds count from it, as events do
                    live.begin(began)
                yield Progress(elapsed, fraction, None, began, tuple(live.take()))
        finally:
            live.close()
            if jobs is not None:
                jobs.close()
        yield RawPhase(
            started_at=started,
            ended_at=time.time(),
            job_text="\n".join(f"; ===== host {h}\n{t}" for h, t in texts.items()),
            command=_command(clients),
            exit=_combined(clients, self._names),
            logs=parse.read_logs(job.workdir),
            hosts=tuple(HostLogs(h.label, f".h{i}") for i, h in enumerate(self.specs)),
            wallclock_logs=True,
            exit_code_counts=False,  # 0 with a refused host: the hosts' results tell
            host_problems=_host_problems(clients),
        )
        self._unanswered |= _unanswered(clients)

    def begin_run(self, run_id: str, *, keep_files: bool) -> None:
        for held in self._locks:
            with contextlib.suppress(ControlError):  # the lock holds; only its name is missing
                held.name_run(run_id)

    def stop(self, *, at_once: bool = False) -> None:
        if self._stopped_at is None:
            self._stopped_at = time.monotonic()
        self._stop.set()
        if at_once:
            self._hurry.set()

    def clean_up(self, plan: Plan, *, keep_files: bool) -> list[str]:
        """Delete the data files iorig placed on the hosts, then close the
        SSH hosts' connections (their directories go with them, unless
        ``keep_files``: then where they are is among the warnings)."""
        try:
            problems = [] if keep_files else self._remove_files(plan)
        finally:
            kept = self.close(keep_files=keep_files)
        return problems + [
            f"{host}: the data files were kept (--keep-files) in {path}; remove the "
            "directory yourself when done"
            for host, path in kept.items()
        ]

    def _remember_filesets(self, plan: Plan, phase: PlannedPhase) -> None:
        """The file sets ``phase`` uses on each host and their most jobs (a
        set used by more jobs has more files), to remove after the run."""
        for host, targets in plan.host_targets.items():
            for w in phase.workloads:
                target = targets.get(w.spec.target)
                if target is None or not target.fileset:
                    continue
                if (layout := fileset_layout(w, target)) is not None:
                    mine = self._filesets.setdefault(host, {})
                    mine[layout] = max(mine.get(layout, 0), w.spec.jobs)

    def _remove_files(self, plan: Plan) -> list[str]:
        """Best effort, bounded: fio's ``unlink`` on a tiny read of each."""
        texts = {}
        for host, targets in plan.host_targets.items():
            sections = [
                _removal(role, t) for role, t in targets.items() if t.remove_after and not t.fileset
            ]
            sections += [
                _fileset_removal(layout, jobs, i)
                for i, (layout, jobs) in enumerate(self._filesets.get(host, {}).items())
            ]
            if sections:
                texts[host] = render({}, sections)
        if not texts:
            return []
        # best effort: the run's figures are stored already; after Ctrl-C a
        # host that does not answer at once is not waited for, and one that
        # did not answer the stop request is not asked at all
        stopped = self._stop.is_set()
        hung = sorted(self._unanswered & set(texts)) if stopped else []
        problems = [
            f"could not remove iorig's data file(s) on {host}: it did not answer the stop "
            "request; remove them in the agent's working directory yourself"
            for host in hung
        ]
        texts = {host: text for host, text in texts.items() if host not in hung}
        if not texts:
            return problems
        timeout_s = CLEANUP_TIMEOUT_S
        hurry = threading.Event()
        if stopped:
            hurry.set()
            since_s = time.monotonic() - (self._stopped_at or time.monotonic())
            timeout_s = min(STOPPED_CLEANUP_TIMEOUT_S, STOP_BUDGET_S - since_s)
            if timeout_s < MIN_CLEANUP_S:
                return problems + [
                    f"could not remove iorig's data file(s) on {host}: no time was left "
                    f"after the stop ({since_s:.1f} s of the {STOP_BUDGET_S:g} s a stopped run "
                    "gives it); remove them in the agent's working directory yourself"
                    for host in texts
                ]
        try:
            done = self._run_jobs(texts, timeout_s, hurry)
        except (OSError, UserError) as exc:
            return [*problems, f"could not remove the data files on the servers: {exc}"]
        removed = {j.host for j in _jobs_of(done) if not j.error}
        return problems + [
            f"could not remove iorig's data file(s) on {host}; remove them in the agent's "
            "working directory yourself"
            for host in texts
            if host not in removed
        ]


def _layout(role: str, target: Target) -> Section:
    """fio's setup only (``create_only``): the file at its full size, no I/O."""
    options = {
        "ioengine": "psync",
        "rw": "write",
        "bs": 4096,
        "filename": str(target.path),
        "size": target.size_bytes,
        "create_only": True,
    }
    return Section(f"layout-{role}", options)


def _exists_probe(role: str, target: Target, fileset: str | None = None) -> Section:
    """A 4 KiB read that fails instead of creating the file when it is absent
    (of a file set: its first job's first file)."""
    path = target.path
    if fileset is not None:
        path = path.parent / f"{path.name}.{fileset}.0.0"
    options = {
        "ioengine": "psync",
        "rw": "read",
        "bs": 4096,
        "size": 4096,
        "filename": str(path),
        "allow_file_create": False,
    }
    return Section(f"exists-{role}" + (f"-{fileset}" if fileset else ""), options)


def _fileset_names(scenario: Scenario) -> dict[str, set[str]]:
    """The sets of files each file-set target's workloads use, by role."""
    out: dict[str, set[str]] = {}
    for phase in scenario.phases:
        for w in phase.workloads:
            if w.fileset is not None:
                out.setdefault(w.target, set()).add(w.fileset)
    return out


def _fileset_removal(layout: FileSetLayout, jobs: int, index: int) -> Section:
    """One read of each job's first file with fio's ``unlink``, which removes
    every file of the job (never creating one that is not there)."""
    options: dict[str, OptionValue] = {
        "ioengine": "psync",
        "rw": "read",
        "bs": 4096,
        "directory": layout.directories,
        "filename_format": f"{layout.name}.$jobnum.$filenum",
        "nrfiles": layout.files,
        "filesize": layout.file_size,
        "size": layout.files * layout.file_size,
        "numjobs": jobs,
        "number_ios": 1,
        "allow_file_create": False,
        "unlink": True,
    }
    return Section(f"remove-set{index}", options)


def _removal(role: str, target: Target) -> Section:
    """A tiny read of the file with fio's ``unlink``: removes it on the server."""
    options = {
        "ioengine": "psync",
        "rw": "read",
        "bs": 4096,
        "size": 4096,
        "filename": str(target.path),
        "unlink": True,
    }
    return Section(f"remove-{role}", options)


def _run_all(
    clients: Iterable[FioProcess],
    cancel: threading.Event,
    timeout_s: float,
    hurry: threading.Event,
) -> Iterator[float]:
    """Run the clients side by side (a thread each); yield the seconds since
    their start about every quarter second until all have ended. Leaving
    early stops them all."""
    procs = list(clients)
    threads = [
        threading.Thread(target=p.run, args=(cancel, timeout_s, hurry), daemon=True) for p in procs
    ]
    started = time.monotonic()
    for t in threads:
        t.start()
    finished = False
    try:
        while any(t.is_alive() for t in threads):
            for t in threads:
                t.join(0.25 / len(threads))
            yield time.monotonic() - started
        finished = True
    finally:
        if not finished:  # the caller left early (an exception): no client outlives it
            for p in procs:
                p.request_stop()
        for t in threads:
            t.join()


def _jobs_of(done: FioExit) -> tuple[parse.JobStats, ...]:
    """The jobs of a short helper run (layout, probe, removal); none when fio
    wrote no result (the callers name the hosts that are missing)."""
    try:
        return parse.parse_final(done.output, names=done.host_names).jobs
    except parse.FioOutputError:
        return ()


def _command(clients: Mapping[str, FioProcess]) -> tuple[str, ...]:
    """The clients' command lines, as one (``;`` between hosts)."""
    out: list[str] = []
    for proc in clients.values():
        out += [*(["; "] if out else []), *proc.command]
    return tuple(out)


def _socket_name(i: int) -> str:
    return f"h{i}.sock"


def _client_arg(workdir: Path, i: int, address: Endpoint) -> str:
    """``fio --client=`` for host ``i``. fio names a client's logs after
    the address given, a socket's whole path included (its slashes then
    name directories that do not exist): a socket is given by a name in
    the client's working directory, a link to the private one."""
    if isinstance(address, HostAddress):
        return address.fio_client_arg()
    link = workdir / _socket_name(i)
    link.unlink(missing_ok=True)
    link.symlink_to(address.path)
    return f"sock:{link.name}"


def _combined(clients: Mapping[str, FioProcess], names: Mapping[str, str]) -> FioExit:
    """The clients' exits as one: every host's JSON document in turn (the
    parser merges their ``client_stats``), their error output in turn;
    ``names``: fio's name of a forwarded host -> its label."""
    exits = [p.exit for p in clients.values() if p.exit is not None]
    stops = {e.stopped_by for e in exits}
    return FioExit(
        returncode=next((e.returncode for e in exits if e.returncode), 0),
        output="\n".join(e.output for e in exits if e.output),
        stderr="".join(_error_text(host, p.exit) for host, p in clients.items() if p.exit),
        stopped_by=_stopped_by(stops),
        elapsed_s=max((e.elapsed_s for e in exits), default=0.0),
        host_names=dict(names),
    )


def _error_text(host: str, done: FioExit) -> str:
    """A client's error output and what its server printed (a verify failure
    on the server is in the client's output, beside the JSON)."""
    return done.stderr + parse.server_text(done.output, host)


def _stopped_by(stops: set[str | None]) -> str | None:
    """How a phase on several hosts was stopped: a timeout only when every
    host timed out (one host's timeout is that host's problem)."""
    if "cancel" in stops:
        return "cancel"
    if stops == {"timeout"}:
        return "timeout"
    return "request" if "request" in stops else None


def _unanswered(clients: Mapping[str, FioProcess]) -> set[str]:
    """Hosts whose client was asked to stop and got nothing back."""
    return {
        host
        for host, proc in clients.items()
        if proc.exit is not None
        and proc.exit.stopped_by == "cancel"
        and not parse.split_documents(proc.exit.output)
    }


def _host_problems(clients: Mapping[str, FioProcess]) -> dict[str, str]:
    """Why a host's client ended without its results, where iorig knows."""
    out = {}
    unanswered = _unanswered(clients)
    for host, proc in clients.items():
        done = proc.exit
        if done is None or done.stopped_by == "request":
            continue
        if done.stopped_by == "timeout":
            out[host] = f"it did not finish in time ({done.elapsed_s:.0f} s) and was stopped"
        elif host in unanswered:
            out[host] = "it did not answer the stop request in time (a hung host or device)"
        elif done.returncode < 0:
            out[host] = f"its fio client was killed by signal {-done.returncode}"
    return out
