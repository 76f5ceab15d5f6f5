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
"""

from __future__ import annotations

import contextlib
import tempfile
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import asdict, replace
from pathlib import Path

from iorig.errors import UserError
from iorig.fio import parse
from iorig.fio.hosts import HostAddress
from iorig.fio.jobfile import Section, render
from iorig.fio.protocol import ServerInfo, check_versions, local_protocol_version, server_versions
from iorig.fio.runner import FioExit, FioProcess
from iorig.model import Disclosure
from iorig.plan import Plan, PlannedPhase, build_plan, phase_workloads
from iorig.run.backend import HostLogs, PhaseJob, Progress, RawPhase
from iorig.run.jobtext import job_text
from iorig.run.preflight import preflight
from iorig.run.probe import probe_engine, probe_spot
from iorig.scenario import ResolvedScenario
from iorig.sysinfo import collect_fio, disclose
from iorig.targets import Target, remote_target

PROBE_TIMEOUT_S = 5.0
SLACK_S = 90.0  # fio drops a silent server after ~42 s; then iorig's deadline
CLEANUP_TIMEOUT_S = 60.0


class ServerBackend:
    """Phases on fio servers (``iorig agent``), all hosts at once."""

    def __init__(self, fio: str, fio_version: str, hosts: Sequence[HostAddress]) -> None:
        self.fio = fio
        self.fio_version = fio_version
        self.addresses = tuple(hosts)
        self._stop = threading.Event()

    @property
    def hosts(self) -> tuple[str, ...]:
        return tuple(h.label for h in self.addresses)

    # ------------------------------------------------------------ prepare

    def check_servers(self) -> dict[str, dict]:
        """Every host answers and runs exactly this fio; refuse before any I/O.
        Returns what each server told about itself, for the disclosure."""
        try:
            protocol = local_protocol_version(self.fio, timeout_s=PROBE_TIMEOUT_S)
        except UserError:
            protocol = None
        results = server_versions(self.fio, self.addresses, PROBE_TIMEOUT_S,
                                  local_protocol=protocol)  # fmt: skip
        check_versions(self.fio_version, results, local_protocol=protocol)
        return {
            host.label: asdict(info)
            for host, info in results.items()
            if isinstance(info, ServerInfo)
        }

    def prepare(
        self,
        resolved: ResolvedScenario,
        target_paths: Mapping[str, Mapping[str, str]],
        *,
        allow_destroy: bool,
        repeats: int,
    ) -> Plan:
        scenario = resolved.scenario
        if any(spec.fileset for spec in scenario.targets.values()):
            raise UserError(
                f"scenario {scenario.name!r} works on file sets, which iorig runs on this "
                "machine only (fio's servers cannot make the directories)",
                hint="run it on each host, or drop --hosts",
            )
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
                )
                for role, spec in scenario.targets.items()
            }
            for host in self.hosts
        }
        self._lay_out(host_targets)
        engines: dict[tuple[str, bool], str] = {}
        for phase in scenario.phases:
            for w in phase_workloads(phase, scenario.targets):
                key = (w.target, w.direct)
                if w.engine == "auto" and key not in engines:
                    spots = {h: probe_spot(host_targets[h][w.target]) for h in self.hosts}
                    engines[key] = probe_engine(self, spots, direct=w.direct)
        plan = build_plan(resolved, host_targets[self.hosts[0]], engines, self.fio,
                          self.fio_version, repeats)  # fmt: skip
        # The machine iorig runs on is only the client here: its facts are kept
        # apart, and what each server told about itself is all iorig knows of it.
        fio_facts = collect_fio(self.fio, self.fio_version, plan.engines)
        disclosure = Disclosure(
            {"fio": fio_facts, "servers": servers, "client": dict(disclose([], fio_facts).sections)}
        )
        plan = replace(plan, hosts=self.addresses, host_targets=host_targets,
                       disclosure=disclosure)  # fmt: skip
        preflight(self.fio, plan, self.host_jobs)
        return plan

    def _lay_out(self, host_targets: Mapping[str, Mapping[str, Target]]) -> None:
        """Give every remote data file its full size before the first phase.

        fio lays a file out again (deleting what it held) when a job needs it
        larger than it is: a database duplicated after its creation was
        zeroed. Laid out once at the target's size, no later job regrows it.
        Devices are left alone."""
        texts = {}
        for host, targets in host_targets.items():
            sections = [_layout(role, t) for role, t in targets.items()
                        if not str(t.path).startswith("/dev/")]  # fmt: skip
            if sections:
                texts[host] = render({}, sections)
        if not texts:
            return
        done = self.run_jobs(texts, CLEANUP_TIMEOUT_S)
        try:
            jobs = parse.parse_final(done.output).jobs
        except parse.FioOutputError:
            jobs = ()
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
        with tempfile.TemporaryDirectory(prefix="iorig-hosts-") as tmp:
            return self._client(Path(tmp), texts).run(timeout_s=timeout_s)

    def _client(self, workdir: Path, texts: Mapping[str, str]) -> FioProcess:
        clients = []
        for i, host in enumerate(self.addresses):
            if host.label in texts:
                job = workdir / f"job-h{i}.fio"
                job.write_text(texts[host.label])
                clients.append((f"--client={host.fio_client_arg()}", job))
        return FioProcess(self.fio, None, workdir, clients=tuple(clients))

    # ------------------------------------------------------------ phases

    def host_jobs(self, plan: Plan, run_id: str, phase: PlannedPhase) -> dict[str, str]:
        """Each host's job text: its own targets and log prefix ``<workload>.h<i>``."""
        return {
            host.label: job_text(plan, run_id, phase, targets=plan.host_targets[host.label],
                                 log_suffix=f".h{i}", host=host.label)
            for i, host in enumerate(self.addresses)
        }  # fmt: skip

    def run_phase(self, job: PhaseJob) -> Iterator[Progress | RawPhase]:
        phase = job.phase
        texts = self.host_jobs(job.plan, job.run_id, phase)
        proc = self._client(job.workdir, texts)
        duration = phase.duration_s
        started = time.time()
        for elapsed in proc.ticks(self._stop, phase.timeout_s(SLACK_S)):
            yield Progress(elapsed, min(elapsed / duration, 1.0) if duration else None, None)
        assert proc.exit is not None
        yield RawPhase(
            started_at=started,
            ended_at=time.time(),
            job_text="\n".join(f"; ===== host {h}\n{t}" for h, t in texts.items()),
            command=proc.command,
            exit=proc.exit,
            logs=parse.read_logs(job.workdir),
            hosts=tuple(HostLogs(h.label, f".h{i}") for i, h in enumerate(self.addresses)),
            wallclock_logs=True,
            exit_code_counts=False,  # 0 with a refused host: the hosts' results tell
        )

    def stop(self) -> None:
        self._stop.set()

    def clean_up(self, plan: Plan, *, keep_files: bool) -> None:
        """Delete the data files iorig placed in the servers' working
        directories (best effort, bounded: fio's ``unlink`` on a tiny read of
        each)."""
        if keep_files:
            return
        texts = {}
        for host, targets in plan.host_targets.items():
            sections = [_removal(role, t) for role, t in targets.items() if t.remove_after]
            if sections:
                texts[host] = render({}, sections)
        if texts:  # best effort: the run's figures are stored already
            with contextlib.suppress(OSError, UserError):
                self.run_jobs(texts, CLEANUP_TIMEOUT_S)


def _layout(role: str, target: Target) -> Section:
    """fio's setup only (``create_only``): the file at its full size, no I/O."""
    options = {"ioengine": "psync", "rw": "write", "bs": 4096, "filename": str(target.path),
               "size": target.size_bytes, "create_only": True}  # fmt: skip
    return Section(f"layout-{role}", options)


def _removal(role: str, target: Target) -> Section:
    """A tiny read of the file with fio's ``unlink``: removes it on the server."""
    options = {"ioengine": "psync", "rw": "read", "bs": 4096, "size": 4096,
               "filename": str(target.path), "unlink": True}  # fmt: skip
    return Section(f"remove-{role}", options)
