"""Which fio engine can do I/O at a target: the one probe for every backend.

For each candidate engine, a tiny job per host (a few 4 KiB reads of a block
device, read-only; or a 1 MiB scratch file beside a file target, written,
read and unlinked) runs through the backend's own way of running fio; the
first engine that did I/O on every host wins.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from iorig.errors import UserError
from iorig.fio import parse
from iorig.fio.jobfile import Section, render
from iorig.fio.runner import FioExit
from iorig.run.collect import tail
from iorig.targets import Target

ENGINE_ORDER = ("io_uring", "libaio", "psync")
PROBE_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class ProbeSpot:
    path: str  # what fio opens
    read_only: bool  # a block device: only read, never written


def probe_spot(target: Target) -> ProbeSpot:
    if target.kind == "block":
        return ProbeSpot(str(target.path), True)
    if target.kind == "fileset":
        return ProbeSpot(str(Path(target.path) / ".iorig-probe"), False)
    return ProbeSpot(f"{target.path}.iorig-probe", False)


def spot_in(location: Path, *, block_device: bool) -> ProbeSpot:
    """A spot for a directory or device that is not a planned target (doctor)."""
    if block_device:
        return ProbeSpot(str(location), True)
    return ProbeSpot(str(location / ".iorig-probe"), False)


class JobRunner(Protocol):
    def run_jobs(
        self, texts: Mapping[str, str], timeout_s: float, *, read_only: bool = False
    ) -> FioExit:
        """Run one job file per host (label -> job text) at once; ``read_only``:
        with fio's ``--readonly`` where the runner can give it."""
        ...


def probe_job(engine: str, spot: ProbeSpot, direct: bool) -> str:
    options: dict = {
        "ioengine": engine,
        "filename": spot.path,
        "bs": 4096,
        "size": 1 << 20,
        "io_size": 64 << 10,
        "direct": direct,
    }
    # a device is only read (fio's --readonly on the command line, where the
    # runner can give it); a scratch file is written, read and unlinked
    options |= {"rw": "read"} if spot.read_only else {"rw": "rw", "unlink": True}
    return render({}, [Section("probe", options)])


def _outcome(done: FioExit, hosts: list[str]) -> dict[str, str | None]:
    """Per host: None when it did I/O, else why not."""
    try:
        default = hosts[0] if len(hosts) == 1 else "local"
        output = parse.parse_final(done.output, default, done.host_names)
    except parse.FioOutputError:
        why = tail(done.stderr, 1) or done.stopped_by or f"exit code {done.returncode}"
        return dict.fromkeys(hosts, why)
    out: dict[str, str | None] = {}
    for host in hosts:
        jobs = [j for j in output.jobs if j.host == host]
        if any(not j.error and any(d.ios for d in j.dirs.values()) for j in jobs):
            out[host] = None
        elif jobs and jobs[0].error:
            out[host] = f"error {jobs[0].error}" + (
                f" ({t})" if (t := tail(done.stderr, 1)) else ""
            )
        else:
            out[host] = tail(done.stderr, 1) or "no I/O"
    return out


def probe_engine(
    runner: JobRunner,
    spots: Mapping[str, ProbeSpot],
    *,
    direct: bool,
    candidates: tuple[str, ...] = ENGINE_ORDER,
) -> str:
    """The first of ``candidates`` that does I/O at every host's spot."""
    hosts = list(spots)
    tried: dict[str, list[str]] = defaultdict(list)  # host -> "engine: why"
    for engine in candidates:
        texts = {h: probe_job(engine, spots[h], direct) for h in hosts}
        read_only = all(s.read_only for s in spots.values())
        done = runner.run_jobs(texts, PROBE_TIMEOUT_S, read_only=read_only)
        outcome = _outcome(done, hosts)
        if all(why is None for why in outcome.values()):
            return engine
        for host, why in outcome.items():
            if why is not None:
                tried[host].append(f"{engine}: {why}")
    if len(hosts) == 1:
        spot = spots[hosts[0]]
        where = spot.path if spot.read_only else str(Path(spot.path).parent)
        details = "; ".join(tried[hosts[0]])
        message = f"no fio engine could do I/O at {where} ({details})"
    else:
        listed = "; ".join(
            f"{h}: {', '.join(r.split(':')[0] for r in t)} failed" for h, t in tried.items()
        )
        message = f"no fio engine could do I/O at the target on every host ({listed})"
    hint = "check that fio can open the target"
    if direct and not all(s.read_only for s in spots.values()):
        hint = (
            "the filesystem may not support direct I/O (tmpfs does not); test a disk-backed "
            "path, or pass --set direct=false to measure through the page cache"
        )
    raise UserError(message, hint=hint)
