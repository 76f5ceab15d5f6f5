"""Run fio: find and check the binary, and supervise one fio invocation (a
job file here, or one job file per fio server) while it runs.

fio runs in a process group of its own (``iorig.fio.process``): on a stop
request iorig asks it to finish (SIGINT: fio completes the current I/Os and
writes its results and logs), escalates to SIGTERM and SIGKILL if it does
not, and never leaves a process of the group behind, whatever path the
caller leaves by.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from iorig.errors import UserError
from iorig.fio.parse import scan_documents
from iorig.fio.process import Workers, spawn, stop_group

MIN_VERSION = (3, 20)
# After an exception or an interrupt the caller is leaving: fio gets less time.
_LEAVING = ((signal.SIGINT, 1.0), (signal.SIGTERM, 0.5), (signal.SIGKILL, 2.0))
# A phase asked to stop: fio finishes its I/Os and writes what it measured.
STOP_STEPS = ((signal.SIGINT, 10.0), (signal.SIGTERM, 5.0), (signal.SIGKILL, 5.0))
# A phase past its deadline is hung: a short chance to write its results.
_HUNG = ((signal.SIGINT, 2.0), (signal.SIGTERM, 1.0), (signal.SIGKILL, 1.0))


def find_fio(explicit: str | None = None) -> str:
    path = explicit or os.environ.get("IORIG_FIO") or shutil.which("fio")
    if not path or not os.access(path, os.X_OK):
        raise UserError(
            "fio is not installed (iorig uses it to generate I/O)",
            hint="install it from your distribution: `apt-get install fio` (Debian/Ubuntu), "
            "`dnf install fio` (Fedora/RHEL); or set IORIG_FIO to its path",
        )
    return path


def run_quick(
    command: Sequence[str], timeout_s: float = 30.0, cwd: str = "/"
) -> tuple[int, str, str]:
    """A short fio command that does no I/O (``--version``, ``--enghelp``):
    exit code, stdout and stderr; its group is emptied whatever happens."""
    proc = spawn(command, cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        out, err = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        raise UserError(f"{command[0]} did not answer {' '.join(command[1:])} in time") from None
    finally:
        stop_group(proc, _LEAVING)
    return proc.returncode, out.decode(errors="replace"), err.decode(errors="replace")


def fio_version(fio: str) -> str:
    try:
        code, out, _ = run_quick([fio, "--version"])
    except OSError as exc:
        raise UserError(f"cannot run {fio} --version: {exc}") from None
    version = out.strip()
    match = re.match(r"fio-(\d+)\.(\d+)", version)
    if code != 0 or not match:
        raise UserError(f"{fio} does not look like fio (it printed {version[:80]!r})")
    if tuple(int(g) for g in match.groups()) < MIN_VERSION:
        raise UserError(
            f"{version} is too old; iorig needs fio {MIN_VERSION[0]}.{MIN_VERSION[1]} or newer",
            hint="install a newer fio from your distribution or build it from source",
        )
    return version


def require_engine(fio: str, engine: str, purpose: str, hint: str) -> None:
    """Refuse to start when this fio lacks an engine the scenario needs."""
    try:
        code, _, _ = run_quick([fio, f"--enghelp={engine}"])
    except OSError as exc:
        raise UserError(f"cannot ask {fio} about its {engine} engine: {exc}") from None
    if code != 0:
        raise UserError(f"this fio ({fio}) has no {engine} engine, needed for {purpose}", hint=hint)


@dataclass(frozen=True)
class FioExit:
    returncode: int
    output: str  # everything fio wrote to --output (status snapshots + final)
    stderr: str
    stopped_by: str | None  # None, "cancel", "timeout" or "request" (the caller asked)
    elapsed_s: float
    # how fio names a server in its output (``address:port`` it connected to)
    # -> how iorig names the host, where they differ (a host reached over SSH)
    host_names: Mapping[str, str] = field(default_factory=dict)


class FioProcess:
    """One fio invocation writing json+ to a file: one job file run here, or
    (``clients``) one job file per fio server (``--client=ADDR``, job file)
    driven by this one process. Local runs stream status snapshots."""

    def __init__(
        self,
        fio: str,
        jobfile: Path | None,
        workdir: Path,
        *,
        clients: tuple[tuple[str, Path], ...] = (),
        status: bool = True,
        extra_args: tuple[str, ...] = (),
        tag: str = "",
        stop_steps: Sequence[tuple[int, float]] = STOP_STEPS,
    ):
        # ``tag`` tells apart the files of several fio processes sharing a workdir
        self.output_path = workdir / f"fio-output{tag}.json"
        self.stderr_path = workdir / f"fio-stderr{tag}.txt"
        self.stop_steps = tuple(stop_steps)
        if clients:
            # Client mode streams no status snapshots; --eta=always makes fio
            # drop a server that stops answering instead of waiting forever.
            head: tuple[str, ...] = ("--eta=always",)
            tail = tuple(a for client, job in clients for a in (client, str(job)))
        else:
            head = ("--status-interval=1", "--eta=never") if status else ("--eta=never",)
            tail = (str(jobfile),)
        self.command = (
            fio,
            "--output-format=json+",
            f"--output={self.output_path}",
            *head,
            *extra_args,
            *tail,
        )
        self.workdir = workdir
        self.stopped_by: str | None = None
        self.exit: FioExit | None = None
        self._proc: subprocess.Popen | None = None
        self._read_pos = 0
        self._buffer = ""

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else None

    def request_stop(self) -> None:
        """Ask fio to finish now (e.g. a warm-up that is steady)."""
        self.stopped_by = self.stopped_by or "request"

    def new_snapshots(self) -> list[dict]:
        """Status documents fio has appended since the last call."""
        try:
            with open(self.output_path, encoding="utf-8", errors="replace") as f:
                f.seek(self._read_pos)
                chunk = f.read()
                self._read_pos = f.tell()
        except FileNotFoundError:
            return []
        self._buffer += chunk
        docs, consumed = scan_documents(self._buffer)
        self._buffer = self._buffer[consumed:]
        return docs

    def ticks(
        self,
        cancel: threading.Event,
        timeout_s: float | None = None,
        poll_s: float = 0.25,
        hurry: threading.Event | None = None,
    ) -> Iterator[float]:
        """Start fio and yield the seconds since its start about every
        ``poll_s`` while it runs. It is stopped on ``cancel``, after
        ``timeout_s``, or after the caller's ``request_stop`` (at once, with
        SIGKILL, once ``hurry`` is set); ``exit`` then holds how it ended.
        Leaving the loop early stops fio as well."""
        started = time.monotonic()
        with open(self.stderr_path, "wb") as err:
            self._proc = spawn(self.command, self.workdir, stderr=err)
        leaving = True
        workers = Workers()  # fio's job workers leave its group: know them to stop them
        try:
            while self._proc.poll() is None and self.stopped_by is None:
                workers.record(self._proc.pid)
                if self._wait(cancel, poll_s):
                    self.stopped_by = "cancel"
                elif timeout_s is not None and time.monotonic() - started > timeout_s:
                    self.stopped_by = "timeout"
                elif self._proc.poll() is None:
                    yield time.monotonic() - started
            leaving = False
            # at once when fio ended; gracefully when asked to stop
            steps = _HUNG if self.stopped_by == "timeout" else self.stop_steps
            stop_group(self._proc, steps, workers, hurry)
        finally:
            if leaving:  # an exception or an abandoned loop: fio must not outlive us
                stop_group(self._proc, _LEAVING, workers, hurry)
        output = self.output_path.read_text(errors="replace") if self.output_path.exists() else ""
        stderr = self.stderr_path.read_text(errors="replace") if self.stderr_path.exists() else ""
        self.exit = FioExit(
            returncode=self._proc.returncode if self._proc.returncode is not None else -9,
            output=output,
            stderr=stderr,
            stopped_by=self.stopped_by,
            elapsed_s=time.monotonic() - started,
        )

    def _wait(self, cancel: threading.Event, poll_s: float) -> bool:
        """Up to ``poll_s`` for fio to end, returning as soon as it does (a
        probe or a parse takes milliseconds); True once ``cancel`` is set."""
        assert self._proc is not None
        deadline = time.monotonic() + poll_s
        while not cancel.is_set():
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            try:
                self._proc.wait(timeout=min(0.02, left))
                return cancel.is_set()
            except subprocess.TimeoutExpired:
                continue
        return True

    def run(
        self,
        cancel: threading.Event | None = None,
        timeout_s: float | None = None,
        hurry: threading.Event | None = None,
    ) -> FioExit:
        """Run fio to its end (or ``timeout_s``) without following it."""
        for _ in self.ticks(cancel or threading.Event(), timeout_s, hurry=hurry):
            pass
        assert self.exit is not None
        return self.exit
