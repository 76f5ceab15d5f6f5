"""Render fio job files from typed options, through a whitelist.

Scenario files are data: only the options below can reach fio, every value
is checked by its option's validator, and characters that fio would
interpret (``$`` expansion, ``;``/``#`` comments, newlines, ``:`` as a file
separator) are rejected or escaped. Options that run commands or read other
files (``exec_prerun``, ``include``, ``ioengine=exec`` …) have no validator
and therefore cannot be rendered at all.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from iorig.errors import UserError

OptionValue = str | int | float | bool | tuple[str, ...]

# sync … posixaio: a user's fio job file may name them; falloc: trims of a file
# (fio punches holes with it; its other engines trim block devices only)
ENGINES = (
    "io_uring",
    "libaio",
    "psync",
    "filestat",
    "null",
    "sync",
    "pvsync",
    "pvsync2",
    "posixaio",
    "falloc",
)
RW_MODES = (
    "read",
    "write",
    "randread",
    "randwrite",
    "randrw",
    "rw",
    "trim",
    "randtrim",
    "trimwrite",
    "randtrimwrite",
)
CONTINUE_ON_ERROR = ("none", "read", "write", "io", "verify", "all")  # fio's classes
_FORBIDDEN_CHARS = {
    "$": "fio expands $VAR",
    ";": "fio starts a comment",
    "#": "fio starts a comment",
    "\n": "newline",
    "\r": "carriage return",
    "\0": "NUL",
    "\\": "backslash",
}


class JobFileError(UserError):
    """A value that cannot be passed to fio safely."""


def _check_text(option: str, text: str) -> str:
    for char, why in _FORBIDDEN_CHARS.items():
        if char in text:
            raise JobFileError(
                f"{option}={text!r}: the character {char!r} cannot be passed to fio ({why})",
                hint="rename the path or value so it does not contain it",
            )
    if text != text.strip():
        raise JobFileError(f"{option}={text!r}: leading or trailing spaces are not allowed")
    return text


def _int(lo: int, hi: int) -> Callable[[str, OptionValue], str]:
    def check(option: str, value: OptionValue) -> str:
        if isinstance(value, bool) or not isinstance(value, int):
            raise JobFileError(f"{option} must be a whole number, got {value!r}")
        if not lo <= value <= hi:
            raise JobFileError(f"{option}={value} is out of range {lo}..{hi}")
        return str(value)

    return check


def _bool(option: str, value: OptionValue) -> str:
    if not isinstance(value, bool):
        raise JobFileError(f"{option} must be true or false, got {value!r}")
    return "1" if value else "0"


def _choice(*allowed: str) -> Callable[[str, OptionValue], str]:
    def check(option: str, value: OptionValue) -> str:
        if value not in allowed:
            raise JobFileError(f"{option}={value!r} is not one of {', '.join(allowed)}")
        return str(value)

    return check


_FILE_SERVICE_RE = re.compile(r"^(random|roundrobin|sequential)(:[1-9][0-9]{0,9})?$")


def _file_service(option: str, value: OptionValue) -> str:
    """fio's file_service_type: how a job picks its next file, and after how many I/Os."""
    if not isinstance(value, str) or not _FILE_SERVICE_RE.match(value):
        raise JobFileError(
            f"{option}={value!r} is not random, roundrobin or sequential (with :N I/Os per file)"
        )
    return value


def _path(option: str, value: OptionValue) -> str:
    """The one way a path reaches a job file: checked, then its colons escaped
    (fio splits ``filename=`` and ``directory=`` on ':'; '\\:' is a literal one)."""
    if not isinstance(value, str):
        raise JobFileError(f"{option}={value!r}: a path is text")
    text = _check_text(option, value)
    # relative paths are for fio servers (their working directory), never upwards
    if not text or ".." in text.split("/"):
        raise JobFileError(f"{option}={text!r}: an absolute path, or a relative one without '..'")
    return text.replace(":", "\\:")


def _directories(option: str, value: OptionValue) -> str:
    # fio hands several directories to the jobs in turn, joined by ':'. They
    # arrive as a tuple so that a colon inside a name is escaped, not split.
    if not isinstance(value, tuple) or not value:
        raise JobFileError(
            f"{option}={value!r}: give a list of directories, not one ':'-joined string"
        )
    return ":".join(_path(option, part) for part in value)


_FORMAT_TOKENS = ("$jobnum", "$filenum", "$jobname")


def _filename_format(option: str, value: OptionValue) -> str:
    # fio's own tokens only; everything else plain name characters
    text = str(value)
    plain = text
    for token in _FORMAT_TOKENS:
        plain = plain.replace(token, "")
    if not plain or not set(plain) <= _NAME_CHARS:
        raise JobFileError(
            f"{option}={text!r}: only name characters and {', '.join(_FORMAT_TOKENS)}"
        )
    return text


def _millis(option: str, value: OptionValue) -> str:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise JobFileError(f"{option} must be a positive number of milliseconds, got {value!r}")
    return f"{value}ms"


def _log_name(option: str, value: OptionValue) -> str:
    # Logs go to fio's working directory under a plain name, so the job text
    # does not depend on where a run's scratch directory happened to be.
    text = str(value)
    if not text or not set(text) <= _NAME_CHARS or text.startswith("."):
        raise JobFileError(f"{option}={text!r}: log names are plain names (a-z, 0-9, -, _)")
    return text


def _flag(option: str, value: OptionValue) -> str | None:
    """Options fio takes without a value; True renders the bare name."""
    if value is not True:
        raise JobFileError(f"{option} is a flag and only takes true")
    return None


def _distribution(option: str, value: OptionValue) -> str:
    text = _check_text(option, str(value))
    kind, _, rest = text.partition(":")
    if kind not in ("random", "zipf", "pareto", "normal", "zoned", "zoned_abs"):
        raise JobFileError(f"{option}={text!r}: unknown distribution {kind!r}")
    if kind != "random" and not rest:
        raise JobFileError(f"{option}={text!r}: {kind} needs a parameter, e.g. {kind}:1.2")
    allowed = set("0123456789.,/:%")
    if not set(rest) <= allowed:
        raise JobFileError(f"{option}={text!r}: unexpected characters in the parameter")
    return text


def _bssplit(option: str, value: OptionValue) -> str:
    # normalised by the scenario model to "<bytes>/<percent>:..."
    text = _check_text(option, str(value))
    for item in text.split(":"):
        size, sep, pct = item.partition("/")
        if not (sep and size.isdigit() and pct.replace(".", "", 1).isdigit()):
            raise JobFileError(f"{option}={text!r}: expected <bytes>/<percent> pairs")
    return text


_U32 = 2**32 - 1
_U64 = 2**63 - 1

# option -> validator returning the rendered value (None = bare flag)
WHITELIST: dict[str, Callable[[str, OptionValue], str | None]] = {
    "ioengine": _choice(*ENGINES),
    "rw": _choice(*RW_MODES),
    "bs": _int(512, 2**30),
    "size": _int(1, _U64),
    "io_size": _int(1, _U64),
    "offset": _int(0, _U64),
    "offset_increment": _int(0, _U64),
    "filename": _path,
    "directory": _directories,
    "filename_format": _filename_format,
    "nrfiles": _int(1, 1_000_000),
    "filesize": _int(1, _U64),
    "file_service_type": _file_service,
    "openfiles": _int(1, 1_000_000),
    "ramp_time": _millis,
    "iodepth": _int(1, 65536),
    "numjobs": _int(1, 4096),
    "rwmixread": _int(0, 100),
    "direct": _bool,
    "time_based": _bool,
    "runtime": _millis,
    "norandommap": _bool,
    "randrepeat": _bool,
    "refill_buffers": _bool,
    "buffer_compress_percentage": _int(0, 100),
    "buffer_compress_chunk": _int(1, 2**30),
    "dedupe_percentage": _int(0, 100),
    "random_distribution": _distribution,
    "rate_iops": _int(1, _U32),
    "rate": _int(1, _U64),
    "rate_process": _choice("linear", "poisson"),
    "new_group": _flag,
    "write_iops_log": _log_name,
    "write_bw_log": _log_name,
    "write_lat_log": _log_name,
    "write_hist_log": _log_name,
    "log_avg_msec": _int(1, _U32),
    "log_hist_msec": _int(1, _U32),
    "log_hist_coarseness": _int(0, 6),
    "log_unix_epoch": _bool,
    "unlink": _bool,
    "number_ios": _int(1, _U32),
    "create_only": _bool,
    "verify_state_save": _bool,
    "verify_state_load": _bool,
    "verify_only": _bool,
    "continue_on_error": _choice(*CONTINUE_ON_ERROR),
    "error_dump": _bool,
    "per_job_logs": _bool,
    "loops": _int(1, 1000),
    "verify": _choice("crc32c", "md5", "sha256", "xxhash"),
    "verify_interval": _int(512, 2**30),
    "bssplit": _bssplit,
    "flow_id": _int(0, 1000),
    "flow": _int(1, 1000),
    "flow_sleep": _int(1, 1_000_000),
    "do_verify": _bool,
    "verify_fatal": _bool,
    "verify_dump": _bool,
    "thread": _flag,
    "fallocate": _choice("none", "native", "posix", "keep"),
    "allow_file_create": _bool,
    # what a fio job file may pass as written (iorig.scenario.fiopolicy.PASSED)
    "fsync": _int(0, _U32),
    "fdatasync": _int(0, _U32),
    "end_fsync": _bool,
    "fsync_on_close": _bool,
    "sync": _choice("0", "1", "none", "sync", "dsync"),
    "thinktime": _int(0, _U64),
    "thinktime_spin": _int(0, _U64),
    "thinktime_blocks": _int(1, _U32),
    "thinktime_blocks_type": _choice("complete", "issue"),
    "iodepth_batch": _int(0, 65536),
    "iodepth_batch_complete_min": _int(0, 65536),
    "iodepth_batch_complete_max": _int(0, 65536),
    "iodepth_low": _int(0, 65536),
    "allrandrepeat": _bool,
    "randseed": _int(0, _U64),
    "random_generator": _choice("tausworthe", "lfsr", "tausworthe64"),
    "percentage_random": _int(0, 100),
    "scramble_buffers": _bool,
    "zero_buffers": _bool,
    "invalidate": _bool,
    "hipri": _bool,
    "fixedbufs": _bool,
    "registerfiles": _bool,
    "sqthread_poll": _bool,
    "nowait": _bool,
    "userspace_reap": _bool,
    "nice": _int(-20, 19),
    "prio": _int(0, 7),
    "prioclass": _int(0, 3),
}

_NAME_CHARS = set("abcdefghijklmnopqrstuvwxyz0123456789-_.")


@dataclass(frozen=True)
class Section:
    name: str
    options: Mapping[str, OptionValue]
    # a workload's job after its first, as a section of its own (fio flow
    # groups, iorig.run.jobtext.flow_groups): the name repeats, right after
    job: int = 0


def render_options(options: Mapping[str, OptionValue]) -> list[str]:
    lines = []
    for option, value in options.items():
        validator = WHITELIST.get(option)
        if validator is None:
            raise JobFileError(
                f"fio option {option!r} is not on iorig's whitelist",
                hint="iorig renders only options it validates; commands and includes never run",
            )
        rendered = validator(option, value)
        lines.append(option if rendered is None else f"{option}={rendered}")
    return lines


def render(
    global_options: Mapping[str, OptionValue], sections: list[Section], comment: str = ""
) -> str:
    """The text of a fio job file."""
    out = []
    for line in comment.splitlines():
        out.append("; " + line.replace("\r", ""))
    if global_options:
        out.append("[global]")
        out += render_options(global_options)
    seen = set()
    previous = ""
    for section in sections:
        if not section.name or not set(section.name) <= _NAME_CHARS or section.name == "global":
            raise JobFileError(f"bad fio section name {section.name!r}")
        again = section.job > 0 and section.name == previous
        previous = section.name
        if section.name in seen and not again:
            raise JobFileError(f"duplicate fio section name {section.name!r}")
        seen.add(section.name)
        out.append("")
        out.append(f"[{section.name}]")
        out += render_options(section.options)
    return "\n".join(out) + "\n"


LOG_INTERVAL_MS = 1000
MAX_OPEN_FILES = 16  # per job: thousands of jobs × files would exhaust descriptors
FLOW_SLEEP_US = 30


@dataclass(frozen=True)
class FileSetLayout:
    """Where a file-set workload's files are: each fio job's ``files`` files of
    ``file_size``, named ``<name>.<job>.<file>``, in one of ``directories``
    (fio hands them to the jobs in turn)."""

    name: str
    directories: tuple[str, ...]
    files: int
    file_size: int
    whole: bool = False  # each file whole, in a random order (a data loader's samples)


def continue_options(value: str | None, check: bool) -> dict[str, OptionValue]:
    """fio's ``continue_on_error`` for a workload (``value``: the scenario's,
    None when unset) and ``error_dump``, which makes fio print each error it
    goes on past (one ``fio: io_u error …`` line: what iorig counts by type).

    A verify phase's check (``check``) always goes on past verify errors, to
    find every bad block, not only the first; it reads only, so a scenario's
    read, write or io there becomes all (read and verify)."""
    if check:
        wanted = "verify" if value in (None, "none", "verify") else "all"
    elif value in (None, "none"):
        return {}
    else:
        wanted = value
    return {"continue_on_error": wanted} | ({"error_dump": True} if value else {})


def workload_options(  # noqa: C901, PLR0912, PLR0913
    *,
    engine: str,
    rw: str,
    bs: int,
    filename: str,
    size: int,
    offset: int,
    iodepth: int,
    jobs: int,
    direct: bool,
    read_pct: float | None,
    rate_iops: int | None,
    runtime_s: float | None,
    log_prefix: str,
    loops: int = 1,
    compress_pct: float = 0,
    dedupe_pct: float = 0,
    distribution: str = "random",
    bssplit: str | None = None,
    offset_increment: int | None = None,
    rate_bytes: int | None = None,
    flow: int | None = None,
    verify: str = "none",
    verify_interval: int | None = None,
    check: bool = False,
    state: str | None = None,
    fileset: FileSetLayout | None = None,
    log_every_io: bool = False,
    continue_on_error: str | None = None,
    time_based: bool = True,
    end_fsync: bool = False,
    data_rules: bool = True,
) -> dict[str, OptionValue]:
    """fio options for one workload: iorig's typed model, nothing else.

    ``verify`` makes writes carry checksums (checked later, not by this job);
    ``check`` makes a read job verify every block against them;
    ``state="save"`` makes a writing job record what it had acknowledged when
    it ends (fio's verify state, in fio's ``--aux-path``); ``state="load"``
    makes a checking job (``rw`` read or randread) replay that writer (the
    same job with ``rw`` write or randwrite and ``verify_only``) and check
    exactly the writes it had acknowledged, each against its only generation;
    ``log_every_io`` logs each completion instead of one-second averages;
    ``data_rules`` applies iorig's (fresh random data in every write, no
    random map and a new sequence each run, compress chunks of 4 KiB), and
    False leaves fio's defaults for each, as a fio job file has them.
    """
    if state == "load":
        # fio replays the writer's own job definition, its writes turned into reads
        rw = {"read": "write", "randread": "randwrite"}[rw]
    options: dict[str, OptionValue] = {"ioengine": engine, "rw": rw, "bs": bs}
    if fileset is None:
        options |= {"filename": filename, "size": size}
    else:
        options |= {
            "directory": tuple(fileset.directories),
            "filename_format": f"{fileset.name}.$jobnum.$filenum",
            "nrfiles": fileset.files,
            "filesize": fileset.file_size,
            "size": fileset.files * fileset.file_size,
            # whole: fio keeps a file for this many I/Os, and moves on once it is through
            "file_service_type": (
                f"random:{-(-fileset.file_size // bs)}" if fileset.whole else "random"
            ),
            "openfiles": 1 if fileset.whole else min(fileset.files, MAX_OPEN_FILES),
        }
    if engine == "filestat":
        # a stat per "I/O": no data moves, so no buffers, depth or logs of bytes
        options |= {"numjobs": jobs}
        if rate_iops:
            options |= {"rate_iops": rate_iops, "rate_process": "poisson"}
        if runtime_s is not None:
            options |= {"time_based": True, "runtime": max(1, round(runtime_s * 1000))}
        return options | _log_options(log_prefix, log_every_io)
    if offset:
        options["offset"] = offset
    if offset_increment:
        options["offset_increment"] = offset_increment
    options |= {"iodepth": iodepth, "numjobs": jobs, "direct": direct}
    if rw in ("randrw", "rw"):
        options["rwmixread"] = round(read_pct if read_pct is not None else 50)
    options |= _data_options(rw, state, distribution, compress_pct, data_rules)
    if dedupe_pct:
        options["dedupe_percentage"] = round(dedupe_pct)
    if bssplit:
        options["bssplit"] = bssplit
    if loops > 1:
        options["loops"] = loops
    if check or verify != "none":
        options["verify"] = verify if verify != "none" else "crc32c"
        if verify_interval:
            options["verify_interval"] = verify_interval
        if not check:
            options["do_verify"] = False  # a verify phase checks, later
        if state == "load":
            # the saved state says where the writer's acknowledged writes end;
            # saving again would overwrite it with the replay's own count
            options |= {"verify_only": True, "verify_state_load": True, "verify_state_save": False}
        else:
            # no <job>-verify.state files left in fio's (or a server's) directory,
            # unless the scenario asks for them (then in iorig's state directory)
            options["verify_state_save"] = state == "save"
    options |= continue_options(continue_on_error, check)
    if flow:
        # Without flow_sleep a job that is ahead spins: 8 database jobs used
        # 190 % CPU and ran at a twentieth of their rate on a 2-core machine.
        options |= {"flow_id": 1, "flow": flow, "flow_sleep": FLOW_SLEEP_US}
    if end_fsync:
        options["end_fsync"] = True  # in the job's runtime: what a checkpoint costs
    if rate_bytes:
        options["rate"] = rate_bytes
    if rate_iops:
        options |= {"rate_iops": rate_iops, "rate_process": "poisson"}
    if runtime_s is not None:
        # not time-based: the runtime is a limit on a job that ends when it is through
        options |= {"time_based": True} if time_based else {}
        options["runtime"] = max(1, round(runtime_s * 1000))
    return options | _log_options(log_prefix, log_every_io)


def _data_options(
    rw: str, state: str | None, distribution: str, compress_pct: float, data_rules: bool
) -> dict[str, OptionValue]:
    """Offsets and data: iorig's rules, or fio's defaults without them."""
    options: dict[str, OptionValue] = {}
    if rw.startswith("rand") and state is not None:
        # A replayable writer: fio's fixed sequence (the replay regenerates the
        # offsets from it) and its random map (no block written twice in a pass).
        options["randrepeat"] = True
    elif rw.startswith("rand"):
        if data_rules:
            # No random map: every offset may repeat, like real applications; a
            # fresh sequence each run so repeats do not replay a warmed cache.
            options |= {"norandommap": True, "randrepeat": False}
        if distribution != "random":
            options["random_distribution"] = distribution
    if data_rules:
        # Fresh random data for every I/O: storage cannot shrink what it writes,
        # unless the scenario asks for reducible data (and then says so).
        options["refill_buffers"] = True
    if compress_pct:
        options["buffer_compress_percentage"] = round(compress_pct)
        if data_rules:
            options["buffer_compress_chunk"] = 4096  # fio's own is 512 bytes
    return options


def _log_options(log_prefix: str, every_io: bool = False) -> dict[str, OptionValue]:
    if every_io:
        # A slow paced job closes each averaged window at its first completion
        # after the second and never writes its last one: one line per
        # completion (time, latency, direction, size) gives exact seconds.
        return {"write_lat_log": log_prefix}
    # One-second IOPS and bandwidth (sampled by fio's helper thread, nothing
    # per I/O) and per-second latency histograms (one clock read per I/O):
    # enough for any sub-window percentile and each second's mean latency.
    # No write_lat_log: it adds three averaged samples per I/O (slat, clat,
    # lat) for a mean the histogram gives (bench/overhead.py).
    return {
        "write_iops_log": log_prefix,
        "write_bw_log": log_prefix,
        "write_hist_log": log_prefix,
        "log_avg_msec": LOG_INTERVAL_MS,
        "log_hist_msec": LOG_INTERVAL_MS,
    }
