"""A fio job file as iorig runs it against the same file run by bare fio:
every option whose value fio gets differs from the one the file gives (or
fio's default where it gives none), job by job, and each phase iorig adds,
as findings of the run (``not-as-fio``), each with its reason.

The comparison is of what fio receives: each job's options as the run
renders them (``iorig.run.jobtext``) against the file's, read as fio reads
them (``iorig.scenario.fiopolicy``), so that anything iorig changes is
named, whether it meant to or not. iorig's logs and fio's error lines
(``OBSERVED``) are how iorig observes a job, not a change to it; options the
file gives that change only fio's printed report are noted as not passed
when the file is read (``iorig.scenario.fiojobs``).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from iorig.fio.jobfile import JobFileError, OptionValue, render_options
from iorig.model import Finding, PhaseKind
from iorig.model.records import JOB_FILE_ORIGIN
from iorig.run.jobtext import job_options
from iorig.run.plan import Plan, PlannedPhase, PlannedWorkload
from iorig.scenario.fiofile import parse_job_file
from iorig.scenario.fiojobs import CONTINUE, DATA_RULES, SIZED_STARTUP_S, Effective, job_sections
from iorig.scenario.fiopolicy import (
    IGNORED,
    PASSED,
    ValueProblem,
    fio_bool,
    fio_int,
    fio_size,
    fio_time_us,
)
from iorig.scenario.schema import MIN_BYTES_PER_S
from iorig.units import format_bytes

CODE = "not-as-fio"
# how iorig observes a job: its one-second logs and histograms, fio's lines
# for each error it goes past (docs/methodology.md §10)
OBSERVED = frozenset(
    {
        "write_iops_log",
        "write_bw_log",
        "write_hist_log",
        "write_lat_log",
        "log_avg_msec",
        "log_hist_msec",
        "log_unix_epoch",
        "error_dump",
    }
)
# a job file's options that are no option of one fio job: the phases are
# the stonewall groups, and sizes are read in kb_base=1024 only
_NOT_JOB_OPTIONS = frozenset({"stonewall", "kb_base", *IGNORED})
# fio's own default for each option iorig may render (fio's HOWTO); "size"
# and "filename" depend on the target and are handled apart
FIO_DEFAULTS: dict[str, OptionValue] = {
    "ioengine": "psync",
    "rw": "read",
    "bs": 4096,
    "iodepth": 1,
    "numjobs": 1,
    "direct": False,
    "rwmixread": 50,
    "offset": 0,
    "offset_increment": 0,
    "time_based": False,
    "runtime": 0,
    "ramp_time": 0,
    "loops": 1,
    "norandommap": False,
    "randrepeat": True,
    "refill_buffers": False,
    "buffer_compress_percentage": 0,
    "buffer_compress_chunk": 512,
    "dedupe_percentage": 0,
    "random_distribution": "random",
    "rate_process": "linear",
    "continue_on_error": "none",
    "end_fsync": False,
    "thread": False,
}
_SIZES = ("bs", "size", "offset", "offset_increment", "rate", "io_size", "buffer_compress_chunk")
_INTS = (
    "iodepth",
    "numjobs",
    "rwmixread",
    "rate_iops",
    "buffer_compress_percentage",
    "dedupe_percentage",
    "loops",
)
_DATA_RULES = "iorig's data rules (--iorig-data-rules)"
_WHY = {
    "refill_buffers": _DATA_RULES + ": fresh random data in every write",
    "norandommap": _DATA_RULES + ": offsets may repeat within a pass",
    "randrepeat": _DATA_RULES + ": a new random sequence each run",
    "buffer_compress_chunk": _DATA_RULES + ": compressible data in 4 KiB chunks",
}
_MISSING = object()


@dataclass(frozen=True)
class Difference:
    """One option of some jobs as fio gets it (``rendered``) and as the file
    would give it to bare fio (``given``), both as job-file text."""

    given: str
    rendered: str
    why: str
    imposed: bool  # iorig's own doing, not an option the user gave to this run


def _millis(text: str | None) -> int:
    return fio_time_us(text) // 1000


def _whole(text: str | None) -> int:
    return fio_int(-(2**63), 2**63 - 1)(text)


# a mapped or passed option's value as fio reads it, in the form iorig
# renders it (sizes in bytes, times in the renderer's units)
_READ: dict[str, Callable[[str | None], OptionValue]] = {
    **dict.fromkeys(_SIZES, fio_size),
    **dict.fromkeys(_INTS, _whole),
    "runtime": _millis,
    "ramp_time": _millis,
    "direct": fio_bool,
    "time_based": fio_bool,
    "rw": lambda text: "rw" if text == "readwrite" else str(text),
    "continue_on_error": lambda text: CONTINUE.get(str(text), str(text)),
    "bssplit": lambda text: _bssplit(str(text)),
}


def _user_value(name: str, text: str | None) -> OptionValue:
    read = _READ.get(name) or PASSED.get(name)
    if read is not None:
        return read(text)
    return "" if text is None else text


def _bssplit(text: str) -> str:
    pairs = [item.partition("/") for item in text.split(":")]
    return ":".join(f"{fio_size(size)}/{float(pct):g}" for size, _, pct in pairs)


def fio_view(eff: Effective) -> dict[str, OptionValue]:
    """A job's options as bare fio would run them, in the names and forms
    iorig renders (``rwmixwrite`` as ``rwmixread``, ``buffered`` as
    ``direct``, one ``bsrange`` as ``bs``); a value iorig could not read
    is kept as written (a translated file has none)."""
    out: dict[str, OptionValue] = {}
    for name, (option, _section) in eff.items():
        if name in _NOT_JOB_OPTIONS or name in ("filename", "directory"):
            continue
        try:
            if name == "rwmixwrite":
                if "rwmixread" not in eff:
                    out["rwmixread"] = 100 - fio_int(0, 100)(option.value)
            elif name == "buffered":
                out["direct"] = not fio_bool(option.value)
            elif name == "bsrange":
                out.setdefault("bs", fio_size((option.value or "").partition("-")[0]))
            else:
                out[name] = _user_value(name, option.value)
        except (ValueProblem, ValueError):
            out[name] = option.value or ""
    return out


def _file_path(eff: Effective, cwd: Path) -> str | None:
    """Where bare fio would do the job's I/O (None: files of fio's naming
    in its working directory, one per job)."""
    name = eff["filename"][0].value if "filename" in eff else None
    directory = eff["directory"][0].value if "directory" in eff else None
    if name is not None:
        return os.path.abspath(os.path.join(cwd, directory or "", name))
    return None if directory is None else os.path.abspath(os.path.join(cwd, directory)) + "/"


def _text(name: str, value: object) -> str:
    """An option as a job file has it (as iorig's renderer writes it)."""
    if value is _MISSING:
        return f"no {name}"
    try:
        text = render_options({name: value})[0]  # type: ignore[dict-item]
    except JobFileError:
        return f"{name}={value}"
    if name in _SIZES and isinstance(value, int) and value >= 1024:
        return f"{text} ({format_bytes(value)})"
    return text


def _given_text(name: str, value: object, eff: Effective, given: Mapping[str, object]) -> str:
    """The file's own line where it gave the option, else fio's default."""
    if name in eff:
        return eff[name][0].text
    if value is _MISSING:
        return f"no {name}"
    return _text(name, value) if name in given else f"fio's default {_text(name, value)}"


def _irrelevant(name: str, rw: object) -> bool:
    """An option fio does not use with this ``rw`` (a read share of a job
    that does not mix, a distribution of sequential offsets)."""
    if name == "rwmixread":
        return rw not in ("rw", "randrw")
    return name == "random_distribution" and not str(rw).startswith("rand")


def _why(name: str, given: object, phase: PlannedPhase, timed_by_user: bool) -> tuple[str, bool]:
    """Why iorig renders an option otherwise than bare fio would run it
    (``given``), and whether it is iorig's own doing (True) or an option of
    the run's; ``timed_by_user``: the run set the phases' duration."""
    if name in _WHY:
        return _WHY[name], False
    if name == "size":
        return "the working set cut to fit the target (--size)", False
    if name == "runtime" and phase.until_done and not timed_by_user and not given:
        rate = format_bytes(MIN_BYTES_PER_S)
        return (
            f"iorig's limit on a sized job: its bytes at {rate}/s plus {SIZED_STARTUP_S} s "
            "(past it iorig stops the job and says so)",
            True,
        )
    if name == "runtime":
        return "the phase cut to the run's duration (--set duration, --quick)", False
    return "iorig renders it so", True


def _workload_differences(
    phase: PlannedPhase, w: PlannedWorkload, eff: Effective, cwd: Path, timed_by_user: bool
) -> list[tuple[str, Difference]]:
    rendered = {k: v for k, v in job_options(phase, w).items() if k not in OBSERVED}
    given = fio_view(eff)
    out: list[tuple[str, Difference]] = []
    for name in dict.fromkeys([*rendered, *given]):
        fio_default = FIO_DEFAULTS.get(name, _MISSING)
        if name == "size":  # without one, fio takes the file's (the target's) size
            fio_default = w.target.size_bytes - w.offset_bytes
        if name == "filename" or _irrelevant(name, rendered.get("rw")):
            continue
        theirs = given.get(name, fio_default)
        ours = rendered.get(name, fio_default)
        if theirs == ours:
            continue
        why, imposed = _why(name, theirs, phase, timed_by_user)
        out.append(
            (
                name,
                Difference(_given_text(name, theirs, eff, given), _text(name, ours), why, imposed),
            )
        )
    path = _file_path(eff, cwd)
    target = str(w.target.path)
    if path != target:
        if path is None or path.endswith("/"):
            where = f"in {path}" if path else "in its working directory"
            theirs_text = f"a file of its own per job {where}"
            why, imposed = "iorig runs every job of a job file on one target", True
        else:
            theirs_text = f"filename={path}"
            why, imposed = "the run's target (--target)", False
        out.append(("filename", Difference(theirs_text, f"filename={target}", why, imposed)))
    return out


def differences(plan: Plan, cwd: Path | None = None) -> list[Finding]:
    """The run's ``not-as-fio`` findings; none for a scenario of iorig's own.
    ``cwd``: where a relative path in the file is taken from (fio's working
    directory: iorig's)."""
    source = plan.resolved.source
    if not source.origin.startswith(JOB_FILE_ORIGIN):
        return []
    job = parse_job_file(source.text, source.origin.removeprefix(JOB_FILE_ORIGIN))
    by_label = {label: eff for label, _section, eff in job_sections(job)}
    names = {label: section.name for label, section, _eff in job_sections(job)}
    timed_by_user = plan.resolved.param_origins.get("duration", "default") != "default"
    found: dict[tuple[str, Difference], list[str]] = {}
    for phase in plan.phases:
        if phase.kind is not PhaseKind.MEASURE:
            continue
        for w in phase.workloads:
            if w.label not in by_label:
                continue
            eff = by_label[w.label]
            for name, diff in _workload_differences(
                phase, w, eff, cwd or Path.cwd(), timed_by_user
            ):
                found.setdefault((name, diff), []).append(names[w.label])
    out = [
        Finding(
            CODE,
            f"[{', '.join(dict.fromkeys(jobs))}] {diff.rendered} where bare fio would run "
            f"{diff.given}: {diff.why}",
            "" if not diff.imposed else "docs/guide/scenario-files.md lists what iorig changes",
            None,
            "warning" if diff.imposed else "info",
        )
        for (_name, diff), jobs in found.items()
    ]
    out += _added_phases(plan)
    if plan.resolved.params.get(DATA_RULES):
        out.append(
            Finding(
                CODE,
                "the jobs ran with iorig's data rules where the file does not say otherwise "
                "(--iorig-data-rules): fresh random data in every write, no random map, a new "
                "random sequence each run",
                "",
                None,
                "info",
            )
        )
    return out


def _added_phases(plan: Plan) -> list[Finding]:
    """The phases iorig runs that are no job of the file: the prefill."""
    out = []
    for phase in plan.phases:
        if phase.kind is not PhaseKind.PREFILL:
            continue
        buffered = any(not w.spec.direct for w in phase.workloads)
        how = (
            "buffered, fsynced within the phase, then the file's pages dropped from the page cache"
            if buffered
            else "with direct I/O"
        )
        out.append(
            Finding(
                CODE,
                f"iorig writes the target once before the jobs read it (phase {phase.name!r}: "
                f"1 MiB sequential writes of fresh random data, {how}), where bare fio would lay "
                "a new file out itself; the jobs then read written data, none of it from memory",
                "--set prefill=false leaves it out (the jobs then read what the target holds)",
                phase.name,
                "info",
            )
        )
    return out
