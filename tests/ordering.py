"""Longest tests first on every worker, so make test's stages end together.

pytest-xdist's ``worksteal`` (Makefile) gives each of its N workers an equal
count of consecutive tests, and a worker that runs out steals the second
half of the longest queue left. Here each worker's share is chosen by the
seconds its tests took last time (tests/durations.json): the timed tests,
longest first, each to the share with the fewest seconds so far
(longest-processing-time-first), then the quick ones in collection order to
fill each share's count. Every worker starts on its long tests and the
stealing evens out the quick ones at the end. In collection order a 40 s
test started four minutes into the first stage while the other workers had
finished, and the workers' last tests ended up to 35 s apart.

Durations only order; a stale or missing entry costs time, never a result.
``make durations`` refreshes the file (docs/guide/development.md).
"""

from __future__ import annotations

import json
import os
from collections import defaultdict
from pathlib import Path

import pytest

DURATIONS = Path(__file__).resolve().parent / "durations.json"
RECORD_ENV = "IORIG_RECORD_DURATIONS"
RECORDED_MIN_S = 0.5  # quicker tests are not written down: they fill


def _known() -> dict[str, float]:
    try:
        known = json.loads(DURATIONS.read_text())
    except FileNotFoundError:
        return {}
    return {str(k): float(v) for k, v in known.items()}


def shares(seconds: list[float | None], workers: int) -> list[list[int]]:
    """Indexes of the tests each worker's share holds, in the order it runs
    them: ``seconds[i]`` is test i's time, None if not known. The shares'
    sizes are worksteal's first split of the consecutive tests."""
    sizes, left = [], len(seconds)
    for worker in range(workers):
        sizes.append(left // (workers - worker))
        left -= sizes[-1]
    held: list[list[int]] = [[] for _ in sizes]
    load = [0.0] * workers
    timed = sorted((i for i, s in enumerate(seconds) if s is not None), key=lambda i: -seconds[i])
    for i in timed:
        room = [w for w in range(workers) if len(held[w]) < sizes[w]]
        w = min(room, key=lambda w: (load[w], w))
        held[w].append(i)
        load[w] += seconds[i]  # type: ignore[operator]
    quick = iter(i for i, s in enumerate(seconds) if s is None)
    for w, size in enumerate(sizes):
        held[w] += [next(quick) for _ in range(size - len(held[w]))]
    return held


@pytest.hookimpl(trylast=True)  # after -m and -k deselected: a stage's own tests
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    known = _known()
    workers = int(getattr(config, "workerinput", {}).get("workercount", 1))
    held = shares([known.get(item.nodeid) for item in items], workers)
    items[:] = [items[i] for share in held for i in share]


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
