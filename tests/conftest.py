"""Shared fixtures: a scratch directory that supports direct I/O, a results
database, and a runner for the real ``iorig`` command line."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
DATA = Path(__file__).resolve().parent / "data"
HAS_FIO = shutil.which("fio") is not None


def _supports_direct_io(directory: Path) -> bool:
    probe = directory / ".direct-probe"
    try:
        fd = os.open(probe, os.O_CREAT | os.O_WRONLY | os.O_DIRECT, 0o600)
        os.close(fd)
        return True
    except OSError:
        return False
    finally:
        probe.unlink(missing_ok=True)


@pytest.fixture
def scratch(tmp_path: Path) -> Iterator[Path]:
    """A directory for fio data files on a filesystem with O_DIRECT.

    /tmp is tmpfs on some machines (no O_DIRECT); fall back to a folder in
    the repository, which is on a real disk.
    """
    if _supports_direct_io(tmp_path):
        yield tmp_path
        return
    fallback = REPO / ".test-scratch" / tmp_path.name
    fallback.mkdir(parents=True, exist_ok=True)
    yield fallback
    shutil.rmtree(fallback, ignore_errors=True)


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "results.sqlite"


@dataclass
class CliResult:
    returncode: int
    stdout: str
    stderr: str


def run_iorig(
    db: Path, *args: str, columns: int = 160, timeout: float = 300, check: bool = False
) -> CliResult:
    """The real ``iorig`` CLI in a subprocess against the database ``db``, at
    a fixed width and without colour; ``check``: a non-zero exit fails."""
    env = dict(os.environ, IORIG_DB=str(db), COLUMNS=str(columns), NO_COLOR="1")
    done = subprocess.run(
        [sys.executable, "-m", "iorig", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        cwd=REPO,
    )
    if check and done.returncode != 0:
        raise AssertionError(f"iorig {' '.join(args)} failed:\n{done.stdout}\n{done.stderr}")
    return CliResult(done.returncode, done.stdout, done.stderr)


@pytest.fixture
def iorig(db_path: Path):
    """Run the real ``iorig`` CLI in a subprocess against the test database."""

    def run(*args: str, timeout: float = 300, check: bool = False) -> CliResult:
        return run_iorig(db_path, *args, timeout=timeout, check=check)

    return run


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if HAS_FIO:
        return
    skip = pytest.mark.skip(reason="fio is not installed (make test installs it)")
    for item in items:
        if "fio" in item.keywords:
            item.add_marker(skip)


def chromium_or_skip() -> str:
    """The headless browser for HTML report tests: skipped without one, a
    failure when ``IORIG_REQUIRE_BROWSER`` is set (CI installs it)."""
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    if os.environ.get("IORIG_REQUIRE_BROWSER"):
        pytest.fail("chromium is required (IORIG_REQUIRE_BROWSER) but not installed")
    pytest.skip("chromium is not installed (make test installs it)")
