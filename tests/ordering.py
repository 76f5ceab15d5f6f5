"""Longest test files first, so make test's stages end together.

Each stage hands whole files to its workers in the collection's order
(Makefile: ``--dist loadfile --no-loadscope-reorder``). Files sorted by the
seconds their selected tests took last time (tests/durations.json) are
longest-processing-time-first scheduling: the long end-to-end files start at
once and the quick ones fill the end. In collection order a 40 s file
started four minutes in while the other workers had finished.

Durations only order; a stale or missing entry costs time, never a result.
``make durations`` refreshes the file (README: Development).
"""

from __future__ import annotations

import json
import os
from collections import defaultdict
from pathlib import Path

import pytest

DURATIONS = Path(__file__).resolve().parent / "durations.json"
RECORD_ENV = "IORIG_RECORD_DURATIONS"
# a test not in the file yet (new, or under 0.5 s when recorded)
UNKNOWN_S = 0.1
RECORDED_MIN_S = 0.5


def _known() -> dict[str, float]:
    try:
        known = json.loads(DURATIONS.read_text())
    except FileNotFoundError:
        return {}
    return {str(k): float(v) for k, v in known.items()}


def _file(item: pytest.Item) -> str:
    return item.nodeid.split("::", 1)[0]


@pytest.hookimpl(trylast=True)  # after -m and -k deselected: a stage's own tests
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    known = _known()
    seconds: dict[str, float] = defaultdict(float)
    for item in items:
        seconds[_file(item)] += known.get(item.nodeid, UNKNOWN_S)
    # stable: a file's tests keep their order, files of equal time theirs
    items.sort(key=lambda item: -seconds[_file(item)])


class _Recorder:
    """Each test's setup, call and teardown seconds, merged into the file at
    the end of the session (xdist hands the workers' reports to the
    controller, where this runs)."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = defaultdict(float)

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        self.seconds[report.nodeid] += report.duration

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self) -> None:
        merged = _known() | {
            nodeid: round(s, 1) for nodeid, s in self.seconds.items() if s >= RECORDED_MIN_S
        }
        for nodeid in [n for n, s in self.seconds.items() if s < RECORDED_MIN_S]:
            merged.pop(nodeid, None)
        text = json.dumps(dict(sorted(merged.items())), indent=0) + "\n"
        partial = DURATIONS.with_suffix(".json.tmp")
        partial.write_text(text)
        partial.replace(DURATIONS)


def pytest_configure(config: pytest.Config) -> None:
    # workers only run tests; the controller (or a run without -n) records
    if os.environ.get(RECORD_ENV) and not hasattr(config, "workerinput"):
        config.pluginmanager.register(_Recorder(), "iorig-durations")
