"""make soak's scripts/soak.py: its reading of pytest's JUnit XML, its
table of failing tests and its stress-ng command line (no process is
started: the unit tier)."""

from __future__ import annotations

import pytest
from tests.scripts import load_script

soak = load_script("soak")

# as pytest -n 2 -o junit_family=xunit1 writes it: a test that failed in its
# call and again in teardown is two testcases; an interrupted run writes a
# testcase of no name
JUNIT = """<?xml version="1.0" encoding="utf-8"?>
<testsuites name="pytest tests"><testsuite name="pytest" errors="2" failures="2"
 skipped="2" tests="9">
<testcase classname="" name="tests.test_broken" file="tests/test_broken.py" time="0.0">
 <error message="collection failure">ImportError while importing test module</error>
</testcase>
<testcase classname="tests.test_a" name="test_ok" file="tests/test_a.py" line="5" time="0.0"/>
<testcase classname="tests.test_a" name="test_fail" file="tests/test_a.py" line="6" time="0.0">
 <failure message="AssertionError: one is not two&#10;  more&#10;assert 1 == 2">tb</failure>
</testcase>
<testcase classname="tests.test_a" name="test_both" file="tests/test_a.py" line="8" time="0.0">
 <failure message="assert 0">tb</failure>
</testcase>
<testcase classname="tests.test_a" name="test_both" file="tests/test_a.py" line="8" time="0.0">
 <error message="failed on teardown with &quot;RuntimeError: broke&#10;x&quot;">tb</error>
</testcase>
<testcase classname="tests.test_a" name="test_skip" file="tests/test_a.py" line="9" time="0.0">
 <skipped type="pytest.skip" message="nope">tests/test_a.py:10: nope</skipped>
</testcase>
<testcase classname="tests.test_a" name="test_xfail" file="tests/test_a.py" line="11">
 <skipped type="pytest.xfail" message="known"/>
</testcase>
<testcase classname="tests.faults.test_b.TestC" name="test_m[a::b]"
 file="tests/faults/test_b.py" line="14" time="0.0"/>
<testcase classname="tests.test_c" name="test_text" time="0.0">
 <failure>

   E   assert 'a' == 'b'
 </failure>
</testcase>
<testcase time="0.003" />
</testsuite></testsuites>"""


def test_each_test_has_its_node_id_outcome_and_first_lines():
    results = soak.parse_junit(JUNIT)
    assert results == {
        "tests/test_broken.py": soak.Result("error", ("collection failure",)),
        "tests/test_a.py::test_ok": soak.Result("passed"),
        "tests/test_a.py::test_fail": soak.Result("failed", ("AssertionError: one is not two",)),
        "tests/test_a.py::test_both": soak.Result(
            "failed", ("assert 0", 'failed on teardown with "RuntimeError: broke')
        ),
        "tests/test_a.py::test_skip": soak.Result("skipped"),
        "tests/test_a.py::test_xfail": soak.Result("skipped"),
        "tests/faults/test_b.py::TestC::test_m[a::b]": soak.Result("passed"),
        # no file attribute (xunit2); no message: the text's first line
        "tests.test_c::test_text": soak.Result("failed", ("E assert 'a' == 'b'",)),
    }
    assert soak.counts(results) == {"passed": 2, "failed": 3, "error": 1, "skipped": 2}


def test_a_long_message_is_cut():
    long = "x" * 500
    xml = f'<testsuite><testcase classname="m" name="t"><failure message="{long}"/></testcase>'
    (result,) = soak.parse_junit(xml + "</testsuite>").values()
    assert len(result.messages[0]) == soak.MESSAGE_WIDTH and result.messages[0].endswith("…")


def test_the_table_counts_failing_rounds_and_distinct_messages():
    passed, slow = soak.Result("passed"), soak.Result("failed", ("too slow: 1.2 s",))
    rounds = [
        {"t::flaky": passed, "t::steady": passed, "t::broken": slow},
        {"t::flaky": slow, "t::steady": passed, "t::broken": slow},
        {"t::flaky": soak.Result("error", ("teardown", "too slow: 1.2 s")), "t::broken": slow},
    ]
    assert soak.flake_table(rounds) == [
        {
            "test": "t::broken",
            "failed": 3,
            "rounds": 3,
            "messages": [{"message": "too slow: 1.2 s", "count": 3}],
        },
        {
            "test": "t::flaky",
            "failed": 2,
            "rounds": 3,
            "messages": [
                {"message": "too slow: 1.2 s", "count": 2},
                {"message": "teardown", "count": 1},
            ],
        },
    ]
    assert soak.flake_table([{"t::steady": passed}] * 3) == []


def test_the_report_has_each_round_and_each_failing_test(tmp_path):
    first = soak.Round(1, seconds=12.34, complete=True)
    first.results = {"t::a": soak.Result("passed"), "t::b": soak.Result("failed", ("boom",))}
    second = soak.Round(2, seconds=3.0)
    second.results = {"t::a": soak.Result("passed"), "t::b": soak.Result("skipped")}
    summary = soak.report([first, second], "2 round(s) of stage truth", ["stress-ng"], tmp_path)
    assert summary["rounds"][0] | {"runs": []} == {
        "round": 1,
        "seconds": 12.3,
        "complete": True,
        "passed": 1,
        "failed": 1,
        "error": 0,
        "skipped": 0,
        "runs": [],
    }
    text = soak.format_report(summary)
    assert text.splitlines()[0] == "soak: 2 round(s) of stage truth beside stress-ng"
    assert "    1     12.3       1       1       0        0" in text
    assert "    2      3.0       1       0       0        1  (interrupted)" in text
    assert "  1/2  t::b\n        1x  boom" in text
    summary["failing"] = []
    assert "no test failed or errored in 2 round(s)" in soak.format_report(summary)


@pytest.mark.parametrize(
    ("spec", "argv"),
    [
        (
            soak.STRESS_DEFAULT,
            ["--cpu", "1", "--cpu-load", "50", "--hdd", "1", "--hdd-bytes", "64M"],
        ),
        ("cpu=80,cpus=2", ["--cpu", "2", "--cpu-load", "80"]),
        ("io=2, io-bytes=1G", ["--hdd", "2", "--hdd-bytes", "1G"]),
    ],
)
def test_a_load_is_stress_ngs_command_line(spec, argv):
    assert soak.parse_load(spec) == ["stress-ng", *argv]


@pytest.mark.parametrize("spec", ["cpu=101", "cpu=x", "disk=1", "cpu", "io-bytes=64Q,io=1", ""])
def test_a_load_that_is_not_one_is_refused(spec):
    with pytest.raises(ValueError):
        soak.parse_load(spec)


def test_pytest_arguments_follow_the_double_dash():
    args = soak.parse_args(["--rounds", "2", "--", "tests/test_units.py", "-k", "x"])
    assert args.rounds == 2 and args.pytest_args == ["tests/test_units.py", "-k", "x"]
    assert args.load is None
    assert soak.parse_args(["--stress"]).load == soak.parse_load(soak.STRESS_DEFAULT)
    with pytest.raises(SystemExit):
        soak.parse_args(["--stage", "truth", "--", "tests"])
