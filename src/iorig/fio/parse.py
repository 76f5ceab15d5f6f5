"""Parse what fio writes: json+ output (with status snapshots) and its logs.

Parsing only: no statistics beyond what fio printed. Merging jobs, aligning
seconds and computing percentiles happen in ``iorig.fio.assemble`` and
``iorig.model.histogram``.
"""

from __future__ import annotations

import errno
import itertools
import json
import os
import re
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import overload

import numpy as np

from iorig.model import IoErrorCount, histogram
from iorig.model.kinds import DDIRS
from iorig.model.secondhists import SecondHists

_DDIR_BY_CODE = {0: "read", 1: "write", 2: "trim"}


class FioOutputError(ValueError):
    """fio's output could not be understood (truncated, wrong format)."""


@dataclass(frozen=True)
class DirStats:
    """One I/O direction of one fio job, as fio reported it."""

    ios: int
    io_bytes: int
    runtime_ms: int
    iops: float
    bytes_per_s: float
    clat_min_ns: float
    clat_max_ns: float
    clat_mean_ns: float
    clat_stddev_ns: float
    slat_mean_ns: float
    lat_mean_ns: float
    lat_max_ns: float
    hist: np.ndarray = field(compare=False, repr=False)


@dataclass(frozen=True)
class JobStats:
    """One fio job (one thread of one section) on one host."""

    name: str
    host: str
    error: int
    usr_cpu_pct: float
    sys_cpu_pct: float
    ctx: int
    job_runtime_ms: int
    dirs: dict[str, DirStats]
    iodepth_level: dict[str, float]
    paced: bool = False  # rate-limited or flow-controlled: may log nothing in a second
    # errors fio counted and went on past (continue_on_error), and the first's
    # errno; None where the job does not continue on errors (fio omits them)
    total_err: int | None = None
    first_error: int = 0

    @property
    def continued(self) -> bool:
        """Its ``error`` is the first of the errors it went on past, not one
        that ended it (fio reports a job's first error as its error then)."""
        return bool(self.total_err) and self.error == self.first_error


@dataclass(frozen=True)
class FioOutput:
    version: str
    timestamp_ms: int
    jobs: tuple[JobStats, ...]
    disk_util: tuple[dict, ...]


def split_documents(text: str) -> list[dict]:
    """The JSON objects in fio's output file, in order.

    With ``--status-interval`` fio appends a full JSON document per interval
    and the final one last. Lines fio prints that are not JSON (warnings such
    as ``fio: ...``) are skipped; a truncated last document is ignored, so a
    file being written can be read at any moment.
    """
    return scan_documents(text)[0]


def scan_documents(text: str) -> tuple[list[dict], int]:
    """Like ``split_documents``, also returning where the last complete one ends."""
    decoder = json.JSONDecoder()
    docs: list[dict] = []
    pos, consumed, end = 0, 0, len(text)
    while pos < end:
        start = text.find("{", pos)
        if start < 0:
            break
        try:
            doc, pos = decoder.raw_decode(text, start)
        except json.JSONDecodeError:
            # Either noise containing "{" or a document still being written.
            next_line = text.find("\n{", start + 1)
            if next_line < 0:
                break
            pos = next_line + 1
            continue
        if isinstance(doc, dict):
            docs.append(doc)
            consumed = pos
    return docs, consumed


def _dir_stats(d: dict) -> DirStats:
    clat = d.get("clat_ns", {})
    slat = d.get("slat_ns", {})
    lat = d.get("lat_ns", {})
    return DirStats(
        ios=int(d.get("total_ios", 0)),
        io_bytes=int(d.get("io_bytes", 0)),
        runtime_ms=int(d.get("runtime", 0)),
        iops=float(d.get("iops", 0.0)),
        bytes_per_s=float(d.get("bw_bytes", 0.0)),
        clat_min_ns=float(clat.get("min", 0)),
        clat_max_ns=float(clat.get("max", 0)),
        clat_mean_ns=float(clat.get("mean", 0.0)),
        clat_stddev_ns=float(clat.get("stddev", 0.0)),
        slat_mean_ns=float(slat.get("mean", 0.0)),
        lat_mean_ns=float(lat.get("mean", 0.0)),
        lat_max_ns=float(lat.get("max", 0)),
        hist=histogram.from_json_bins(clat.get("bins", {})),
    )


def host_label(job: dict, default: str, names: Mapping[str, str] | None = None) -> str:
    """The host of a job entry: ``address:port`` in client/server mode (fio
    names a server by the address given to ``--client`` plus its port, never
    by its own hostname, which many servers may share), or the name
    ``names`` gives that address (a socket: the host it reaches; fio adds
    its default port to a socket's name); ``default`` locally."""
    if "port" not in job or "hostname" not in job:
        return default
    address = str(job["hostname"])
    if names and address in names:
        return names[address]
    label = f"[{address}]:{job['port']}" if ":" in address else f"{address}:{job['port']}"
    return (names or {}).get(label, label)


def _job_stats(job: dict, host: str, names: Mapping[str, str] | None = None) -> JobStats:
    dirs = {ddir: _dir_stats(job[ddir]) for ddir in DDIRS if job.get(ddir, {}).get("total_ios")}
    return JobStats(
        name=str(job.get("jobname", "")),
        host=host_label(job, host, names),
        error=int(job.get("error", 0)),
        usr_cpu_pct=float(job.get("usr_cpu", 0.0)),
        sys_cpu_pct=float(job.get("sys_cpu", 0.0)),
        ctx=int(job.get("ctx", 0)),
        job_runtime_ms=int(job.get("job_runtime", 0)),
        dirs=dirs,
        iodepth_level={k: float(v) for k, v in job.get("iodepth_level", {}).items()},
        paced=_paced(job.get("job options", {})),
        total_err=int(job["total_err"]) if "total_err" in job else None,
        first_error=int(job.get("first_error", 0)),
    )


def _paced(options: dict) -> bool:
    return any(options.get(k) not in (None, "", "0") for k in ("rate_iops", "rate", "flow"))


def parse_document(
    doc: dict, host: str = "local", names: Mapping[str, str] | None = None
) -> FioOutput:
    """One fio json/json+ document -> typed job stats."""
    if "jobs" not in doc and "client_stats" not in doc:
        raise FioOutputError("fio output has neither 'jobs' nor 'client_stats'")
    raw_jobs = doc.get("client_stats") or doc.get("jobs") or []
    # In client/server mode fio adds an "All clients" summary; iorig merges
    # the per-host entries itself.
    jobs = tuple(_job_stats(j, host, names) for j in raw_jobs if j.get("jobname") != "All clients")
    return FioOutput(
        version=str(doc.get("fio version", "")),
        timestamp_ms=int(doc.get("timestamp_ms", 0)),
        jobs=jobs,
        disk_util=tuple(doc.get("disk_util", ())),
    )


def parse_final(
    text: str, host: str = "local", names: Mapping[str, str] | None = None
) -> FioOutput:
    """fio's final result: the last document of a local run (status snapshots
    come before it), or every client's document in client mode (iorig runs
    one fio client per host and keeps their outputs in turn). ``names``: see
    ``host_label``."""
    docs = split_documents(text)
    if not docs:
        raise FioOutputError("fio wrote no JSON result (see its error output)")
    clients = [parse_document(d, host, names) for d in docs if "client_stats" in d]
    if len(clients) < 2:
        return parse_document(docs[-1], host, names)
    return FioOutput(
        version=clients[0].version,
        timestamp_ms=min(c.timestamp_ms for c in clients),
        jobs=tuple(j for c in clients for j in c.jobs),
        disk_util=tuple(d for c in clients for d in c.disk_util),
    )


@dataclass(frozen=True, slots=True)
class LogSample:
    t_ms: int
    value: float
    ddir: str
    bs: int


_CODE_BY_DDIR = {name: code for code, name in _DDIR_BY_CODE.items()}


class SampleLog(Sequence[LogSample]):
    """An averaged iops/bw/lat log as columns: a day's log of one job is
    86,400 lines, and sixteen hosts' logs as objects took gigabytes
    (bench/scale.py). Reads as a sequence of ``LogSample``."""

    __slots__ = ("bs", "ddir", "t_ms", "value")

    def __init__(
        self, t_ms: np.ndarray, value: np.ndarray, ddir: np.ndarray, bs: np.ndarray
    ) -> None:
        self.t_ms = np.asarray(t_ms, dtype=np.int64)
        self.value = np.asarray(value, dtype=np.float64)
        self.ddir = np.asarray(ddir, dtype=np.int8)  # fio's direction codes
        self.bs = np.asarray(bs, dtype=np.int64)

    @classmethod
    def empty(cls) -> SampleLog:
        return cls(*np.zeros((4, 0)))

    @classmethod
    def of(cls, samples: Iterable[LogSample]) -> SampleLog:
        """Columns of ``samples`` (themselves when they are columns already)."""
        if isinstance(samples, SampleLog):
            return samples
        rows = [(s.t_ms, s.value, _CODE_BY_DDIR[s.ddir], s.bs) for s in samples]
        if not rows:
            return cls.empty()
        return cls(*zip(*rows, strict=True))

    def __len__(self) -> int:
        return int(self.t_ms.size)

    @overload
    def __getitem__(self, i: int) -> LogSample: ...
    @overload
    def __getitem__(self, i: slice) -> SampleLog: ...
    def __getitem__(self, i: int | slice) -> LogSample | SampleLog:
        if isinstance(i, slice):
            return SampleLog(self.t_ms[i], self.value[i], self.ddir[i], self.bs[i])
        return LogSample(
            int(self.t_ms[i]),
            float(self.value[i]),
            _DDIR_BY_CODE[int(self.ddir[i])],
            int(self.bs[i]),
        )

    def __iter__(self) -> Iterator[LogSample]:
        for t, v, d, b in zip(
            self.t_ms.tolist(),
            self.value.tolist(),
            self.ddir.tolist(),
            self.bs.tolist(),
            strict=True,
        ):
            yield LogSample(t, v, _DDIR_BY_CODE[d], b)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Sequence) and not isinstance(other, str):
            return list(self) == list(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def shifted(self, ms: int) -> SampleLog:
        """The same samples ``ms`` earlier."""
        return SampleLog(self.t_ms - ms, self.value, self.ddir, self.bs)

    def of_ddir(self, ddir: str) -> SampleLog:
        keep = self.ddir == _CODE_BY_DDIR.get(ddir, -1)
        return SampleLog(self.t_ms[keep], self.value[keep], self.ddir[keep], self.bs[keep])

    def by_second(self, ddir: str) -> dict[int, float]:
        """Window end (whole seconds, from 1) -> value of ``ddir``'s samples;
        the first sample of a second wins, which drops fio's extra flush of
        a partial last window."""
        found, at = _each_second(self.t_ms, self.ddir, ddir)
        keep = found >= 1
        return dict(zip(found[keep].tolist(), self.value[at[keep]].tolist(), strict=True))


def _each_second(t_ms: np.ndarray, codes: np.ndarray, ddir: str) -> tuple[np.ndarray, np.ndarray]:
    """The whole seconds ``ddir``'s window ends round to, ascending, and the
    place of the first window of each."""
    mine = np.flatnonzero(codes == _CODE_BY_DDIR.get(ddir, -1))
    seconds = np.round(t_ms[mine] / 1000).astype(np.int64)  # half to even, as round()
    found, first = np.unique(seconds, return_index=True)
    return found, mine[first]


# numbers of at most 18 digits fit int64; a line with a longer one is no line of fio's
_LOG_LINE = re.compile(r"^\s*(\d{1,18}),\s*(\d{1,18}),\s*(\d{1,18}),\s*(\d{1,18})\b")


def parse_series_log(text: str) -> SampleLog:
    """An averaged iops/bw/lat log: ``time_ms, value, ddir, bs[, offset, prio]``."""
    rows = []
    for line in text.splitlines():
        match = _LOG_LINE.match(line)
        if match and int(match[3]) in _DDIR_BY_CODE:
            rows.append(match.groups())
    if not rows:
        return SampleLog.empty()
    t_ms, value, ddir, bs = zip(*rows, strict=True)
    return SampleLog(
        np.array(t_ms, dtype=np.int64),
        np.array(value, dtype=np.float64),
        np.array(ddir, dtype=np.int8),
        np.array(bs, dtype=np.int64),
    )


@dataclass(frozen=True)
class HistLogEntry:
    """One line of a histogram log: its non-empty bins (ascending) and their counts."""

    t_ms: int
    ddir: str
    bins: np.ndarray = field(compare=False, repr=False)  # uint16
    counts: np.ndarray = field(compare=False, repr=False)  # all > 0


@dataclass(frozen=True, eq=False)
class HistLog:
    """A histogram log as columns: each line's end time, direction code and
    sparse row. Reads as a sequence of ``HistLogEntry``."""

    t_ms: np.ndarray  # int64
    ddir: np.ndarray  # int8, fio's direction codes
    rows: SecondHists

    @classmethod
    def empty(cls) -> HistLog:
        return cls(np.zeros(0, np.int64), np.zeros(0, np.int8), SecondHists.empty())

    @classmethod
    def of(cls, entries: Iterable[HistLogEntry]) -> HistLog:
        """Columns of ``entries`` (themselves when they are columns already)."""
        if isinstance(entries, HistLog):
            return entries
        entries = list(entries)
        return cls(
            np.array([e.t_ms for e in entries], dtype=np.int64),
            np.array([_CODE_BY_DDIR[e.ddir] for e in entries], dtype=np.int8),
            SecondHists.from_rows([(e.bins, e.counts) for e in entries]),
        )

    def __len__(self) -> int:
        return int(self.t_ms.size)

    def __iter__(self) -> Iterator[HistLogEntry]:
        offsets = self.rows.offsets.tolist()
        for i, (t, code) in enumerate(zip(self.t_ms.tolist(), self.ddir.tolist(), strict=True)):
            lo, hi = offsets[i], offsets[i + 1]
            yield HistLogEntry(
                t, _DDIR_BY_CODE[code], self.rows.bins[lo:hi], self.rows.counts[lo:hi]
            )

    def shifted(self, ms: int) -> HistLog:
        return HistLog(self.t_ms - ms, self.ddir, self.rows)

    def of_ddir(self, ddir: str) -> HistLog:
        keep = self.ddir == _CODE_BY_DDIR.get(ddir, -1)
        return HistLog(self.t_ms[keep], self.ddir[keep], self.rows.take(keep))

    def by_second(self, ddir: str, seconds: np.ndarray) -> SecondHists:
        """The row of each of ``seconds`` (window ends rounded to whole
        seconds, the first line of a second winning), empty where none."""
        found, at = _each_second(self.t_ms, self.ddir, ddir)
        index = np.full(seconds.size, -1, np.int64)
        if not found.size:
            return self.rows.take(index)
        place = np.searchsorted(found, seconds)
        hit = (place < found.size) & (found[np.minimum(place, found.size - 1)] == seconds)
        index[hit] = at[place[hit]]
        return self.rows.take(index)


_HIST_CHUNK_LINES = 1024  # parsed at a time: 15 MB of dense rows, whatever the log's length


def parse_hist_log(lines: str | Iterable[str]) -> HistLog:
    """A histogram log (``log_hist_msec``, coarseness 0): per-interval bin counts.

    Each line is ``time_ms, ddir, bs, bin0 .. bin1855`` and holds the
    completions since the previous line of that job and direction. ``lines``
    (the log's text, or an open file) is read a chunk at a time and each
    line kept sparse: a day's log is gigabytes of mostly zeros.
    """
    source = iter(lines.splitlines(keepends=True) if isinstance(lines, str) else lines)
    times, codes, chunks = [], [], []
    while chunk := [line for line in itertools.islice(source, _HIST_CHUNK_LINES) if line.strip()]:
        table = np.loadtxt(chunk, delimiter=",", dtype=np.uint64, ndmin=2)
        if table.shape[1] != 3 + histogram.NR_BINS:
            raise FioOutputError(
                f"histogram log has {table.shape[1] - 3} bins per line, expected "
                f"{histogram.NR_BINS} (log_hist_coarseness must be 0)"
            )
        known = np.isin(table[:, 1], list(_DDIR_BY_CODE))
        times.append(table[known, 0].astype(np.int64))
        codes.append(table[known, 1].astype(np.int8))
        chunks.append(SecondHists.from_dense(table[known, 3:]))
    if not chunks:
        return HistLog.empty()
    return HistLog(np.concatenate(times), np.concatenate(codes), SecondHists.concat(chunks))


_LOG_NAME = re.compile(
    r"^(?P<prefix>.+)_(?P<kind>iops|bw|clat_hist|clat|lat|slat)\.(?P<job>\d+)\.log(?:\.(?P<host>.+))?$"
)


@dataclass(frozen=True)
class LogFile:
    path: Path
    prefix: str
    kind: str
    job: int
    host: str | None


def find_logs(directory: Path) -> list[LogFile]:
    """The fio log files in ``directory``, named ``<prefix>_<kind>.<job>.log[.<host>]``."""
    found = []
    for path in sorted(directory.iterdir()):
        match = _LOG_NAME.match(path.name)
        if match:
            found.append(
                LogFile(path, match["prefix"], match["kind"], int(match["job"]), match["host"])
            )
    return found


@dataclass(frozen=True)
class VerifyFailure:
    """A block whose checksum or header did not match when read back, with
    what fio expected and what it found where it says (a checksum, the
    offset or generation the block's header names, its magic number)."""

    path: str
    offset: int
    length: int
    what: str  # e.g. "crc32c mismatch", "another generation", "misplaced write"
    expected: str | None = None
    found: str | None = None
    value: str = ""  # what expected and found are: "crc32c", "generation (numberio)" …
    host: str | None = None  # the fio server it is on (None: this machine)

    @property
    def detail(self) -> str:
        """``what``, with the expected and found values when fio gave them."""
        if self.expected is None or self.found is None:
            return self.what
        return f"{self.what}: {self.value} expected {self.expected}, found {self.found}"


_VERIFY_LINE = re.compile(
    r"^(?P<what>[\w-]+):\s+(?P<detail>.*?)\s*at file (?P<path>.+?) offset (?P<offset>\d+), "
    r"length (?P<length>\d+)"
)
# What fio 3.x prints before "at file …" when a block's verify header is wrong
# (verify.c, verify_header): the field, the value read, the value wanted.
_HEADER = re.compile(
    r"^bad (?:header )?(?P<field>[\w ]+?) (?P<found>\w+), (?:wanted|calculated) "
    r"(?P<expected>\w+)$"
)
_HEADER_KINDS = {  # field -> (what it means, what the values are)
    "magic header": ("no verify header (never written, or the write was lost)", "magic"),
    "offset": ("misplaced write (the header names another offset)", "header offset"),
    "numberio": ("another generation", "generation (numberio)"),
    "length": ("header of another block size", "block length"),
    "rand_seed": ("header of another write", "data seed"),
    "crc": ("damaged header", "header crc"),
}
_CHECKSUM = re.compile(r"^\s*(?P<which>Expected|Received) CRC:\s*(?P<value>[0-9a-fA-F]+)\s*$")


_SERVER_TAG = re.compile(r"^<(?P<host>[^<>\n]{1,255})> ")


def server_text(output: str, host: str) -> str:
    """What fio servers printed, as their client wrote it into its output
    beside the JSON (``<server-name> text``; a message's further lines
    untagged), each line tagged ``<host> `` with iorig's label of the host:
    a verify failure on a server names its host (``verify_failures``)."""
    decoder = json.JSONDecoder()
    text: list[str] = []
    pos = 0
    while (start := output.find("{", pos)) >= 0:
        text.append(output[pos:start])
        try:
            _, pos = decoder.raw_decode(output, start)
        except json.JSONDecodeError:
            if start == 0 or output[start - 1] == "\n":  # a document cut short: skip it
                after = output.find("\n{", start + 1)
                pos = len(output) if after < 0 else after + 1
            else:  # a "{" inside a line of text
                eol = output.find("\n", start)
                pos = len(output) if eol < 0 else eol
                text.append(output[start:pos])
    text.append(output[pos:])
    lines = "".join(text).splitlines()
    return "".join(f"<{host}> {_SERVER_TAG.sub('', line)}\n" for line in lines if line.strip())


def verify_failures(stderr: str) -> list[VerifyFailure]:
    """Blocks fio reported as failing verification (``verify=crc32c``), in order.

    fio prints e.g. ``crc32c: verify failed at file F offset 5341184, length
    32768 (…)`` followed by ``Expected CRC: …`` and ``Received CRC: …``
    lines, or, for a header that names another block, ``verify: bad header
    offset 40960, wanted 81920 at file F offset 81920, length 4096 (…)``
    (likewise ``bad magic header``, ``bad header numberio`` — the block's
    generation —, ``length``, ``rand_seed``, ``crc``); recorded fio 3.33
    output is in tests/data/verify-integrity.
    """
    out: list[VerifyFailure] = []
    checksums: dict[str, str] = {}
    for tagged in stderr.splitlines():
        host = tag["host"] if (tag := _SERVER_TAG.match(tagged)) else None
        line = tagged[tag.end() :] if tag else tagged
        if (crc := _CHECKSUM.match(line)) and out and out[-1].what.endswith(" mismatch"):
            checksums[crc["which"]] = crc["value"]
            if len(checksums) == 2:
                last = out[-1]
                out[-1] = replace(
                    last,
                    expected=checksums["Expected"],
                    found=checksums["Received"],
                    value=last.what.split()[0],
                )
                checksums = {}
            continue
        match = _VERIFY_LINE.match(line.strip())
        if not match:
            continue
        checksums = {}
        what, detail = match["what"].strip(), match["detail"]
        expected = found = None
        value = ""
        if what == "verify":
            header = _HEADER.match(detail)
            if header:
                name = header["field"]
                kind, value = _HEADER_KINDS.get(name, (f"bad header {name}", name))
                expected, found = header["expected"], header["found"]
            else:
                kind = "bad header" if "header" in detail else detail
        else:
            kind = f"{what} mismatch"
        out.append(
            VerifyFailure(
                match["path"],
                int(match["offset"]),
                int(match["length"]),
                kind,
                expected,
                found,
                value,
                host,
            )
        )
    return out


# fio's io_u error line (io_u.c, __io_u_log_error): printed for each error a job
# goes on past with error_dump=1, and for the error that ends a job.
_IO_ERROR_LINE = re.compile(
    r"^fio: io_u error(?: on file .*?)?: (?P<message>[^:\n]+): (?P<ddir>\w+) "
    r"offset=\d+, buflen=\d+\s*$"
)
# EILSEQ is what fio's verify sets: glibc's text, and this machine's
_EILSEQ_TEXTS = frozenset(
    {"Invalid or incomplete multibyte or wide character", os.strerror(errno.EILSEQ)}
)


def error_kind(ddir: str, message: str) -> str:
    """fio's class of an error (td_error.c, td_error_type): EILSEQ is a
    verify error, else a read's is read and any other direction's write."""
    if message in _EILSEQ_TEXTS:
        return "verify"
    return "read" if ddir == "read" else "write"


def io_errors(stderr: str) -> tuple[IoErrorCount, ...]:
    """The I/O errors fio printed, counted per host, class and text, in the
    order first seen. A fio server's lines are tagged ``<host> `` (as
    ``server_text`` tags them); untagged lines are this machine's. Recorded
    fio 3.33 output is in tests/data/io-errors."""
    counts: Counter[tuple[str | None, str, str]] = Counter()
    for tagged in stderr.splitlines():
        host = tag["host"] if (tag := _SERVER_TAG.match(tagged)) else None
        line = tagged[tag.end() :] if tag else tagged
        if match := _IO_ERROR_LINE.match(line.strip()):
            message = match["message"].strip()
            counts[(host, error_kind(match["ddir"], message), message)] += 1
    return tuple(
        IoErrorCount(kind, message, n, host) for (host, kind, message), n in counts.items()
    )


def unprinted_errors(
    printed: tuple[IoErrorCount, ...], jobs: Iterable[JobStats], local: str
) -> tuple[IoErrorCount, ...]:
    """Errors fio counted (``total_err``) beyond the lines it printed, per
    host (``local``: how jobs name this machine), as ``unknown`` errors
    named by the host's first: a line lost (output cut short) still counts."""
    counted: Counter[str] = Counter()
    first: dict[str, int] = {}
    for job in jobs:
        if job.total_err:
            counted[job.host] += job.total_err
            first.setdefault(job.host, job.first_error)
    out = []
    for host, total in counted.items():
        key = None if host == local else host
        seen = sum(c.count for c in printed if c.host == key)
        if total > seen:
            code = first[host]
            kind = "verify" if code == errno.EILSEQ else "unknown"
            out.append(IoErrorCount(kind, _strerror(code), total - seen, key))
    return tuple(out)


def _strerror(code: int) -> str:
    try:
        return os.strerror(code)
    except ValueError:
        return f"error {code}"


def missing_verify_state(stderr: str) -> bool:
    """fio could not open the write state a replaying verify job loads
    (``verify_state_load``): the writing job never saved it (fio killed)."""
    return "fio: open state file" in stderr or "failed reading verify state" in stderr


def read_logs(directory: Path) -> dict[tuple[str, str | None], dict[int, dict[str, list]]]:
    """Every fio log in ``directory``, parsed: (prefix, host suffix) -> job
    number -> kind (iops, bw, clat, clat_hist …) -> samples or histogram rows."""
    out: dict[tuple[str, str | None], dict[int, dict[str, list]]] = {}
    for log in find_logs(directory):
        if log.kind == "clat_hist":
            with log.path.open() as lines:
                content: list = parse_hist_log(lines)
        else:
            content = parse_series_log(log.path.read_text())
        out.setdefault((log.prefix, log.host), {}).setdefault(log.job, {})[log.kind] = content
    return out
