"""I/O errors fio reported, counted per type: the workload's
``continue_on_error``, parsing fio 3.33's recorded output
(tests/data/io-errors, re-recorded by its record.sh), storing the counts
(a strictly checked payload), and an event's impact and table."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from pydantic import ValidationError
from tests import builders

from iorig.analyze.impact import phase_impacts
from iorig.fio import parse
from iorig.fio.jobfile import JobFileError, Section, render, workload_options
from iorig.fio.runner import FioExit
from iorig.model import (
    EventAction,
    EventRecord,
    EventStatus,
    IoErrorCount,
    PhaseKind,
    errors_by_type,
)
from iorig.report.tables.events import _errors
from iorig.run.backend import HostLogs, RawPhase
from iorig.run.collect import collect
from iorig.scenario.schema import Workload
from iorig.store import codecs

DATA = Path(__file__).resolve().parent / "data" / "io-errors"
EIO = "Input/output error"
EILSEQ = "Invalid or incomplete multibyte or wide character"


def _fio_total(output: str) -> int:
    """fio's own count of a run's errors: ``total_err`` of every job."""
    jobs = [
        j for d in parse.split_documents(output) for j in d.get("jobs", d.get("client_stats", []))
    ]
    return sum(j["total_err"] for j in jobs if j.get("jobname") != "All clients")


# ---------------------------------------------------------------- parsing


def test_local_errors_are_counted_per_type_and_add_up_to_fios_total():
    stderr = (DATA / "stderr.txt").read_text()
    counts = parse.io_errors(stderr)
    assert {c.type for c in counts} == {f"read: {EIO}", f"write: {EIO}"}
    assert all(c.host is None and c.count > 0 for c in counts)
    # every line fio printed, and as many as fio's JSON says it counted
    assert sum(c.count for c in counts) == stderr.count("fio: io_u error")
    output = (DATA / "output.json").read_text()
    assert sum(c.count for c in counts) == _fio_total(output)
    # the lines fio copies into --output are not parsed twice: only stderr counts
    job = parse.parse_final(output).jobs[0]
    assert (job.total_err, job.first_error, job.error, job.continued) == (
        _fio_total(output),
        5,
        5,
        True,
    )


def test_a_servers_errors_are_counted_with_its_host():
    output = (DATA / "client-output.json").read_text()
    (job,) = parse.parse_final(output, "x").jobs
    counts = parse.io_errors(parse.server_text(output, job.host))
    assert {c.host for c in counts} == {job.host}
    assert sum(c.count for c in counts) == _fio_total(output) == job.total_err
    assert parse.unprinted_errors(counts, [job], "local") == ()


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        (
            "fio: io_u error on file /d/a: Input/output error: read offset=0, buflen=4096",
            ("read", EIO),
        ),
        (
            "fio: io_u error on file /d/a: Input/output error: write offset=4096, buflen=4096",
            ("write", EIO),
        ),
        (
            "fio: io_u error on file /d/a: Input/output error: trim offset=0, buflen=4096",
            ("write", EIO),
        ),  # fio: any direction but read is a write error
        (f"fio: io_u error on file /d/a: {EILSEQ}: read offset=0, buflen=4096", ("verify", EILSEQ)),
        (
            "fio: io_u error on file /d/with: colon: No space left on device: write offset=1, "
            "buflen=512",
            ("write", "No space left on device"),
        ),
        ("fio: io_u error: Input/output error: read offset=8, buflen=512", ("read", EIO)),
    ],
)
def test_error_lines(line: str, expected: tuple[str, str]):
    (count,) = parse.io_errors(line + "\n")
    assert (count.kind, count.message, count.count) == (*expected, 1)


def test_other_lines_are_not_errors():
    text = (
        "fio: pid=1, err=5/file:io_u.c:1889, func=io_u error, error=Input/output error\n"
        "crc32c: verify failed at file /d offset 0, length 4096\n"
        "io_u error on file x: y: read offset=1, buflen=2\n"
    )
    assert parse.io_errors(text) == ()


def test_errors_fio_counted_but_did_not_print_are_kept_as_unknown():
    job = replace(parse.parse_final((DATA / "output.json").read_text()).jobs[0], host="local")
    printed = (IoErrorCount("read", EIO, 10),)
    (rest,) = parse.unprinted_errors(printed, [job], "local")
    assert (rest.kind, rest.message, rest.count) == ("unknown", EIO, job.total_err - 10)
    verify = replace(job, first_error=84, error=84)  # EILSEQ: what fio's verify sets
    assert parse.unprinted_errors((), [verify], "local")[0].kind == "verify"


def _raw(stderr: str, output: str) -> RawPhase:
    # the recording kept no logs: one window stands for them (a measured job
    # of 2 s without any lost its logs and fails for that alone, tests/test_session.py)
    logs = {("rw", None): {1: {"iops": [parse.LogSample(1000, 1.0, "read", 0)]}}}
    return RawPhase(
        0.0,
        3.0,
        "",
        (),
        FioExit(0, output, stderr, None, 3.0),
        logs,
        (HostLogs("local"),),
        False,
        True,
    )


def test_collect_counts_them_and_a_job_going_on_past_io_errors_did_not_fail():
    stderr, output = (DATA / "stderr.txt").read_text(), (DATA / "output.json").read_text()
    # what collect reads of a planned phase: its kind and length, its workloads'
    # labels and what they asked of fio (record.sh: randrw, 4k, QD 1)
    spec = Workload(rw="randrw", bs="4k")
    phase = SimpleNamespace(
        kind=PhaseKind.MEASURE,
        duration_s=2.0,
        name="m",
        bytes_to_write=0,
        workloads=[SimpleNamespace(label="rw", spec=spec)],
        training=None,
        checkpoint=None,
        until_done=False,
    )
    got = collect(_raw(stderr, output), phase)  # type: ignore[arg-type]
    assert got.problem is None  # fio's "error": 5 is the first error it went on past
    assert sum(c.count for c in got.io_errors) == _fio_total(output)
    assert {c.type for c in got.io_errors} == {f"read: {EIO}", f"write: {EIO}"}
    # the same job, its error not one it went on past: the phase failed
    ended = output.replace('"total_err" : ', '"total_err_was" : ')
    assert "ended with error 5" in (collect(_raw(stderr, ended), phase).problem or "")  # type: ignore[arg-type]


# ---------------------------------------------------------------- the option


@pytest.mark.parametrize("value", ["none", "read", "write", "io", "verify", "all"])
def test_workload_takes_fios_values(value: str):
    assert Workload(rw="randrw", bs="4k", continue_on_error=value).continue_on_error == value


@pytest.mark.parametrize("value", ["yes", "eio", 1, True, "all,read"])
def test_other_values_are_refused_saying_which_are_taken(value: object):
    with pytest.raises(ValidationError, match="'none', 'read', 'write', 'io', 'verify' or 'all'"):
        Workload(rw="randrw", bs="4k", continue_on_error=value)


def _options(**over: object) -> dict:
    args: dict = dict(
        engine="psync",
        rw="randrw",
        bs=4096,
        filename="/d/f",
        size=1 << 20,
        offset=0,
        iodepth=1,
        jobs=1,
        direct=True,
        read_pct=50,
        rate_iops=None,
        runtime_s=3.0,
        log_prefix="w",
    )
    return workload_options(**args | over)


def test_set_it_reaches_fio_with_every_error_printed():
    assert {"continue_on_error", "error_dump"}.isdisjoint(_options())
    assert {"continue_on_error", "error_dump"}.isdisjoint(_options(continue_on_error="none"))
    options = _options(continue_on_error="io")
    assert (options["continue_on_error"], options["error_dump"]) == ("io", True)
    text = render({}, [Section("w", options)])
    assert "continue_on_error=io\n" in text and "error_dump=1\n" in text


def test_a_check_always_goes_on_past_verify_errors():
    check = dict(rw="read", verify="crc32c", check=True)
    assert _options(**check)["continue_on_error"] == "verify"
    assert "error_dump" not in _options(**check)
    for value in ("read", "io", "all"):  # a check only reads: read and verify is all
        assert _options(**check, continue_on_error=value)["continue_on_error"] == "all"
    assert _options(**check, continue_on_error="verify")["error_dump"] is True


def test_the_job_file_refuses_other_values():
    with pytest.raises(JobFileError, match="continue_on_error"):
        render({}, [Section("w", {"continue_on_error": "sometimes"})])


# ---------------------------------------------------------------- stored


def test_counts_round_trip():
    counts = (IoErrorCount("read", EIO, 12), IoErrorCount("write", EIO, 3, "10.0.0.2:8765"))
    assert codecs.IO_ERRORS.decode(codecs.IO_ERRORS.encode(counts)) == counts
    assert codecs.IO_ERRORS.decode("[]") == ()


GOOD = {"kind": "read", "message": EIO, "count": 1, "host": None}


@pytest.mark.parametrize(
    "item",
    [
        GOOD | {"kind": "everything"},
        GOOD | {"count": -1},
        GOOD | {"count": 0},
        GOOD | {"count": 1.5},
        GOOD | {"count": True},
        GOOD | {"count": 2**70},
        GOOD | {"message": ""},
        GOOD | {"message": "x" * 5000},
        GOOD | {"message": 5},
        GOOD | {"host": 7},
        GOOD | {"extra": 1},
        {k: v for k, v in GOOD.items() if k != "host"},
        [1, 2],
    ],
)
def test_hostile_counts_are_refused(item: object):
    with pytest.raises(codecs.PayloadError, match="I/O errors: unexpected content"):
        codecs.IO_ERRORS.decode(json.dumps([item]))
    with pytest.raises(codecs.PayloadError):
        codecs.IO_ERRORS.decode(json.dumps(GOOD))


# ---------------------------------------------------------------- impact and table


def test_an_events_impact_has_its_phases_errors_by_type():
    per_second = np.full(30, 1000.0)
    counts = (
        IoErrorCount("read", EIO, 8),
        IoErrorCount("write", EIO, 4),
        IoErrorCount("read", EIO, 2, "h2:8765"),
    )
    event = EventRecord(10.0, EventAction.MARK, "x", EventStatus.DONE, 10.0, 10.1)
    phase = builders.phase("p", per_second, events=(event,), io_errors=counts)
    ((_, impact),) = phase_impacts(phase)
    assert impact is not None and impact.errors == 14
    assert impact.errors_by_type == {f"read: {EIO}": 10, f"write: {EIO}": 4}
    assert impact.as_dict()["errors_by_type"] == {f"read: {EIO}": 10, f"write: {EIO}": 4}
    assert _errors(impact) == f"14 (read: {EIO} 10, write: {EIO} 4)"
    # runs stored before errors were counted: the jobs that ended with an error
    old = replace(phase, io_errors=(), scopes=(replace(phase.scopes[0], errors=1),))
    ((_, before),) = phase_impacts(old)
    assert before is not None and (before.errors, before.errors_by_type) == (1, {})
    assert _errors(before) == "1"
    assert errors_by_type(()) == {}


def test_types_are_named_as_fio_names_them():
    assert re.fullmatch(r"(read|write|verify|unknown): .+", IoErrorCount("read", EIO, 1).type)
