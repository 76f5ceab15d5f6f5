"""A user's fio job file as an iorig scenario (``iorig run JOB.fio``).

Each job section is a workload; a job with ``stonewall`` (fio waits for
every earlier job to end before starting it) starts a new measured phase,
so each stonewall group is one phase, its jobs run together as fio would
run them. A prefill writes the target first when any phase reads or trims.
Every option is checked by ``iorig.scenario.fiopolicy``: iorig's own fields take
those it models, fio gets the passed ones as written, and every refused
option is named with its file, line, reason and fix, all at once, before a
run row or a target file exists.

What the file leaves out is fio's default (``ioengine=psync``, buffered
I/O, ``rw=read``, ``bs=4k``, ``iodepth=1``, a random map, the same random
sequence each run, one buffer of random data written again and again), so
the job measures what fio would run. iorig's data rules (fresh random data
in every write, no random map, a new sequence each run) apply only with the
parameter ``iorig_data_rules`` (``run --iorig-data-rules``), and then where
the file does not say otherwise.

A job with ``time_based`` and ``runtime`` runs for its runtime; a sized job
(without ``time_based``) runs until it is through its ``size``,
``io_size``, ``number_ios`` and ``loops``, as fio runs it (an ``until:
done`` phase), its ``runtime`` a limit if it has one and otherwise iorig's:
its bytes at ``MIN_BYTES_PER_S`` (slower than any storage that still
works) plus ``SIZED_STARTUP_S``, past which iorig stops it and says so.

The scenario has the parameters ``size`` (the target; every job's size is
cut to fit in it) and ``duration`` (the longest a phase runs; each phase
runs the file's runtime, or until it is through, at most this), so
``--size 64MiB --set duration=5s`` makes any job file a short test;
``prefill`` when there is one (it writes the target as fio would lay it out
before reading it, and leaves none of it in the page cache). The
translation is pure but for the working directory, against which a
relative ``filename=`` is taken, as fio takes it.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from iorig.errors import UserError
from iorig.scenario.fiofile import JobFile, JobOption, JobSection
from iorig.scenario.fiopolicy import (
    Handling,
    OptionValue,
    ValueProblem,
    canonical,
    fio_bool,
    fio_int,
    fio_size,
    fio_time_us,
    rule,
)
from iorig.scenario.schema import MIN_BYTES_PER_S, READS, TRIMS, Workload

ENGINES = ("io_uring", "libaio", "psync", "sync", "pvsync", "pvsync2", "posixaio", "null")
RW_VALUES = (
    "read",
    "write",
    "randread",
    "randwrite",
    "rw",
    "randrw",
    "trim",
    "randtrim",
    "trimwrite",
    "randtrimwrite",
)
CONTINUE = {
    "0": "none",
    "1": "all",
    "none": "none",
    "read": "read",
    "write": "write",
    "io": "io",
    "verify": "verify",
    "all": "all",
}
# the option behind a workload field, for schema errors (others: the same name)
_FIELD_OPTION = {
    "jobs": "numjobs",
    "read_pct": "rwmixread",
    "distribution": "random_distribution",
    "compress": "buffer_compress_percentage",
    "dedupe": "dedupe_percentage",
}
_NAME_RE = re.compile(r"[^a-z0-9_-]+")
Effective = dict[str, tuple[JobOption, JobSection]]
# A sized job without a runtime of its own is stopped after its bytes at
# MIN_BYTES_PER_S (iorig's rate for a hung size-based phase, 1 MiB/s: slower
# than any disk, SD card or network share that still works) plus this for
# fio's start: a job that slow is measuring a fault, and one that never
# ends (a size larger than the storage's pace) would hold the target forever.
SIZED_STARTUP_S = 10
# the duration parameter's default when a sized job's limit depends on a
# --size the file does not give (the limit itself then follows --size)
SIZED_CAP_S = 24 * 3600
DATA_RULES = "iorig_data_rules"  # the generated scenario's parameter (run --iorig-data-rules)


@dataclass(frozen=True)
class Translation:
    yaml_text: str  # the scenario
    target: str | None  # the file's filename/directory as a --target, if it names one
    notes: tuple[str, ...]  # what iorig did with options it does not pass


@dataclass
class _Spec:
    section: JobSection
    label: str
    workload: dict[str, Any]
    size: int | None
    offset: int
    extent: int | None
    stonewall: bool
    time_based: bool
    runtime_us: int | None
    ramp_us: int
    path: str | None
    description: str
    io_size: int | None = None  # fio's io_size: the I/O a sized job does (default its size)
    number_ios: int | None = None  # …or this many I/Os, whichever comes first
    loops: int = 1

    @property
    def sized(self) -> bool:
        """The job ends when it is through its data, not after a time."""
        return not self.time_based

    @property
    def max_bs(self) -> int:
        split = str(self.workload.get("bssplit") or "")
        return max(
            [int(self.workload["bs"])] + [int(i.partition("/")[0]) for i in split.split(":") if i]
        )


@dataclass
class _Problems:
    job: JobFile
    lines: list[str] = field(default_factory=list)

    def add(self, at: JobOption | JobSection, section: JobSection, message: str, fix: str = ""):
        text = (
            f"{self.job.where(at.line)}: [{section.name}] "
            + (f"{at.text[:80]}: " if isinstance(at, JobOption) else "")
            + message
            + (f" — {fix}" if fix else "")
        )
        if text not in self.lines:
            self.lines.append(text)


def _label(name: str, taken: set[str]) -> str:
    base = _NAME_RE.sub("-", name.lower()).strip("-_")[:50] or "job"
    if not base[0].isalnum():
        base = "job-" + base
    label, n = base, 2
    while label in taken:
        label, n = f"{base}-{n}", n + 1
    taken.add(label)
    return label


def _effective(job: JobFile) -> list[tuple[JobSection, Effective]]:
    """Each job section with the options in effect for it: the [global]
    sections before it (fio applies a [global] to the jobs after it), then
    its own; the last setting of an option wins."""
    defaults: Effective = {}
    out = []
    for section in job.sections:
        own = {canonical(o.name): (o, section) for o in section.options}
        if section.is_global:
            defaults |= own
        else:
            out.append((section, defaults | own))
    return out


class _Reader:
    """One job's options read through the policy, problems collected."""

    def __init__(self, section: JobSection, eff: Effective, problems: _Problems) -> None:
        self.section, self.eff, self.problems = section, eff, problems

    def get(self, name: str, parse: Callable[[str | None], Any], default: Any = None) -> Any:
        if name not in self.eff:
            return default
        option, where = self.eff[name]
        try:
            return parse(option.value)
        except ValueProblem as exc:
            self.problems.add(option, where, str(exc))
            return default

    def refuse(self, name: str, message: str, fix: str = "") -> None:
        option, where = self.eff[name]
        self.problems.add(option, where, message, fix)

    def text(self, name: str) -> str | None:
        return self.eff[name][0].value if name in self.eff else None


def _rw(r: _Reader) -> str:
    text = r.text("rw") or "read"
    if ":" in text:
        r.refuse("rw", "an offset modifier (rw=randread:8) is not in iorig's rw", "remove ':N'")
        return "read"
    text = "rw" if text == "readwrite" else text
    if text not in RW_VALUES:
        r.refuse("rw", f"iorig runs rw={', '.join(RW_VALUES)}")
        return "read"
    return text


def _bs(r: _Reader) -> tuple[int, str | None]:
    """The block size, and a bssplit in iorig's form (bytes/percent)."""
    bs = 4096
    if "bs" in r.eff:
        if "," in (r.text("bs") or ""):
            r.refuse(
                "bs",
                "a block size per direction is not in iorig's model",
                "give one size, or bssplit=",
            )
        else:
            bs = r.get("bs", fio_size, bs)
    if "bsrange" in r.eff:
        low, _, high = (r.text("bsrange") or "").partition("-")
        try:
            sizes = {fio_size(low), fio_size(high)}
        except ValueProblem as exc:
            r.refuse("bsrange", str(exc))
            sizes = {bs}
        if len(sizes) > 1:
            r.refuse(
                "bsrange", "a range of block sizes is not in iorig's model", "give bs= or bssplit="
            )
        bs = min(sizes)
    split = None
    if "bssplit" in r.eff:
        text = r.text("bssplit") or ""
        try:
            if "," in text:
                raise ValueProblem("a split per direction is not in iorig's model")
            pairs = [item.partition("/") for item in text.split(":")]
            split = ":".join(
                f"{fio_size(size)}/{int(fio_int(0, 100)(pct))}" for size, _, pct in pairs
            )
        except ValueProblem as exc:
            r.refuse("bssplit", str(exc), "give size/percent pairs: 4k/50:64k/50")
    return bs, split


def _engine(r: _Reader, rw: str) -> str:
    text = r.text("ioengine")
    if text is None:
        return "psync"  # fio's default
    if text.startswith(("exec", "external")) or "/" in text:
        r.refuse(
            "ioengine",
            "it runs a program or loads a library into fio",
            "use io_uring, libaio or psync",
        )
    elif text == "falloc" and rw in TRIMS:
        return "auto"  # trims on a file are fio's falloc engine's hole punches (iorig.run.plan)
    elif text not in ENGINES:
        r.refuse("ioengine", f"iorig measures storage with the engines {', '.join(ENGINES)}")
    else:
        return text
    return "psync"


def _direct(r: _Reader) -> bool:
    direct = r.get("direct", fio_bool, False)
    if "buffered" in r.eff:
        buffered = r.get("buffered", fio_bool, False)
        if "direct" in r.eff and buffered == direct:
            r.refuse("buffered", "contradicts direct=", "give one of them")
        direct = not buffered
    return direct


def _read_pct(r: _Reader) -> int | None:
    read = r.get("rwmixread", fio_int(0, 100))
    write = r.get("rwmixwrite", fio_int(0, 100))
    if read is not None and write is not None and read + write != 100:
        r.refuse("rwmixwrite", f"rwmixread={read} and rwmixwrite={write} do not add up to 100")
    if read is not None:
        return read
    return None if write is None else 100 - write


def _path(r: _Reader) -> str | None:
    """Where the job does its I/O, absolute (a relative path is fio's working
    directory's): a file, or a directory (ending '/') fio would make files in."""
    name, directory = r.text("filename"), r.text("directory")
    for option, text in (("filename", name), ("directory", directory)):
        if text is not None and (not text or "\\" in text or ":" in text or text == "-"):
            r.refuse(
                option,
                "iorig runs a job file on one file, directory or device: no "
                "several files (':'), escapes or standard input",
                "give one path, or --target",
            )
            return None
    if name is not None:
        return os.path.abspath(os.path.join(directory or "", name))
    return None if directory is None else os.path.abspath(directory) + "/"


def _options(r: _Reader, notes: list[str]) -> dict[str, OptionValue]:
    """The passed options (fio gets them as written); ignored ones noted."""
    passed: dict[str, OptionValue] = {}
    for name, (option, where) in r.eff.items():
        found = rule(name)
        if found.handling is Handling.PASSED and found.parse is not None:
            try:
                value = found.parse(option.value)
            except ValueProblem as exc:
                r.problems.add(option, where, str(exc))
                continue
            if name != "thread" or value:
                passed[name] = value
        elif found.handling is Handling.IGNORED and name != "description":
            note = f"{option.text} (line {option.line}) is not passed to fio: {found.why}"
            if note not in notes:
                notes.append(note)
    return passed


_REFUSED = {
    Handling.UNSAFE: "refused as unsafe",
    Handling.UNMEASURABLE: "refused: iorig could not measure it honestly",
    Handling.UNKNOWN: "refused",
}


def _refuse_options(job: JobFile, problems: _Problems) -> None:
    """Every option line the policy refuses, in file order: also one that a
    later line overrides, or in a [global] no job follows (fio would read
    each, and its reader should learn it is refused, not that it was lost)."""
    for section in job.sections:
        for option in section.options:
            found = rule(option.name)
            if found.handling in _REFUSED:
                problems.add(option, section, f"{_REFUSED[found.handling]}: {found.why}", found.fix)


def _spec(r: _Reader, label: str, notes: list[str]) -> _Spec:
    rw = _rw(r)
    bs, split = _bs(r)
    jobs = r.get("numjobs", fio_int(1, 1024), 1)
    if (r.text("size") or "").endswith("%"):
        r.refuse("size", "a share of the device or file is not in iorig's model", "give bytes")
    size = r.get("size", fio_size)
    offset = r.get("offset", fio_size, 0)
    increment = r.get("offset_increment", fio_size)
    workload: dict[str, Any] = {
        "name": label,
        "rw": rw,
        "bs": bs,
        "iodepth": r.get("iodepth", fio_int(1, 65536), 1),
        "jobs": jobs,
        "direct": _direct(r),
        "engine": _engine(r, rw),
    }
    if rw in ("rw", "randrw") and (pct := _read_pct(r)) is not None:
        workload["read_pct"] = pct
    extra = {
        "bssplit": split,
        "offset": offset or None,
        "offset_increment": increment,
        "rate_iops": r.get("rate_iops", fio_int(1, 2**32 - 1)),
        "rate": r.get("rate", fio_size),
        "distribution": r.text("random_distribution"),
        "compress": r.get("buffer_compress_percentage", fio_int(0, 100)),
        "dedupe": r.get("dedupe_percentage", fio_int(0, 100)),
    }
    for name in ("rate_iops", "rate"):
        if "," in (r.text(name) or ""):
            r.refuse(name, "a rate per direction is not in iorig's model", "give one rate")
    if "continue_on_error" in r.eff:
        extra["continue_on_error"] = CONTINUE.get(r.text("continue_on_error") or "")
        if extra["continue_on_error"] is None:
            r.refuse("continue_on_error", f"iorig takes {', '.join(CONTINUE)}")
    if r.text("kb_base") not in (None, "1024"):
        r.refuse(
            "kb_base",
            "iorig reads sizes as fio does by default (kb_base=1024)",
            "write sizes with k, m, g (powers of 1024)",
        )
    workload |= {k: v for k, v in extra.items() if v is not None}
    loops = r.get("loops", fio_int(1, 2**31 - 1), 1)
    if loops != 1:
        workload["loops"] = loops  # the schema's bound is iorig's (Workload.loops)
    passed = _options(r, notes)
    if "rate_iops" in workload and "rate_process" not in passed:
        passed["rate_process"] = "linear"  # fio's default; iorig's own rates are Poisson
    if passed:
        workload["fio_options"] = passed
    extent = None if size is None else offset + (jobs - 1) * (increment or 0) + size
    return _Spec(
        r.section,
        label,
        workload,
        size,
        offset,
        extent,
        r.get("stonewall", fio_bool, False),
        r.get("time_based", fio_bool, False),
        r.get("runtime", fio_time_us),
        r.get("ramp_time", fio_time_us, 0),
        _path(r),
        r.text("description") or "",
        r.get("io_size", fio_size),
        r.get("number_ios", fio_int(1, 2**32 - 1)),
        loops,
    )


def _check_time(spec: _Spec, r: _Reader) -> None:
    """A timed job needs its runtime; a sized one (no time_based) ends when
    it is through, its runtime (if any) a limit, as fio has it."""
    if spec.time_based and not spec.runtime_us:
        r.problems.add(
            spec.section,
            spec.section,
            "time_based without runtime: fio would run the job until it is stopped",
            "add runtime= (or remove time_based: the job then ends after its size)",
        )
        return
    for name, value in (("runtime", spec.runtime_us or 0), ("ramp_time", spec.ramp_us)):
        if value % 1000:
            r.refuse(name, "iorig times phases in whole milliseconds")


def _validated(spec: _Spec, problems: _Problems) -> None:
    """The workload as iorig's schema takes it, with the file's own size."""
    concrete = dict(spec.workload) | ({"size": spec.size} if spec.size else {})
    try:
        Workload.model_validate(concrete)
    except ValidationError as exc:
        for err in exc.errors():
            name = str(err["loc"][0]) if err["loc"] else ""
            message = err["msg"].removeprefix("Value error, ")
            problems.add(
                spec.section,
                spec.section,
                f"{_FIELD_OPTION.get(name, name) or 'the job'}: {message}",
            )


def _phases(specs: list[_Spec], problems: _Problems) -> list[list[_Spec]]:
    """Stonewall groups; the jobs of one must share their runtime and ramp."""
    groups: list[list[_Spec]] = []
    for spec in specs:
        if spec.stonewall or not groups:
            groups.append([])
        groups[-1].append(spec)
    for group in groups:
        if len({s.sized for s in group}) > 1:
            problems.add(
                group[0].section,
                group[0].section,
                f"of the jobs run together ({', '.join(s.section.name for s in group)}) some "
                "are time_based and some end after their size: iorig runs a phase for a time "
                "or until its jobs are through, not both",
                "give them all time_based (or none), or stonewall",
            )
        for what, key in (("runtime", "runtime_us"), ("ramp_time", "ramp_us")):
            values = {getattr(s, key) for s in group}
            if len(values) > 1:
                problems.add(
                    group[0].section,
                    group[0].section,
                    f"the jobs run together ({', '.join(s.section.name for s in group)}) "
                    f"have different {what}s: iorig measures a phase over the seconds "
                    "all its jobs ran",
                    f"give them one {what}, or stonewall",
                )
    return groups


def _size_text(size: int) -> str:
    """Exactly ``size`` bytes, as a person writes it (10GiB, not 10737418240)."""
    for unit, factor in (("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if size and size % factor == 0:
            return f"{size // factor}{unit}"
    return str(size)


def _seconds(us: int) -> float | int:
    seconds = us / 1e6
    return int(seconds) if seconds.is_integer() else seconds


def job_sections(job: JobFile) -> list[tuple[str, JobSection, Effective]]:
    """Each job section with its workload's label (its phase's name, if it
    starts one) and the options in effect for it."""
    taken = {"prefill"}
    return [(_label(section.name, taken), section, eff) for section, eff in _effective(job)]


def translate(job: JobFile, path: Path) -> Translation:
    """The scenario of a parsed job file; UserError lists every refused option."""
    problems, notes = _Problems(job), []
    _refuse_options(job, problems)
    specs = []
    for label, section, eff in job_sections(job):
        reader = _Reader(section, eff, problems)
        spec = _spec(reader, label, notes)
        _check_time(spec, reader)
        if not problems.lines:
            _validated(spec, problems)
        specs.append(spec)
    groups = _phases(specs, problems)
    paths = {s.path for s in specs}
    if len(paths) > 1:
        where = ", ".join(f"[{s.section.name}] {s.path or '(none)'}" for s in specs)
        problems.add(
            job.jobs[0],
            job.jobs[0],
            f"the jobs name different files ({where}): iorig runs a job file on one target",
            "give them one filename=, or --target",
        )
    if problems.lines:
        raise UserError(
            f"iorig does not run this job file as it is ({len(problems.lines)} "
            f"problem{'s' if len(problems.lines) > 1 else ''}):\n  " + "\n  ".join(problems.lines),
            hint="docs/guide/scenario-files.md lists what iorig passes, refuses and why",
        )
    target = paths.pop()
    if target is not None and target.endswith("/"):
        notes.append(
            f"fio would give each job its own file in {target}; iorig runs every job "
            "on one file in it (iorig-data.dat), as its scenarios do"
        )
    return Translation(_document(job, path, groups), target, tuple(notes))


@dataclass(frozen=True)
class _PhaseTime:
    """How long a phase may run: ``ms`` (a timed job's runtime, a sized
    job's own runtime or iorig's limit at the file's sizes), or ``expression``
    over the parameter ``size`` where the limit follows the target's size."""

    ms: int
    expression: str | None = None

    @property
    def text(self) -> str:
        return self.expression or str(_seconds(self.ms * 1000))


def sized_limit_s(total_bytes: int) -> int:
    """iorig's limit on a sized job without a runtime (``SIZED_STARTUP_S``)."""
    return math.ceil(total_bytes / MIN_BYTES_PER_S) + SIZED_STARTUP_S


def _phase_time(group: list[_Spec], whole: int) -> _PhaseTime:
    first = group[0]
    if not first.sized or first.runtime_us:
        return _PhaseTime((first.runtime_us or 0) // 1000)
    fixed = per_size = 0  # the phase's bytes: fixed + per_size × the target's size
    for s in group:
        jobs = int(s.workload["jobs"])
        amount = s.io_size if s.io_size is not None else s.size
        if amount is None:
            if s.number_ios is None:
                per_size += jobs * s.loops
                continue
            fixed += jobs * s.number_ios * s.max_bs
            continue
        amount *= s.loops
        if s.number_ios is not None:
            amount = min(amount, s.number_ios * s.max_bs)
        fixed += jobs * amount
    if not per_size:
        return _PhaseTime(sized_limit_s(fixed) * 1000)
    rate = int(MIN_BYTES_PER_S)
    expression = f"ceil(({fixed} + {per_size} * size) / {rate}) + {SIZED_STARTUP_S}"
    default_s = sized_limit_s(fixed + per_size * whole) if whole else SIZED_CAP_S
    return _PhaseTime(default_s * 1000, expression)


def _duration_text(ms: int) -> str:
    return f"{ms // 1000}s" if ms % 1000 == 0 else f"{ms}ms"


def _prefill(direct: bool) -> dict[str, Any]:
    """What fio would do before its first read (lay the file out), as a
    phase: the target written once; buffered writes fsynced within it (fio
    end_fsync) so that nothing of it is left dirty in the page cache, and
    iorig then drops the file's pages (iorig.run.local), as fio's
    ``invalidate`` drops them when the job opens it: the jobs read the
    storage, not what the fill left in memory."""
    workload: dict[str, Any] = {"rw": "write", "bs": "1MiB", "iodepth": 4, "direct": direct}
    if not direct:
        workload["fsync_at_end"] = True
    return {
        "name": "prefill",
        "kind": "prefill",
        "enabled": "${prefill}",
        "description": "iorig writes the target once so that reads return written data",
        "workloads": [workload],
    }


def _document(job: JobFile, path: Path, groups: list[list[_Spec]]) -> str:
    specs = [s for g in groups for s in g]
    extents = [s.extent for s in specs if s.extent is not None]
    whole = max(extents, default=0)
    times = [_phase_time(g, whole) for g in groups]
    parameters: dict[str, Any] = {
        "size": {
            "type": "size",
            "default": _size_text(whole),
            "help": "the target; every job's size is cut to fit in it (default: the "
            "job file's largest extent)",
        },
        "duration": {
            "type": "duration",
            "default": _duration_text(max(t.ms for t in times)),
            "help": "the longest a phase runs (each runs its job's runtime, or until its "
            "sized jobs are through, at most this)",
        },
        DATA_RULES: {
            "type": "bool",
            "default": False,
            "help": "iorig's data rules where the file does not say otherwise: fresh random "
            "data in every write (refill_buffers), no random map (norandommap) and a new "
            "sequence each run (randrepeat=0); by default fio's own",
        },
    }
    phases: list[dict[str, Any]] = []
    # a null engine reads nothing: fio lays nothing out for it
    readers = [
        s for s in specs if s.workload["rw"] in READS | TRIMS and s.workload["engine"] != "null"
    ]
    if readers:
        parameters["prefill"] = {
            "type": "bool",
            "default": True,
            "help": "write the target once before the jobs read or trim",
        }
        phases.append(_prefill(bool(readers[0].workload["direct"])))
    same = len({(t.ms, t.expression) for t in times}) == 1 and times[0].expression is None
    for group, time in zip(groups, times, strict=True):
        workloads = []
        for s in group:
            w = dict(s.workload) | {"data_rules": f"${{{DATA_RULES}}}"}
            if s.size is not None:
                room = f"size - {s.offset}" if s.offset else "size"
                w["size"] = f"${{max(0, min({room}, {s.size}))}}"
            workloads.append(w)
        first = group[0]
        phase: dict[str, Any] = {
            "name": first.label,
            "kind": "measure",
            "duration": "${duration}" if same else f"${{min(duration, {time.text})}}",
            "description": " ".join(
                filter(
                    None,
                    (
                        f"[{', '.join(s.section.name for s in group)}] of {path.name}, line "
                        f"{first.section.line}",
                        first.description,
                    ),
                )
            ),
            "workloads": workloads,
        }
        if first.sized:
            phase["until"] = "done"  # as fio runs it: until through, the duration a limit
        if first.ramp_us:
            phase["ramp"] = _seconds(first.ramp_us)
        phases.append(phase)
    name = _NAME_RE.sub("-", path.stem.lower()).strip("-_")[:60]
    document = {
        "iorig": 1,
        "name": name if name and name[0].isalnum() else "jobfile",
        "version": 1,
        "title": f"fio job file {path.name}",
        "description": f"The jobs of {path}, each stonewall group a measured phase.",
        "parameters": parameters,
        "profiles": {"quick": {"size": "64MiB", "duration": "5s"}},
        "targets": {"data": {"size": "${size}"}},
        "phases": phases,
    }
    return f"# generated by iorig from the fio job file {path}\n" + yaml.safe_dump(
        document, sort_keys=False
    )
