"""What a `make test` ran: each stage's counts and time, and the slowest tests.

    .venv/bin/python scripts/stages.py .test-results

`make test` has each stage write pytest's JUnit XML to ``.test-results/
STAGE.xml``; ``.ci/run`` prints this summary whether the suite passed or
not, so a CI log says what ran, how long each stage took and where the
time went. A stage that did not run (an earlier one failed) is said so.
"""

from __future__ import annotations

import sys
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

from soak import STAGES, _test_id

SLOWEST = 10


@dataclass(frozen=True)
class Stage:
    name: str
    tests: int
    failed: int
    errors: int
    skipped: int
    seconds: float
    slowest: tuple[tuple[float, str], ...]  # (seconds, test id), slowest first

    @property
    def passed(self) -> int:
        return self.tests - self.failed - self.errors - self.skipped


def read_stage(name: str, text: str) -> Stage:
    """One stage's figures from its JUnit XML (pytest's, junit_family xunit1)."""
    root = ET.fromstring(text)
    suites = [root] if root.tag == "testsuite" else list(root.iter("testsuite"))
    total = {key: 0 for key in ("tests", "failures", "errors", "skipped")}
    seconds = 0.0
    for suite in suites:
        for key in total:
            total[key] += int(suite.get(key, "0"))
        seconds += float(suite.get("time", "0"))
    cases = [
        (float(case.get("time", "0")), _test_id(case))
        for suite in suites
        for case in suite.iter("testcase")
        if case.get("name")
    ]
    cases.sort(key=lambda c: -c[0])
    return Stage(
        name,
        total["tests"],
        total["failures"],
        total["errors"],
        total["skipped"],
        seconds,
        tuple(cases[:SLOWEST]),
    )


def format_summary(stages: list[Stage], missing: list[str]) -> str:
    lines = ["", "make test, stage by stage:"]
    lines.append(f"  {'stage':<8} {'tests':>6} {'passed':>6} {'failed':>6} {'errors':>6} "
                 f"{'skipped':>7} {'time':>8}")  # fmt: skip
    for s in stages:
        lines.append(
            f"  {s.name:<8} {s.tests:>6} {s.passed:>6} {s.failed:>6} {s.errors:>6} "
            f"{s.skipped:>7} {s.seconds:>7.1f}s"
        )
    for name in missing:
        lines.append(f"  {name:<8} did not run (an earlier step failed)")
    if stages:
        total = sum(s.seconds for s in stages)
        lines.append(f"  {'all':<8} {sum(s.tests for s in stages):>6} {'':>6} {'':>6} {'':>6} "
                     f"{'':>7} {total:>7.1f}s")  # fmt: skip
    slowest = sorted(
        ((sec, s.name, test) for s in stages for sec, test in s.slowest), key=lambda c: -c[0]
    )[:SLOWEST]
    if slowest:
        lines += ["", f"the {len(slowest)} slowest tests (setup, call and teardown):"]
        lines += [f"  {sec:6.1f}s  {name:<7} {test}" for sec, name, test in slowest]
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    folder = Path(argv[1]) if len(argv) > 1 else Path(".test-results")
    stages, missing = [], []
    for name in STAGES:
        path = folder / f"{name}.xml"
        try:
            stages.append(read_stage(name, path.read_text(encoding="utf-8")))
        except (OSError, ET.ParseError):
            missing.append(name)
    print(format_summary(stages, missing))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
