"""Re-record the report fixture: a database with two back-to-back real
`iorig run peak --quick` runs on the same file, labelled "A" and a hostile
label (tests/test_report.py's EVIL), which tests/test_report.py renders as
every report format instead of running fio itself.

    PYTHONPATH=. .venv/bin/python tests/data/report-peak/record.py

Needs fio and a scratch directory with O_DIRECT (made under the repository's
.test-scratch/, on disk). Recording replaces results.sqlite here; the tests'
expectations are about shape, never about the figures recorded.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from tests.conftest import REPO, run_iorig
from tests.test_report import EVIL, RECORDED


def main() -> None:
    RECORDED.unlink(missing_ok=True)
    (REPO / ".test-scratch").mkdir(exist_ok=True)
    scratch = Path(tempfile.mkdtemp(dir=REPO / ".test-scratch"))
    try:
        for label in ("A", EVIL):
            run_iorig(
                RECORDED,
                "run",
                "peak",
                "--quick",
                "--target",
                str(scratch / "data"),
                "--size",
                "32MiB",
                "--set",
                "duration=2s",
                "--set",
                "warmup=1s",
                "--label",
                label,
                check=True,
            )
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    print(f"recorded {RECORDED}")


if __name__ == "__main__":
    main()
