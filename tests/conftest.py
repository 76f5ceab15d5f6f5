"""Shared fixtures: a scratch directory that supports direct I/O, a results
database, and a runner for the real ``iorig`` command line."""

from __future__ import annotations

import contextlib
import functools
import io
import os
import re
import shutil
import socket
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import typer.main
from rich.color import ColorSystem

REPO = Path(__file__).resolve().parent.parent
DATA = Path(__file__).resolve().parent / "data"
HAS_FIO = shutil.which("fio") is not None

# each worker starts on its share of the long tests (tests/ordering.py)
pytest_plugins = ["tests.ordering"]


def supports_direct_io(directory: Path) -> bool:
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
    if supports_direct_io(tmp_path):
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


# Commands that only read the database (or a file) and print: run_iorig runs
# them in this process, which costs no interpreter start (about a second of
# CPU each); those that serve (agent, hosts) get a process.
READS = frozenset(
    {"show", "runs", "compare", "report", "export", "import", "ort", "sut", "scenarios"}
)
# Those that run fio run in this process too (about a second of CPU saved
# each, 100 of them in make test): fio has a process group of its own either
# way, and a run puts back the signal handlers it set. Tests of signals,
# kills and environments start a process of their own.
IN_PROCESS = READS | {"run", "sweep", "knee", "curve", "ab", "doctor"}


def run_iorig(
    db: Path, *args: str, columns: int = 160, timeout: float = 300, check: bool = False
) -> CliResult:
    """The ``iorig`` CLI against the database ``db``, at a fixed width and
    without colour, piped: in this process for the commands in IN_PROCESS,
    else in a subprocess; ``check``: a non-zero exit fails."""
    if args and args[0] in IN_PROCESS:
        return cli_in_process(db, *args, columns=columns, check=check)
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


_GET_COMMAND = functools.cache(typer.main.get_command)


def built_once(patch: pytest.MonkeyPatch) -> None:
    """Build the command line's click command once per test process: typer
    builds it anew on every call (about 0.15 s of type-hint evaluation),
    which a process that runs ``iorig`` once pays once, and a test that runs
    it hundreds of times in process should not."""
    patch.setattr(typer.main, "get_command", _GET_COMMAND)


def cli_in_process(
    db: Path, *args: str, columns: int = 160, check: bool = False, terminal: bool = False
) -> CliResult:
    """``iorig`` through ``iorig.cli.main`` in this process, as a subprocess
    would run it (piped, no colour, ``columns`` wide, SystemExit as the exit
    code): the unit tier's way to test what the command line prints.
    ``terminal``: as under a terminal instead (colours, rich's styling)."""
    from iorig import cli
    from iorig.cli import common

    out, err = io.StringIO(), io.StringIO()
    code = 0
    with contextlib.ExitStack() as stack:
        patch = stack.enter_context(pytest.MonkeyPatch.context())
        built_once(patch)
        patch.setenv("IORIG_DB", str(db))
        patch.setenv("COLUMNS", str(columns))
        patch.setenv("NO_COLOR", "1")
        patch.setattr(sys, "argv", ["iorig", *args])
        for console in (common.console, common.err_console):
            patch.setattr(console, "width", columns)
            if terminal:
                patch.setattr(console, "_force_terminal", True)
                patch.setattr(console, "no_color", False)
                patch.setattr(console, "_color_system", ColorSystem.TRUECOLOR)
        stack.enter_context(contextlib.redirect_stdout(out))
        stack.enter_context(contextlib.redirect_stderr(err))
        try:
            cli.main()
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else int(exc.code is not None)
    if check and code != 0:
        raise AssertionError(f"iorig {' '.join(args)} failed:\n{out.getvalue()}\n{err.getvalue()}")
    return CliResult(code, out.getvalue(), err.getvalue())


def refused_in_process(db: Path, *args: str, columns: int = 160) -> CliResult:
    """A command iorig must refuse before it starts a run, through
    ``iorig.cli.main`` in this process (no interpreter start: about a second
    of CPU); a run it starts instead fails the test at once, before fio."""
    from iorig.run.session import RunSession

    def started(self: RunSession) -> RunSession:
        raise AssertionError(f"iorig {' '.join(args)}: accepted, a run started")

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(RunSession, "__enter__", started)
        return cli_in_process(db, *args, columns=columns)


@pytest.fixture
def refused(db_path: Path):
    """``refused(*args)``: a command that must be refused before any run, in
    this process (refused_in_process), against the test database."""

    def run(*args: str) -> CliResult:
        return refused_in_process(db_path, *args)

    return run


@pytest.fixture
def cli():
    """``cli(db, *args, columns=160, check=False)``: the command line in process."""
    return cli_in_process


@pytest.fixture
def iorig(db_path: Path):
    """The ``iorig`` CLI against the test database, as run_iorig runs it."""

    def run(*args: str, timeout: float = 300, check: bool = False) -> CliResult:
        return run_iorig(db_path, *args, timeout=timeout, check=check)

    return run


# The tiers (docs/guide/development.md). A test marked with none of these is in the
# unit tier, which `make check` runs: no fio, no other process, no socket, no
# root. The guard below makes a unit-tier test that tries one fail.
SYSTEM_MARKERS = ("fio", "blockdev", "truth", "browser", "system")


TRUTH_DIR = Path(__file__).resolve().parent / "truth"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    skip = pytest.mark.skip(reason="fio is not installed (make test installs it)")
    for item in items:
        # make test's stages (Makefile): timing, truth four at a time, serial alone
        for other in ("serial", "truth"):
            if "timing" in item.keywords and other in item.keywords:
                raise pytest.UsageError(f"{item.nodeid}: timing and {other} are two stages")
        # the truth stage collects tests/truth only
        stage = "truth" in item.keywords and "serial" not in item.keywords
        if stage and TRUTH_DIR not in Path(str(item.path)).parents:
            raise pytest.UsageError(f"{item.nodeid}: a truth test belongs in tests/truth")
        if not HAS_FIO and "fio" in item.keywords:
            item.add_marker(skip)


class TierViolation(AssertionError):
    """A unit-tier test reached for something only the system tier may use."""


def _refuse(what: str):
    def refused(*args: object, **kwargs: object):
        raise TierViolation(
            f"a unit-tier test {what}; mark it system (or fio, blockdev, truth, browser) "
            "or test the decision on the fake backend (docs/guide/development.md)"
        )

    return refused


def _unprivileged() -> int:
    return 65534  # nobody: code under test takes the path it takes for a user


def _unit_tier(item: pytest.Item) -> bool:
    return not any(item.get_closest_marker(name) for name in SYSTEM_MARKERS)


@contextlib.contextmanager
def _unit_tier_guard(item: pytest.Item) -> Iterator[None]:
    if not _unit_tier(item):
        yield
        return
    patch = pytest.MonkeyPatch()
    # every subprocess (fio, the CLI, tools) goes through _execute_child
    patch.setattr(subprocess.Popen, "_execute_child", _refuse("started a process"))
    patch.setattr(os, "posix_spawn", _refuse("started a process"))
    patch.setattr(os, "fork", _refuse("forked"))
    for method in ("bind", "connect", "connect_ex"):
        patch.setattr(socket.socket, method, _refuse(f"called socket.{method}"))
    # what needs root asks geteuid (os.access does not: root may write anything)
    patch.setattr(os, "geteuid", _unprivileged)
    try:
        yield
    finally:
        patch.undo()


# around the whole protocol (setup, call, teardown): a module-scoped fixture
# that starts fio for a unit-tier test is caught as well
@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    with _unit_tier_guard(item):
        return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo) -> Iterator[None]:
    """A unit-tier test that skips for want of root (it saw the guard's
    geteuid) needs root: a failure, so it is marked and run, not lost."""
    report = yield
    # a skip's longrepr is (path, line, reason): only the reason counts (a
    # clone under /root must not turn every skip into a failure)
    longrepr = report.longrepr
    reason = longrepr[2] if isinstance(longrepr, tuple) else str(longrepr)
    if report.skipped and _unit_tier(item) and re.search(r"\broot\b", reason):
        report.outcome = "failed"
        report.longrepr = (
            f"{item.nodeid} is in the unit tier but skipped for want of root: "
            "mark it system (docs/guide/development.md)"
        )
    return report


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


@pytest.fixture(autouse=True)
def machine_state(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> Path:
    """iorig's machine-wide directory (target locks, records of what a
    killed run left to restore) for this test alone, through
    ``IORIG_STATE_DIR`` (the processes it starts inherit it): no test sees
    another's locks or cleans up after another's killed run. A test of the
    machine-wide default removes the variable."""
    state = tmp_path_factory.mktemp("iorig-state")
    state.chmod(0o1777)
    monkeypatch.setenv("IORIG_STATE_DIR", str(state))
    return state
