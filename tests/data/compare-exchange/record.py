"""Re-record the Exchange comparison fixture: a database with two real
`iorig run exchange --quick` runs on two fio servers of this machine
(127.0.0.2 and 127.0.0.3, the same two for both runs), labelled "pass" and
"fail". Both serve 100 mailboxes (6.7 transactional IOPS per host, which
any disk gives); "fail" holds the database reads to an average of 1 µs,
which no storage answers, so every host fails that requirement and passes
the others. tests/test_verdict_compare.py renders their comparison in
every format instead of running fio itself.

    PYTHONPATH=. .venv/bin/python tests/data/compare-exchange/record.py

Needs fio and a scratch directory with O_DIRECT (made under the repository's
.test-scratch/, on disk). Recording replaces results.sqlite here; the tests'
expectations are about the verdicts and the shape of the comparison, never
about the figures recorded.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from tests.conftest import REPO, run_iorig
from tests.fioservers import fio_servers

RECORDED = Path(__file__).resolve().parent / "results.sqlite"
# no disk misses these: the runs differ only in the database read limit
LENIENT = ("--set", "db_read_max=10s", "--set", "log_write_avg=10s", "--set", "log_write_max=10s")


def main() -> None:
    RECORDED.unlink(missing_ok=True)
    (REPO / ".test-scratch").mkdir(exist_ok=True)
    scratch = Path(tempfile.mkdtemp(dir=REPO / ".test-scratch"))
    try:
        with fio_servers(2, scratch) as hosts:
            common = (
                "run",
                "exchange",
                "--quick",
                "--hosts",
                ",".join(h.label for h in hosts),
                "--mailboxes",
                "100",
                "--db-size",
                "8MiB",
                "--log-size",
                "4MiB",
                "--duration",
                "10s",
                "--maintenance-rate",
                "64KiB",
                *LENIENT,
            )
            run_iorig(RECORDED, *common, "--db-read-avg", "10s", "--label", "pass", check=True)
            failed = run_iorig(RECORDED, *common, "--db-read-avg", "1us", "--label", "fail")
            assert failed.returncode == 3, failed.stdout + failed.stderr
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    print(f"recorded {RECORDED}")


if __name__ == "__main__":
    main()
