"""A planned phase as fio job text: iorig's typed model through the
whitelisted renderer, for this machine or for one fio server."""

from __future__ import annotations

from iorig import __version__
from iorig.fio.jobfile import (
    FileSetLayout,
    JobFileError,
    OptionValue,
    Section,
    render,
    workload_options,
)
from iorig.model import PhaseKind
from iorig.run.plan import Plan, PlannedPhase, PlannedWorkload
from iorig.targets import Target


def job_text(
    plan: Plan,
    run_id: str,
    phase: PlannedPhase,
    *,
    targets: dict[str, Target] | None = None,
    log_suffix: str = "",
    host: str = "",
) -> str:
    """The job file of a phase. For a fio server, ``targets`` are that
    host's (by role), ``log_suffix`` keeps its logs apart from the other
    hosts' (fio names client-mode logs by address only) and the logs carry
    Unix timestamps so hosts can be put on one time axis."""
    sections = [
        Section(w.label, options, job)
        for w in phase.workloads
        for job, options in enumerate(
            flow_groups(job_options(phase, w, (targets or {}).get(w.spec.target), log_suffix))
        )
    ]
    comment = (
        f"iorig {__version__} run {run_id}\n"
        f"scenario {plan.resolved.scenario.name}, phase {phase.name} ({phase.kind})"
        + (f"\nhost {host}" if host else "")
    )
    return render({}, sections, comment=comment)


def job_options(
    phase: PlannedPhase, w: PlannedWorkload, target: Target | None = None, log_suffix: str = ""
) -> dict[str, OptionValue]:
    """One workload's fio options, as its job section renders them."""
    if w.spec.verify_state and target is not None and target.host:
        # fio 3.33 saves a job's state where the job ran (the server's own
        # directory) but loads it from the client: it could never be checked
        raise JobFileError(
            f"phase {phase.name!r}, workload {w.label!r}: verify_state (checking exactly what "
            "was acknowledged) works on this machine only, not on fio servers",
            hint="run the scenario without --hosts",
        )
    options = workload_options(
        engine=w.engine,
        rw=w.spec.rw,
        bs=w.spec.bs,
        filename=str((target or w.target).path),
        size=w.size_bytes,
        offset=w.offset_bytes,
        iodepth=w.spec.iodepth,
        jobs=w.spec.jobs,
        direct=w.spec.direct,
        read_pct=w.spec.read_pct,
        rate_iops=w.spec.rate_iops,
        runtime_s=None if phase.kind.size_based else phase.duration_s,
        time_based=not phase.until_done,
        end_fsync=w.spec.fsync_at_end,
        log_prefix=w.label + log_suffix,
        loops=w.loops,
        compress_pct=w.spec.compress,
        dedupe_pct=w.spec.dedupe,
        distribution=w.spec.distribution,
        bssplit=w.spec.bssplit,
        offset_increment=w.spec.offset_increment,
        rate_bytes=w.spec.rate,
        flow=w.spec.flow,
        verify=w.spec.verify,
        verify_interval=w.spec.verify_interval,
        check=phase.kind is PhaseKind.VERIFY,
        state=state_role(phase, w),
        fileset=fileset_layout(w, target),
        log_every_io=w.spec.completions or slow_paced(w),
        continue_on_error=w.spec.continue_on_error,
        data_rules=w.spec.data_rules,
    )
    if phase.ramp_s:
        options["ramp_time"] = round(phase.ramp_s * 1000)
    # Log times on the unix clock, every job's: a phase's second 0 and each
    # job's place on it are read from the logs (iorig.run.collect), not from
    # fio's live status, which a short phase on a loaded machine may end
    # before, nor from each job's own start: the jobs start up to a third of
    # a second apart, and seconds counted from each job's own start held
    # 8-10 % more than the device read in any second.
    options["log_unix_epoch"] = True
    # a fio job file's own options, as it gives them (iorig.scenario.fiopolicy passes
    # none that names a file, a log or the time base)
    return options | dict(w.spec.fio_options)


def flow_groups(options: dict[str, OptionValue]) -> list[dict[str, OptionValue]]:
    """A workload's sections: one, or with a flow and several jobs one per
    job, job k in fio flow group k + 1. fio holds each job of a flow group
    to its own share of the group's I/Os, so jobs of one workload in one
    group wait on each other: twelve Exchange threads at queue depth 1 kept
    9.5 I/Os in flight against bare fio's 12, and 12.0 paired job by job
    with log writers (docs/methodology.md §4). The phase's workloads with a
    flow have the same jobs (``scenario.schema.Phase``), so job k of each
    forms group k + 1."""
    jobs = int(options.get("numjobs", 1))
    if "flow" not in options or jobs == 1:
        return [options]
    step = int(options.get("offset_increment", 0))
    start = int(options.get("offset", 0))
    out = []
    for k in range(jobs):
        one = {o: v for o, v in options.items() if o != "offset_increment"}
        one |= {"numjobs": 1, "flow_id": k + 1}
        if step:
            one["offset"] = start + k * step
        out.append(one)
    return out


def state_role(phase: PlannedPhase, w: PlannedWorkload) -> str | None:
    """ "save" for a ``verify_state`` writer, "load" for its replay in a verify
    phase, None for every other workload."""
    if not w.spec.verify_state:
        return None
    return "load" if phase.kind is PhaseKind.VERIFY else "save"


# Below this many I/Os a second per job, a paced job's one-second averages
# come late and its last window is lost (a load point's seconds read 27, 1257,
# 24 at a steady 1,281 ops/s); it logs every completion instead.
SLOW_PACED_IOPS = 100


def slow_paced(w: PlannedWorkload) -> bool:
    """A rate-limited job too slow for one-second averaged logs. fio's
    filestat engine logs only some of its completions one by one (3 of 38
    at 20 a second), so its averaged windows are completed instead (see
    ``iorig.fio.assemble``)."""
    spec = w.spec
    if w.engine == "filestat":
        return False
    if spec.rate_iops is not None:
        return spec.rate_iops < SLOW_PACED_IOPS
    if spec.rate is not None:
        return spec.rate / spec.bs < SLOW_PACED_IOPS
    return False


def fileset_layout(w: PlannedWorkload, target: Target | None = None) -> FileSetLayout | None:
    """Where a file-set workload's files are: on this machine in directories
    iorig makes (``<target>/<set>/d<i>``); on a fio server, which cannot be
    asked to make or remove one, named ``<target name>.<set>.<job>.<file>`` in
    the directory the target is in."""
    spec = w.spec
    target = target or w.target
    if spec.fileset is None or spec.file_size is None:
        return None
    if target.kind == "remote":
        if spec.dirs > 1:
            raise JobFileError(
                f"workload {w.label!r} spreads its files over {spec.dirs} directories, which "
                "fio's servers cannot make",
                hint="run it on this machine, or give it dirs: 1",
            )
        name = f"{target.path.name}.{spec.fileset}"
        return FileSetLayout(
            name, (str(target.path.parent),), spec.files, spec.file_size, whole=spec.whole_files
        )
    home = target.path / spec.fileset
    directories = tuple(str(home / f"d{i}") for i in range(spec.dirs))
    return FileSetLayout(
        spec.fileset, directories, spec.files, spec.file_size, whole=spec.whole_files
    )
