"""What this machine's fio can generate without storage: fio's ``null``
engine with a phase's jobs, queue depth, block size and pattern, through a
backend's own way of running fio (the same as the engine probe).

The null engine completes every I/O at once and opens no file, so its rate
is fio's own ceiling on these CPUs; a phase near it measured fio, not the
storage (``iorig doctor --generator``, and the audit of CPU-heavy phases).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from iorig.analyze.generator import (
    HEAVY_FRACTION,
    Ceiling,
    GeneratorLoad,
    GeneratorShape,
    generator_load,
)
from iorig.errors import UserError
from iorig.fio import parse
from iorig.fio.jobfile import Section, render
from iorig.model import PhaseKind, PhaseResult
from iorig.run.collect import tail
from iorig.run.plan import PlannedPhase
from iorig.run.probe import JobRunner

SLACK_S = 30.0
MAX_SHAPES = 3  # null-engine runs after a run: the busiest phases' shapes only


def ceiling_job(shape: GeneratorShape, seconds: float) -> str:
    options: dict = {
        "ioengine": "null",
        "rw": shape.rw,
        "bs": shape.bs,
        "iodepth": shape.iodepth,
        "numjobs": shape.jobs,
        "size": 1 << 30,
        "time_based": True,
        "runtime": max(1, round(seconds * 1000)),
    }
    if shape.rw.startswith("rand"):
        options["norandommap"] = True
    return render({}, [Section("generator", options)])


def measure_ceiling(
    runner: JobRunner, hosts: Sequence[str], shape: GeneratorShape, seconds: float = 1.0
) -> Ceiling | None:
    """The null engine's IOPS for ``shape``, all hosts together (one short
    fio run per host, at once); None when no host generated any."""
    texts = {h: ceiling_job(shape, seconds) for h in hosts}
    done = runner.run_jobs(texts, seconds + SLACK_S)
    try:
        default = hosts[0] if len(hosts) == 1 else "local"
        output = parse.parse_final(done.output, default, done.host_names)
    except parse.FioOutputError as exc:
        why = tail(done.stderr, 1) or done.stopped_by or f"exit code {done.returncode}"
        raise UserError(f"fio's null engine did not run: {why}") from exc
    iops = sum(
        d.iops for j in output.jobs if j.host in hosts and not j.error for d in j.dirs.values()
    )
    where = "this machine" if list(hosts) == ["local"] else f"{len(hosts)} hosts together"
    return Ceiling(shape, iops, where) if iops > 0 else None


def phase_shape(phase: PlannedPhase) -> GeneratorShape | None:
    """A phase's shape for the null engine: its jobs and their total depth
    (workloads pooled), the commonest block size and pattern; None for a
    phase without data I/O."""
    io = [w for w in phase.workloads if w.spec.op == "io" and w.engine != "null"]
    if not io:
        return None
    jobs = sum(w.spec.jobs for w in io)
    depth = max(1, round(sum(w.spec.jobs * w.spec.iodepth for w in io) / jobs))
    main = max(io, key=lambda w: w.spec.jobs * w.spec.iodepth)
    return GeneratorShape(jobs, depth, main.spec.bs, main.spec.rw)


def heavy_phases(
    results: Sequence[PhaseResult],
    planned: Mapping[str, PlannedPhase],
    usable_cpus: float | None,
) -> dict[str, GeneratorShape]:
    """Measured phases whose fio used enough CPU that the null engine's
    ceiling is worth knowing, the busiest first: phase -> its shape (at most
    ``MAX_SHAPES`` different shapes, each measured once)."""
    found: dict[str, tuple[float, GeneratorShape]] = {}
    for result in results:
        if result.kind is not PhaseKind.MEASURE or result.aggregate is None:
            continue
        load: GeneratorLoad | None = generator_load(result, usable_cpus)
        busiest = result.aggregate.busiest_job_cpu_pct
        heavy = load.heavy if load is not None else busiest >= HEAVY_FRACTION * 100
        shape = phase_shape(planned[result.name]) if result.name in planned else None
        if heavy and shape is not None:
            busy = load.cpus_busy if load is not None else busiest
            found[result.name] = max(
                (busy, shape), found.get(result.name, (0.0, shape)), key=lambda x: x[0]
            )
    out: dict[str, GeneratorShape] = {}
    shapes: set[GeneratorShape] = set()
    for name, (_, shape) in sorted(found.items(), key=lambda kv: -kv[1][0]):
        if shape in shapes or len(shapes) < MAX_SHAPES:
            shapes.add(shape)
            out[name] = shape
    return out
