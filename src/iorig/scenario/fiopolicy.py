"""What iorig does with each option of a user's fio job file.

Every option is one of:

* **mapped** — iorig's own model has it (``rw``, ``bs``, ``iodepth``,
  ``numjobs``, ``size``, ``runtime`` …): ``iorig.scenario.fiojobs`` turns it into a
  workload or phase field, and iorig renders it;
* **passed** — fio gets it as given (``fsync``, ``thinktime``,
  ``norandommap`` …), its value parsed here and checked again by the job
  renderer's whitelist (``iorig.fio.jobfile``);
* **ignored** — it changes only fio's own printed report, which iorig does
  not read (``group_reporting``, ``name``, ``percentile_list`` …);
* **refused** — it runs a command, reads or writes a file the job file
  names, or changes the system (``exec_prerun``, ``read_iolog``,
  ``write_lat_log``, ``ioscheduler``, ``cgroup`` …), or fio would measure
  something other than what iorig reports (``log_avg_msec``, ``fill_device``,
  ``steadystate`` …); each with the reason and the fix;
* anything else is refused as an option iorig does not check.

Values are parsed as fio parses them (parse.c), to a strict subset: sizes
are whole numbers with fio's suffixes in its default ``kb_base=1024`` (``4k``
and ``4KB`` are 4096, ``4KiB`` is 4000, as fio has it), times whole numbers
with fio's units; fio's arithmetic ``(…)``, percentages and hexadecimal are
refused, so no value means something else to fio than to iorig.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum

OptionValue = str | int | bool


class Handling(StrEnum):
    MAPPED = "mapped"
    PASSED = "passed"
    IGNORED = "ignored"
    UNSAFE = "unsafe"  # refused: runs, reads or writes what iorig cannot check
    UNMEASURABLE = "unmeasurable"  # refused: iorig could not measure it honestly
    UNKNOWN = "unknown"  # refused: not an option iorig checks


@dataclass(frozen=True)
class Rule:
    handling: Handling
    why: str = ""
    fix: str = ""
    parse: Callable[[str | None], OptionValue] | None = None  # passed options


# ---------------------------------------------------------------- values


class ValueProblem(ValueError):
    """A value iorig does not read the way fio would."""


_SIZE_RE = re.compile(r"^(\d{1,20})([kmgtp]?)(i?b?)$", re.IGNORECASE)
_POWERS = {"": 0, "k": 1, "m": 2, "g": 3, "t": 4, "p": 5}
_TIME_RE = re.compile(r"^(\d{1,15})(us|usec|ms|msec|s|m|h|d)?$", re.IGNORECASE)
_TIME_US = {
    "us": 1,
    "usec": 1,
    "ms": 1000,
    "msec": 1000,
    "s": 10**6,
    "m": 60 * 10**6,
    "h": 3600 * 10**6,
    "d": 86400 * 10**6,
}
MAX_U64 = 2**63 - 1


def fio_size(text: str | None) -> int:
    """Bytes, as fio reads a size with kb_base=1024 (its default): k, m, g,
    t, p and kb … are powers of 1024, kib, mib … powers of 1000."""
    match = _SIZE_RE.match(text or "")
    if not match or (match.group(3) and not match.group(2)):
        raise ValueProblem(
            f"{text!r} is not a size iorig reads (a whole number of bytes, or with k, m, g, t: "
            "4k, 10g)"
        )
    number, prefix, suffix = match.groups()
    base = 1000 if suffix.lower() == "ib" else 1024  # fio's compatibility mode
    value = int(number) * base ** _POWERS[prefix.lower()]
    if value > MAX_U64:
        raise ValueProblem(f"{text!r} is larger than fio takes")
    return value


def fio_time_us(text: str | None, default_unit: str = "s") -> int:
    """Microseconds, as fio reads a time (a bare number in ``default_unit``)."""
    match = _TIME_RE.match(text or "")
    if not match:
        raise ValueProblem(
            f"{text!r} is not a time iorig reads (a whole number with us, ms, s, m, h or d)"
        )
    value = int(match.group(1)) * _TIME_US[(match.group(2) or default_unit).lower()]
    if value > MAX_U64:
        raise ValueProblem(f"{text!r} is longer than fio takes")
    return value


def fio_bool(text: str | None) -> bool:
    """A flag: bare (on), 1 or 0."""
    if text is None or text == "1":
        return True
    if text == "0":
        return False
    raise ValueProblem(f"{text!r} is not 0 or 1")


def fio_int(lo: int, hi: int) -> Callable[[str | None], int]:
    def parse(text: str | None) -> int:
        if text is None or not re.fullmatch(r"-?\d{1,20}", text):
            raise ValueProblem(f"{text!r} is not a whole number")
        value = int(text)
        if not lo <= value <= hi:
            raise ValueProblem(f"{value} is out of range {lo}..{hi}")
        return value

    return parse


def fio_choice(*allowed: str) -> Callable[[str | None], str]:
    def parse(text: str | None) -> str:
        if text not in allowed:
            raise ValueProblem(f"{text!r} is not one of {', '.join(allowed)}")
        return text

    return parse


def _sizes(text: str | None) -> int:
    return fio_size(text)


def _micros(text: str | None) -> int:
    return fio_time_us(text, default_unit="us")


_U32 = 2**32 - 1

# ---------------------------------------------------------------- the table

ALIASES = {
    "readwrite": "rw",
    "blocksize": "bs",
    "blocksize_range": "bsrange",
    "timeout": "runtime",
    "wait_for_previous": "stonewall",
    "iodepth_batch_submit": "iodepth_batch",
    "iodepth_batch_complete": "iodepth_batch_complete_min",
    "io_limit": "io_size",
    "fileoffset": "offset",
    "nr_files": "nrfiles",
    "fill_fs": "fill_device",
    "iomem": "mem",
    "ratemin": "rate_min",
    "ratecycle": "rate_cycle",
    "disable_bw": "disable_bw_measurement",
    "ss": "steadystate",
    "ss_dur": "steadystate_duration",
    "ss_ramp": "steadystate_ramp_time",
    "blockalign": "ba",
    "blocksize_unaligned": "bs_unaligned",
}

MAPPED = frozenset(
    {
        "rw",
        "bs",
        "bsrange",
        "bssplit",
        "iodepth",
        "numjobs",
        "size",
        "offset",
        "offset_increment",
        "rwmixread",
        "rwmixwrite",
        "direct",
        "buffered",
        "ioengine",
        "rate_iops",
        "rate",
        "random_distribution",
        "buffer_compress_percentage",
        "dedupe_percentage",
        "continue_on_error",
        "time_based",
        "runtime",
        "ramp_time",
        "filename",
        "directory",
        "stonewall",
        "kb_base",
        "loops",
    }
)

# fio gets these as the file gives them (iorig.fio.jobfile's whitelist has each)
PASSED: dict[str, Callable[[str | None], OptionValue]] = {
    "fsync": fio_int(0, _U32),
    "fdatasync": fio_int(0, _U32),
    "end_fsync": fio_bool,
    "fsync_on_close": fio_bool,
    "sync": fio_choice("0", "1", "none", "sync", "dsync"),
    # a sized job's end (iorig.scenario.fiojobs: such a job runs until it is through)
    "io_size": _sizes,
    "number_ios": fio_int(1, _U32),
    "thinktime": _micros,
    "thinktime_spin": _micros,
    "thinktime_blocks": fio_int(1, _U32),
    "thinktime_blocks_type": fio_choice("complete", "issue"),
    "iodepth_batch": fio_int(0, 65536),
    "iodepth_batch_complete_min": fio_int(0, 65536),
    "iodepth_batch_complete_max": fio_int(0, 65536),
    "iodepth_low": fio_int(0, 65536),
    "norandommap": fio_bool,
    "randrepeat": fio_bool,
    "allrandrepeat": fio_bool,
    "randseed": fio_int(0, MAX_U64),
    "random_generator": fio_choice("tausworthe", "lfsr", "tausworthe64"),
    "percentage_random": fio_int(0, 100),
    "refill_buffers": fio_bool,
    "scramble_buffers": fio_bool,
    "zero_buffers": fio_bool,
    "buffer_compress_chunk": _sizes,
    "rate_process": fio_choice("linear", "poisson"),
    "invalidate": fio_bool,
    "hipri": fio_bool,
    "fixedbufs": fio_bool,
    "registerfiles": fio_bool,
    "sqthread_poll": fio_bool,
    "nowait": fio_bool,
    "userspace_reap": fio_bool,
    "thread": fio_bool,
    "nice": fio_int(-20, 19),
    "prio": fio_int(0, 7),
    "prioclass": fio_int(0, 3),
}

_REPORT_ONLY = "it changes only fio's own printed report; iorig makes its figures itself"
IGNORED = {
    "name": "iorig names each job by its section (fio's name= would rename them all)",
    "description": "kept as the phase's description",
    "group_reporting": "fio would merge its jobs' figures; iorig merges each phase's jobs "
    "itself (histograms added, seconds aligned) and reports the phase",
    "new_group": _REPORT_ONLY,
    "percentile_list": _REPORT_ONLY,
    "significant_figures": _REPORT_ONLY,
    "unit_base": _REPORT_ONLY,
    "clat_percentiles": _REPORT_ONLY,
    "lat_percentiles": _REPORT_ONLY,
    "slat_percentiles": _REPORT_ONLY,
    "disk_util": _REPORT_ONLY,
}

_RUNS = "it runs a program"
_FILES = "it reads or writes a file the job file names, outside iorig's target"
_LOGS = (
    "it writes a log file where the job file says, and iorig writes its own one-second "
    "logs and latency histograms with the same options"
)
_VERIFY = (
    "fio's checking would add reads to the measured phase, counted as the workload's; iorig "
    "checks data in verify phases of their own (the integrity scenario)"
)
_REMOVE = "remove it from the job file"
UNSAFE: dict[str, tuple[str, str]] = {
    "exec_prerun": (_RUNS + " before the job", "run it yourself before iorig"),
    "exec_postrun": (_RUNS + " after the job", "run it yourself after iorig"),
    "ioscheduler": (
        "it switches the device's I/O scheduler in sysfs, a system setting that outlives the run",
        "set the scheduler yourself and describe it with --sut",
    ),
    "read_iolog": (_FILES + " (an I/O trace to replay)", _REMOVE),
    "read_iolog_chunked": (_FILES + " (an I/O trace to replay)", _REMOVE),
    "write_iolog": (_FILES + " (an I/O trace)", _REMOVE),
    "opendir": ("it adds every file under a directory as the job's files", _REMOVE),
    "cgroup": ("it creates cgroups and moves fio into them", _REMOVE),
    "cgroup_nodelete": ("it creates cgroups and moves fio into them", _REMOVE),
    "cgroup_weight": ("it creates cgroups and moves fio into them", _REMOVE),
    "uid": ("it switches fio to another user", _REMOVE),
    "gid": ("it switches fio to another group", _REMOVE),
    "profile": ("a built-in fio profile adds options iorig cannot check", _REMOVE),
    "allow_mounted_write": ("it lets fio write to a mounted filesystem's device", _REMOVE),
    "verify_state_load": (_FILES + " (a saved write state)", _REMOVE),
    "verify_state_save": (_FILES + " (a saved write state)", _REMOVE),
    "write_bw_log": (_LOGS, _REMOVE),
    "write_lat_log": (_LOGS, _REMOVE),
    "write_iops_log": (_LOGS, _REMOVE),
    "write_hist_log": (_LOGS, _REMOVE),
    "filename_format": (
        "it names many files; iorig runs a job file on one target",
        "give one filename= (or --target)",
    ),
    "unique_filename": (
        "it names files by client address; iorig runs a job file on one target",
        _REMOVE,
    ),
    "mem": ("it can map a file the job file names as the I/O buffers", _REMOVE),
}
_UNSAFE_PREFIXES = {
    "exec_": (_RUNS, _REMOVE),
    "trigger": (_RUNS + " (fio's triggers run commands)", _REMOVE),
    "replay_": (_FILES + " (an I/O trace to replay)", _REMOVE),
    "merge_blktrace": (_FILES + " (blktrace files)", _REMOVE),
    "cgroup": ("it creates cgroups and moves fio into them", _REMOVE),
}

_LOGGED = (
    "it changes the logs iorig reads its per-second figures and percentiles from (one-second "
    "averages and histograms)"
)
_STATS = (
    "fio would stop measuring (or merge) what iorig reports: completion latency per I/O, "
    "each direction, every second"
)
_PIN = (
    "it pins fio's jobs to CPUs inside fio, where iorig's audit cannot see it, and would blame "
    "the storage for a starved generator"
)
UNMEASURABLE: dict[str, tuple[str, str]] = {
    "fill_device": (
        "it writes until the device is full: iorig runs a job file on a target it sizes",
        "give size=",
    ),
    "startdelay": (
        "it starts the job late, while the phase's other jobs run: iorig measures "
        "a phase over the seconds all its jobs ran",
        _REMOVE,
    ),
    "wait_for": (
        "it starts a job when another ends, inside one phase: iorig measures a phase "
        "over the seconds all its jobs ran",
        "use stonewall (a phase of its own)",
    ),
    "exitall": ("it ends every job when one ends", _REMOVE),
    "exit_what": ("it ends other jobs when one ends", _REMOVE),
    "exitall_on_error": ("it ends every job when one fails", _REMOVE),
    "steadystate": (
        "fio would end the job on its own steady-state rule",
        "use iorig's until: steady (a scenario) or run --precision",
    ),
    "steadystate_duration": ("fio would end the job on its own steady-state rule", _REMOVE),
    "steadystate_ramp_time": ("fio would end the job on its own steady-state rule", _REMOVE),
    "latency_target": (
        "fio would change the queue depth as it runs, so no phase measures one load",
        "use iorig knee --slo p99<=…",
    ),
    "latency_window": ("fio would change the queue depth as it runs", _REMOVE),
    "latency_percentile": ("fio would change the queue depth as it runs", _REMOVE),
    "latency_run": ("fio would change the queue depth as it runs", _REMOVE),
    "max_latency": ("it ends the job at the first slow I/O", _REMOVE),
    "rate_min": ("it ends the job when it is slower than a rate", _REMOVE),
    "rate_iops_min": ("it ends the job when it is slower than a rate", _REMOVE),
    "stats": (_STATS, _REMOVE),
    "gtod_reduce": (_STATS, _REMOVE),
    "disable_lat": (_STATS, _REMOVE),
    "disable_clat": (_STATS, _REMOVE),
    "disable_slat": (_STATS, _REMOVE),
    "disable_bw_measurement": (_STATS, _REMOVE),
    "unified_rw_reporting": (_STATS, _REMOVE),
    "clocksource": ("it changes fio's clock, on which iorig's seconds are cut", _REMOVE),
    "cpus_allowed": (_PIN, "pin iorig itself (taskset -c … iorig run …)"),
    "cpus_allowed_policy": (_PIN, _REMOVE),
    "cpumask": (_PIN, "pin iorig itself (taskset -c … iorig run …)"),
    "numa_cpu_nodes": (_PIN, "pin iorig itself (numactl … iorig run …)"),
    "numa_mem_policy": (_PIN, "pin iorig itself (numactl … iorig run …)"),
    "per_job_logs": (_LOGGED, _REMOVE),
    "bwavgtime": (_LOGGED, _REMOVE),
    "iopsavgtime": (_LOGGED, _REMOVE),
    "log_entries": (_LOGGED, _REMOVE),
    "unlink": ("iorig creates and removes its target itself (run --keep-files keeps it)", _REMOVE),
    "unlink_each_loop": ("iorig creates and removes its target itself", _REMOVE),
    "create_only": ("the job would only lay out its file: it measures nothing", _REMOVE),
    "nrfiles": (
        "it spreads a job over several files; iorig runs a job file on one target",
        _REMOVE,
    ),
    "filesize": (
        "it sizes several files of a job; iorig runs a job file on one target",
        "use size=",
    ),
    "rw_sequencer": ("iorig's rw has no offset sequencer", _REMOVE),
    "zonemode": ("iorig's targets have no zones", _REMOVE),
}
_UNMEASURABLE_PREFIXES = {
    "log_": (_LOGGED, _REMOVE),
    "verify": (_VERIFY, _REMOVE),
    "do_verify": (_VERIFY, _REMOVE),
    "experimental_verify": (_VERIFY, _REMOVE),
    "trim_": (_VERIFY, _REMOVE),
    "zone": ("iorig's targets have no zones", _REMOVE),
}


def canonical(name: str) -> str:
    """The option's own name (fio's alias resolved)."""
    return ALIASES.get(name, name)


def rule(name: str) -> Rule:
    """What iorig does with option ``name`` (as written, or its alias)."""
    name = canonical(name)
    if name in MAPPED:
        return Rule(Handling.MAPPED)
    if name in PASSED:
        return Rule(Handling.PASSED, parse=PASSED[name])
    if name in IGNORED:
        return Rule(Handling.IGNORED, why=IGNORED[name])
    if name in UNSAFE:
        return Rule(Handling.UNSAFE, *UNSAFE[name])
    for prefix, (why, fix) in _UNSAFE_PREFIXES.items():
        if name.startswith(prefix):
            return Rule(Handling.UNSAFE, why, fix)
    if name in UNMEASURABLE:
        return Rule(Handling.UNMEASURABLE, *UNMEASURABLE[name])
    for prefix, (why, fix) in _UNMEASURABLE_PREFIXES.items():
        if name.startswith(prefix):
            return Rule(Handling.UNMEASURABLE, why, fix)
    return Rule(
        Handling.UNKNOWN,
        "it is not among the options iorig checks and passes to fio",
        "remove it, or ask for it to be added (docs/guide/scenario-files.md)",
    )


def passed_value(name: str, value: OptionValue) -> OptionValue:
    """A scenario's ``fio_options`` entry checked as a job file's would be:
    only passed options, each value as its parser reads it."""
    parse = PASSED.get(name)
    if parse is None:
        raise ValueError(
            f"{name!r} is not an option iorig passes to fio as given ({', '.join(sorted(PASSED))})"
        )
    text = value if isinstance(value, str) else str(int(value))
    try:
        parsed = parse(text)
    except ValueProblem as exc:
        raise ValueError(f"{name}: {exc}") from None
    return parsed
