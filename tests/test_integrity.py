"""Checking exactly what was acknowledged, without fio: what fio prints for a
block that did not read back as written (recorded fio 3.33 output), the job
options of a writer that keeps its state and of its replay, the plan's check
that the replay is the writer's job, and the data verdict."""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from pydantic import ValidationError
from tests import builders

from iorig.analyze.integrity import DataCheck, data_check, data_verdict, lost_blocks
from iorig.errors import UserError
from iorig.fio import parse
from iorig.fio.jobfile import Section, render, workload_options
from iorig.fio.runner import FioExit
from iorig.model import PhaseKind, PhaseResult, PhaseStatus, Scope
from iorig.run.plan import build_plan
from iorig.run.session import MISSING_STATE, phase_state, verify_message
from iorig.scenario import loading as scenario
from iorig.scenario.schema import Workload, verify_state_problem
from iorig.targets import Target

DATA = Path(__file__).resolve().parent / "data"


def test_what_fio_expected_and_found_is_read_for_each_bad_block():
    failures = parse.verify_failures((DATA / "verify-integrity" / "stderr.txt").read_text())
    found = [(f.offset, f.what.split(" (")[0], f.value, f.expected, f.found) for f in failures]
    assert found == [
        (20480, "crc32c mismatch", "crc32c", "5c975db9", "4079dd26"),
        (81920, "misplaced write", "header offset", "81920", "40960"),
        (122880, "damaged header", "header crc", "5463422f", "48264f6f"),
        (163840, "no verify header", "magic", "acca", "0"),
        (0, "another generation", "generation (numberio)", "0", "768"),
        (4096, "another generation", "generation (numberio)", "1", "769"),
    ]
    assert all(f.path == "/scratch/data" and f.length == 4096 for f in failures)
    assert failures[0].detail == "crc32c mismatch: crc32c expected 5c975db9, found 4079dd26"
    assert failures[4].detail.endswith("generation (numberio) expected 0, found 768")


def test_the_older_fixture_still_parses():
    # exchange's 32 KiB pages: a checksum mismatch and a header of another length
    failures = parse.verify_failures((DATA / "verify-failure" / "stderr.txt").read_text())
    assert [(f.offset, f.length) for f in failures] == [(5341184, 32768), (20971520, 32768)]
    assert failures[0].expected == "5fc20670" and failures[0].found == "020eb9f9"
    assert failures[1].what == "header of another block size"


def test_a_missing_state_file_is_recognised():
    stderr = (
        "fio: open state file: No such file or directory\n"
        "fio: state file: local-writes-0-verify.state (for_write=0)\n"
    )
    assert parse.missing_verify_state(stderr)
    assert not parse.missing_verify_state("crc32c: verify failed at file f offset 0, length 1")


def test_a_check_without_the_writers_state_fails_saying_why():
    done = FioExit(1, "", "fio: open state file: No such file or directory\n", None, 0.1)
    status, error = phase_state(done, "fio job writes ended with error 2")
    assert status is PhaseStatus.FAILED and error == MISSING_STATE
    assert "were not recorded" in error and "killed" in error


def _opts(**over: object) -> dict:
    base: dict = dict(
        engine="libaio",
        rw="randwrite",
        bs=4096,
        filename="/d/f",
        size=1 << 20,
        offset=1 << 20,
        iodepth=8,
        jobs=1,
        direct=True,
        read_pct=None,
        rate_iops=None,
        runtime_s=30.0,
        log_prefix="writes",
        verify="crc32c",
    )
    return workload_options(**(base | over))


def test_a_writer_that_keeps_its_state_and_its_replay():
    writer = _opts(state="save")
    # fio's random map (each block once a pass) and its fixed sequence, state saved
    assert "norandommap" not in writer and writer["randrepeat"] is True
    assert writer["verify_state_save"] is True and writer["do_verify"] is False
    assert writer["time_based"] is True
    replay = _opts(rw="randread", verify="none", check=True, state="load", runtime_s=None)
    # the same job, its writes turned into checked reads, stopping where the state says
    assert replay["rw"] == "randwrite" and replay["randrepeat"] is True
    assert replay["verify_only"] and replay["verify_state_load"]
    assert replay["verify_state_save"] is False  # it would overwrite the writer's state
    assert replay["continue_on_error"] == "verify" and "time_based" not in replay
    for key in ("offset", "size", "bs", "iodepth", "numjobs"):
        assert replay[key] == writer[key], key
    text = render({}, [Section("writes", replay)])
    assert "verify_only=1\n" in text and "verify_state_load=1\n" in text


def test_other_workloads_keep_no_state_and_checks_list_every_bad_block():
    plain = _opts()
    assert plain["verify_state_save"] is False and plain["norandommap"] is True
    check = _opts(rw="read", verify="none", check=True, runtime_s=None)
    assert check["continue_on_error"] == "verify" and check["verify_state_save"] is False


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"rw": "randrw", "verify": "crc32c"}, "mixes reads and writes"),
        ({"rw": "randwrite"}, "needs verify: crc32c"),
        ({"rw": "randwrite", "verify": "crc32c", "bssplit": "4k/50:8k/50"}, "one block size"),
        ({"rw": "randwrite", "verify": "crc32c", "distribution": "zipf:1.2"}, "distribution"),
        ({"rw": "randwrite", "verify": "crc32c", "jobs": 2}, "offset_increment"),
    ],
)
def test_workloads_that_cannot_keep_a_state(fields, message):
    plain = Workload(bs=4096, **fields)  # without verify_state each is a workload
    problem = verify_state_problem(plain)
    assert problem is not None and message in problem
    with pytest.raises(ValidationError, match=message):  # the schema refuses it
        Workload(bs=4096, verify_state=True, **fields)


def test_zero_is_no_rate_limit():
    assert Workload(rw="read", bs=4096, rate_iops=0).rate_iops is None
    assert Workload(rw="read", bs=4096, rate="0").rate is None


def _plan(**overrides: str):
    resolved = scenario.resolve(scenario.read_source("integrity"), "quick", overrides)
    target = Target("data", "/d/", "file", Path("/d/iorig-data.dat"), 48 << 20, None, False, False)
    return resolved, build_plan(
        resolved, {"data": target}, {("data", True): "libaio"}, "fio", "fio-3.33"
    )


def test_the_integrity_plan_replays_its_writer_first_in_the_verify_phase():
    _, plan = _plan()
    phases = {p.name: p for p in plan.phases}
    assert list(phases) == ["write", "mixed", "verify"]  # a pause of 0 s is skipped
    writer = phases["mixed"].workloads[0]
    replay = phases["verify"].workloads[0]
    assert writer.label == replay.label == "writes"
    assert (writer.offset_bytes, writer.size_bytes) == (replay.offset_bytes, replay.size_bytes)
    at_rest = phases["verify"].workloads[1]
    assert at_rest.offset_bytes == 0 and at_rest.size_bytes == writer.offset_bytes == 24 << 20
    # without the mixed phase there is nothing to replay, only the part at rest
    _, plan = _plan(mixed="false", write="false")
    assert [(p.name, [w.label for w in p.workloads]) for p in plan.phases] == [
        ("verify", ["at_rest"])
    ]


def test_a_replay_that_is_not_its_writers_job_is_refused():
    resolved, _ = _plan()
    data = resolved.scenario.model_dump()
    verify = data["phases"][-1]
    target = Target("data", "/d/", "file", Path("/d/iorig-data.dat"), 48 << 20, None, False, False)

    def plan_with(workloads: list[dict]):
        phases = [*data["phases"][:-1], verify | {"workloads": workloads}]
        changed = resolved.scenario.model_validate(data | {"phases": phases})
        return build_plan(
            replace(resolved, scenario=changed),
            {"data": target},
            {("data", True): "libaio"},
            "fio",
            "fio-3.33",
        )

    writes, at_rest = verify["workloads"]
    with pytest.raises(UserError, match="does not replay the writer"):
        plan_with([writes | {"bs": 8192}, at_rest])
    with pytest.raises(UserError, match="put the verify_state workloads first"):
        plan_with([at_rest, writes])
    with pytest.raises(UserError, match="no earlier phase has a verify_state writer named"):
        plan_with([writes | {"name": "other"}, at_rest])


def _verify_phase(error: str | None = None, status: PhaseStatus = PhaseStatus.OK):
    return builders.phase(
        "verify", np.array([1.0]), kind=PhaseKind.VERIFY, error=error, status=status
    )


def test_data_verdicts():
    bad = parse.verify_failures((DATA / "verify-integrity" / "stderr.txt").read_text())
    error = verify_message(bad, shown=4)
    assert lost_blocks(error) is not None and lost_blocks(error)[0] == 6
    assert error.endswith("; … and 2 more")
    lost = data_check([_verify_phase(error, PhaseStatus.FAILED)], {})
    assert lost is not None and lost.lost and lost.bad == 6
    assert lost.verdict.text == "FAIL: data lost: 6 blocks did not read back as last written"
    row = data_verdict(lost)
    assert row is not None and not row.passed and math.isnan(row.value)
    assert "first: /scratch/data offset 20480 (0.02 MiB), 4096 bytes: crc32c mismatch" in row.name
    clean = DataCheck(("verify",), 12288, 48 << 20, 0, "", True)
    assert clean.verdict.text == "PASS: all 12,288 blocks (48MiB) read back as last written"
    wrapped = replace(clean, rewritten=(("writes", 3.4),))
    assert wrapped.verdict is not None and "writes 3.4 times" in wrapped.verdict.text
    assert DataCheck(("verify",), 0, 0, 0, "", False).verdict is None
    # another failure of the check is not lost data: the phase's own failure speaks
    missing = data_check(
        [_verify_phase("the writes to check were not recorded", PhaseStatus.FAILED)], {}
    )
    assert missing is not None and not missing.lost and missing.verdict is None
    assert data_check([], {}) is None


def test_a_check_reading_several_blocks_at_once_counts_at_least_its_bad_reads():
    error = verify_message(
        parse.verify_failures((DATA / "verify-integrity" / "stderr.txt").read_text())
    )
    failed = [_verify_phase(error, PhaseStatus.FAILED)]
    # fio stops checking a read at its first bad block: 1 MiB reads of 32 KiB
    # pages count bad reads, a lower bound of bad pages
    coarse = {
        "phases": [
            {
                "name": "verify",
                "kind": "verify",
                "workloads": [
                    {"name": "db", "rw": "read", "bs": 1 << 20, "verify_interval": 32768}
                ],
            }
        ]
    }
    check = data_check(failed, coarse)
    assert check is not None and check.coarse
    assert (
        check.verdict.text == "FAIL: data lost: at least 6 blocks did not read back as last written"
    )
    row = data_verdict(check)
    assert row is not None and "at least 6 did not" in row.name
    exact = {
        "phases": [
            {
                "name": "verify",
                "kind": "verify",
                "workloads": [{"name": "db", "rw": "read", "bs": 32768, "verify_interval": 32768}],
            }
        ]
    }
    assert not data_check(failed, exact).coarse


def test_a_writer_that_went_over_its_blocks_again_is_said_so():
    """1,024 blocks; two repeats of the mixed phase wrote 700 each (the same
    sequence twice) and the check passed: blocks had two generations."""

    def mixed(repeat: int) -> PhaseResult:
        where = Scope(workload="writes", host="local")
        written = replace(builders.totals(700, 1), ddir="write")
        scope = replace(builders.scope(np.array([700.0]), where=where), totals={"write": written})
        return builders.phase("mixed", np.array([700.0]), scopes=(scope,), repeat=repeat)

    resolved = {
        "phases": [
            {
                "name": "mixed",
                "kind": "measure",
                "workloads": [
                    {
                        "name": "writes",
                        "rw": "randwrite",
                        "bs": 4096,
                        "size": 4 << 20,
                        "jobs": 1,
                        "verify_state": True,
                    }
                ],
            },
            {"name": "verify", "kind": "verify", "workloads": []},
        ]
    }
    check = data_check([mixed(0), mixed(1), _verify_phase()], resolved)
    assert check is not None and check.rewritten == (("writes", 700 * 2 / 1024),)
    assert check.verdict is not None and "writes 1.4 times" in check.verdict.text
    assert data_check([mixed(0), _verify_phase()], resolved).rewritten == ()


def test_bad_blocks_a_fio_server_found_are_read_from_its_clients_output():
    # recorded: a fio client's --output when its server found two bad blocks
    output = (DATA / "server-verify" / "output.json").read_text()
    text = parse.server_text(output, "127.0.0.3:8765")
    bad = parse.verify_failures(text)
    assert [(f.host, f.offset, f.what) for f in bad] == [
        ("127.0.0.3:8765", 20480, "crc32c mismatch"),
        ("127.0.0.3:8765", 36864, "no verify header (never written, or the write was lost)"),
    ]
    assert bad[0].expected == "5b526c53" and bad[0].found == "d63ff75e"
    assert "127.0.0.3:8765: /var/tmp/iorig-server-verify/data offset 20480" in verify_message(bad)
    # nothing of the JSON is taken for text; a cut document is skipped, a "{" in text kept
    assert "jobs" not in text and parse.parse_final(output).jobs
    cut = parse.server_text('<vm> a {b} c\n{\n  "jobs": [\n', "h")
    assert cut == "<h> a {b} c\n"
