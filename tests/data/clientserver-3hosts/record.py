"""Re-record the client/server fixture through iorig's own ServerBackend, so
its job files, log prefixes and output are exactly what production writes.

Three fio servers on 127.0.0.2-4 (ports 18791-18793), each in its own
working directory; an ad-hoc 4 KiB random-read plan (2 jobs, iodepth 4, 3 s,
16 MiB per host) prepared and run by ``ServerBackend``: the prefill once,
then the measured phase, whose working directory is kept here.

    .venv/bin/python tests/data/clientserver-3hosts/record.py [SCRATCH_DIR]

Needs fio (one build for client and servers) and a scratch directory that
supports O_DIRECT (/tmp on tmpfs does not).
"""

from __future__ import annotations

import contextlib
import shutil
import sys
from pathlib import Path

from iorig.fio import runner
from iorig.fio.hosts import HostAddress
from iorig.fio.server import FioServer
from iorig.model import PhaseKind
from iorig.run.backend import PhaseJob, RawPhase
from iorig.run.servers import ServerBackend
from iorig.scenario.adhoc import adhoc_source
from iorig.scenario.loading import resolve

HERE = Path(__file__).resolve().parent
KEEP = ("README.md", "record.py", "output-status-forwarded.json")


def _run(backend: ServerBackend, job: PhaseJob) -> RawPhase:
    raw = None
    for item in backend.run_phase(job):
        if isinstance(item, RawPhase):
            raw = item
    assert raw is not None
    return raw


def main(scratch: Path) -> None:
    shutil.rmtree(scratch, ignore_errors=True)
    scratch.mkdir(parents=True)
    fio = runner.find_fio()
    version = runner.fio_version(fio)
    hosts = [HostAddress(f"127.0.0.{2 + i}", 18791 + i) for i in range(3)]
    with contextlib.ExitStack() as stack:
        for i, host in enumerate(hosts):
            server = FioServer(fio, host, scratch / f"server-{i}", log_path=scratch / f"s{i}.log")
            stack.callback(server.stop)
            server.start()
        backend = ServerBackend(fio, version, hosts)
        source = adhoc_source("randread", name="cs", title="client/server fixture")
        overrides = {"bs": "4k", "iodepth": "4", "jobs": "2", "duration": "3s", "size": "16MiB"}
        resolved = resolve(source, None, overrides)
        plan = backend.prepare(resolved, {}, allow_destroy=False, repeats=1)
        stack.callback(backend.clean_up, plan, keep_files=False)
        for phase in plan.phases:
            workdir = scratch / phase.name
            workdir.mkdir()
            _run(backend, PhaseJob(plan, "fixture", phase, 0, workdir))
            if phase.kind is PhaseKind.MEASURE:
                measured = workdir
        for path in HERE.iterdir():
            if path.name not in KEEP:
                path.unlink()
        for path in measured.iterdir():
            if path.name == "fio-output.json":
                shutil.copy(path, HERE / "output.json")
            elif path.name == "fio-stderr.txt":
                shutil.copy(path, HERE / "client-stderr.txt")
            elif "_slat." not in path.name and "_lat." not in path.name:  # unused by iorig
                shutil.copy(path, HERE / path.name)
        (HERE / "hosts.txt").write_text("".join(f"{h.label}\n" for h in hosts))
    shutil.rmtree(scratch, ignore_errors=True)
    print("\n".join(sorted(p.name for p in HERE.iterdir())))


if __name__ == "__main__":
    main(Path(sys.argv[1] if len(sys.argv) > 1 else "/var/tmp/iorig-cs-fixture"))
