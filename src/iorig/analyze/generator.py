"""Was the load generator the limit? fio's CPU use against the CPUs it may
run on, and a phase's rate against what fio's null engine (no storage at
all) can generate with the same jobs and queue depth.

Seed 002's lesson: a VM with fewer vCPUs than fio jobs reached a quarter of
what the host did, and the storage took the blame. When fio's jobs keep the
CPUs it may use busy, more storage speed cannot show: the figure is the
generator's. What other processes took of those CPUs meanwhile is measured
too: where they were saturated and a neighbour had a share, fio's I/Os
waited for a CPU as well as for the storage (``contended``). That alone
does not make fio the limit: a fio the storage holds back uses all the
little CPU a busy neighbour leaves it and needs no more (a 5,000 IOPS cap
reached beside a loaded machine, 0.2 of 0.2 CPU left).
"""

from __future__ import annotations

from dataclasses import dataclass

from iorig.model import PhaseResult

BUSY_FRACTION = 0.85  # of the usable CPUs: the generator has no CPU to spare
CROWDED_BUSY_FRACTION = 0.5  # with more jobs than CPUs, jobs queue for a CPU earlier
SATURATED_FRACTION = 0.85  # of the usable CPUs busy, fio and others: none to spare
CONTENDED_FRACTION = 0.1  # of the usable CPUs taken by others: worth naming when saturated
JOB_BOUND_PCT = 90.0  # one job (one thread) can use one CPU at most
CEILING_FRACTION = 0.5  # of the null engine's rate: fio's own cost per I/O dominates
HEAVY_FRACTION = 0.5  # CPU use from which the null-engine ceiling is worth measuring


@dataclass(frozen=True)
class GeneratorLoad:
    """How busy fio kept the CPUs it may run on during one phase: measured
    by iorig over all of fio's processes and threads (``measured``), or,
    where it could not be (fio servers, runs stored before), fio's own
    per-job figures, which leave out io_uring's worker threads."""

    jobs: int
    cpus_busy: float  # in CPUs
    usable_cpus: float
    busiest_job_cpu_pct: float
    measured: bool = False
    per_job_cpus: float = 0.0  # fio's own per-job usr+sys summed, in CPUs
    engine: str = ""
    others_cpus: float = 0.0  # what other processes kept busy of the usable CPUs

    @property
    def busy_fraction(self) -> float:
        return self.cpus_busy / self.usable_cpus

    @property
    def contended(self) -> bool:
        """The usable CPUs were saturated, and other processes had a share."""
        return (
            self.others_cpus >= CONTENDED_FRACTION * self.usable_cpus
            and self.cpus_busy + self.others_cpus >= SATURATED_FRACTION * self.usable_cpus
        )

    @property
    def crowded(self) -> bool:
        """More fio jobs than CPUs to run them on."""
        return self.jobs > self.usable_cpus

    @property
    def limiting(self) -> bool:
        """The CPUs, not the storage, set the pace."""
        if self.busy_fraction >= BUSY_FRACTION:
            return True
        return self.crowded and self.busy_fraction >= CROWDED_BUSY_FRACTION

    @property
    def heavy(self) -> bool:
        return (
            self.busy_fraction >= HEAVY_FRACTION or self.busiest_job_cpu_pct >= HEAVY_FRACTION * 100
        )

    def _source(self) -> str:
        if self.measured:
            return (
                "measured over all its processes and threads (fio's own per-job figures, "
                "which leave out io_uring's worker threads and fio's parent, add up to "
                f"{self.per_job_cpus:.2f})"
            )
        uring = "; they leave out io_uring's worker threads" if "io_uring" in self.engine else ""
        return f"by fio's own per-job figures (iorig measured none in this phase{uring})"

    def describe(self) -> str:
        crowd = (
            f"; its {self.jobs} jobs outnumber the {self.usable_cpus:g} "
            f"CPU{'s' if self.usable_cpus != 1 else ''}, so jobs wait for a CPU and that wait "
            "counts as I/O latency"
            if self.crowded
            else ""
        )
        who = "fio" if self.measured else f"fio's {self.jobs} job{'s' if self.jobs != 1 else ''}"
        cpus = f"{self.usable_cpus:g} CPU{'s' if self.usable_cpus != 1 else ''}"
        others = (
            f", other processes {self.others_cpus:.2f}"
            if self.others_cpus >= CONTENDED_FRACTION * self.usable_cpus
            else ""
        )
        return (
            f"{who} kept {self.cpus_busy:.2f} of the {cpus} it may run on busy "
            f"({self.busy_fraction * 100:.0f} %{others}) {self._source()}{crowd}"
        )


def generator_load(phase: PhaseResult, usable_cpus: float | None) -> GeneratorLoad | None:
    """The generator's CPU use in a phase: iorig's measurement where there is
    one, else fio's per-job figures (None when the usable CPUs are unknown,
    e.g. on fio servers, or the phase ran no job)."""
    scope = phase.aggregate
    if scope is None or not usable_cpus or scope.jobs <= 0:
        return None
    per_job = (scope.usr_cpu_pct + scope.sys_cpu_pct) * scope.jobs / 100.0
    measured = phase.generator_cpu
    if measured is None:
        return GeneratorLoad(
            scope.jobs, per_job, usable_cpus, scope.busiest_job_cpu_pct, engine=phase.engine
        )
    # clock ticks at the window's two ends can read a hair over the CPUs there are
    busy = min(measured.cpus_busy, usable_cpus)
    others = min(measured.others_cpus_busy, usable_cpus - busy)
    return GeneratorLoad(
        scope.jobs,
        busy,
        usable_cpus,
        scope.busiest_job_cpu_pct,
        True,
        per_job,
        phase.engine,
        max(others, 0.0),
    )


@dataclass(frozen=True)
class GeneratorShape:
    """What fio's null engine is asked to generate: a phase's jobs, queue
    depth, block size and pattern, without storage."""

    jobs: int
    iodepth: int
    bs: int
    rw: str

    def describe(self) -> str:
        return f"{self.jobs} job{'s' if self.jobs != 1 else ''} × QD {self.iodepth}, {self.rw}"


@dataclass(frozen=True)
class Ceiling:
    """What this machine's fio generated on the null engine for a shape."""

    shape: GeneratorShape
    iops: float
    host: str = "local"
