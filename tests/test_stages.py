"""scripts/stages.py: what .ci/run says a make test ran, from each stage's
JUnit XML (no process is started: the unit tier)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

SCRIPTS = Path(__file__).resolve().parent.parent / "scripts"


def _stages():
    sys.path.insert(0, str(SCRIPTS))  # it reads JUnit ids as soak.py does
    try:
        spec = importlib.util.spec_from_file_location("stages_under_test", SCRIPTS / "stages.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module
        spec.loader.exec_module(module)
        return module
    finally:
        sys.path.remove(str(SCRIPTS))


stages = _stages()

TRUTH = """<?xml version="1.0" encoding="utf-8"?>
<testsuites name="pytest tests"><testsuite name="pytest" errors="0" failures="1"
 skipped="1" tests="4" time="113.56">
<testcase classname="tests.truth.test_ab" file="tests/truth/test_ab.py" line="1"
 name="test_a" time="20.6"/>
<testcase classname="tests.truth.test_ab" file="tests/truth/test_ab.py" line="9"
 name="test_b" time="1.0"><skipped message="no loop devices"/></testcase>
<testcase classname="tests.truth.test_knee" file="tests/truth/test_knee.py" line="1"
 name="test_knee" time="34.1"><failure message="assert 0.8 &gt;= 0.9">x</failure></testcase>
<testcase classname="tests.truth.test_knee" file="tests/truth/test_knee.py" line="7"
 name="test_quick" time="0.2"/>
</testsuite></testsuites>"""


def test_a_stage_counts_its_tests_and_keeps_its_slowest():
    stage = stages.read_stage("truth", TRUTH)
    assert (stage.tests, stage.passed, stage.failed, stage.skipped) == (4, 2, 1, 1)
    assert stage.seconds == 113.56
    assert stage.slowest[0] == (34.1, "tests/truth/test_knee.py::test_knee")
    assert [t for _, t in stage.slowest][-1] == "tests/truth/test_knee.py::test_quick"


def test_the_summary_names_a_stage_that_did_not_run_and_the_slowest_overall():
    text = stages.format_summary([stages.read_stage("truth", TRUTH)], ["serial"])
    assert "  truth         4      2      1      0       1   113.6s" in text
    assert "serial   did not run" in text
    lines = text.splitlines()
    slowest = lines[lines.index("the 4 slowest tests (setup, call and teardown):") + 1]
    assert slowest.split() == ["34.1s", "truth", "tests/truth/test_knee.py::test_knee"]
