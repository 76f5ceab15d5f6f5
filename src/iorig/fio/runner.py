"""Run fio: find and check the binary, probe engines, run a job file with a
live status stream, and stop it cleanly.

fio runs in its own session so a terminal Ctrl-C reaches iorig only; iorig
then asks fio to stop (SIGINT: fio finishes the current I/Os and writes its
results and logs), and escalates to SIGTERM and SIGKILL if fio does not
exit in time. fio also receives SIGTERM if iorig itself dies.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import re
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from iorig.errors import UserError
from iorig.fio.parse import scan_documents

MIN_VERSION = (3, 20)
_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:  # runs in the child between fork and exec
    with contextlib.suppress(Exception):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


def find_fio(explicit: str | None = None) -> str:
    path = explicit or os.environ.get("IORIG_FIO") or shutil.which("fio")
    if not path or not os.access(path, os.X_OK):
        raise UserError(
            "fio is not installed (iorig uses it to generate I/O)",
            hint="install it from your distribution: `apt-get install fio` (Debian/Ubuntu), "
            "`dnf install fio` (Fedora/RHEL); or set IORIG_FIO to its path",
        )
    return path


def fio_version(fio: str) -> str:
    try:
        done = subprocess.run([fio, "--version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise UserError(f"cannot run {fio} --version: {exc}") from None
    version = done.stdout.strip()
    match = re.match(r"fio-(\d+)\.(\d+)", version)
    if done.returncode != 0 or not match:
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
        done = subprocess.run(
            [fio, f"--enghelp={engine}"], capture_output=True, text=True, timeout=30
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise UserError(f"cannot ask {fio} about its {engine} engine: {exc}") from None
    if done.returncode != 0:
        raise UserError(f"this fio ({fio}) has no {engine} engine, needed for {purpose}", hint=hint)


@dataclass(frozen=True)
class ProbeResult:
    engine: str
    tried: tuple[tuple[str, str], ...]  # (engine, why it failed)


def probe_engine(
    fio: str, location: Path, *, block_device: bool, direct: bool, candidates: tuple[str, ...]
) -> ProbeResult:
    """The first engine of ``candidates`` that can do a few reads at ``location``.

    For a block device the probe reads it (``--readonly``); for a directory it
    uses a small temporary file that is removed afterwards.
    """
    tried: list[tuple[str, str]] = []
    scratch = (
        contextlib.nullcontext(None)
        if block_device
        else tempfile.TemporaryDirectory(prefix=".iorig-probe-", dir=location)
    )
    with scratch as tmp:
        filename = str(location) if block_device else os.path.join(tmp, "probe")
        for engine in candidates:
            cmd = [
                fio, "--name=probe", f"--ioengine={engine}",
                "--filename=" + filename.replace(":", "\\:"),
                "--bs=4k", "--size=1m", "--io_size=64k", f"--direct={int(direct)}",
                "--output-format=json",
            ]  # fmt: skip
            # A device is only read; a scratch file needs writing before it can be read.
            cmd += ["--rw=read", "--readonly"] if block_device else ["--rw=rw"]
            try:
                done = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
            except subprocess.TimeoutExpired:
                tried.append((engine, "timed out"))
                continue
            if done.returncode == 0:
                return ProbeResult(engine, tuple(tried))
            reason = (done.stderr.strip() or done.stdout.strip()).splitlines()
            tried.append((engine, reason[-1] if reason else f"exit code {done.returncode}"))
    details = "; ".join(f"{e}: {why}" for e, why in tried)
    hint = "check that fio can open the target"
    if direct and not block_device:
        hint = (
            "the filesystem may not support direct I/O (tmpfs does not); test a disk-backed "
            "path, or pass --set direct=false to measure through the page cache"
        )
    raise UserError(f"no fio engine could do I/O at {location} ({details})", hint=hint)


@dataclass(frozen=True)
class FioExit:
    returncode: int
    output: str  # everything fio wrote to --output (status snapshots + final)
    stderr: str
    stopped_by: str | None  # None, "cancel", "timeout" or "request" (on_snapshot said so)
    elapsed_s: float


class FioProcess:
    """One fio invocation writing json+ to a file, with status snapshots."""

    def __init__(
        self,
        fio: str,
        jobfile: Path | None,
        workdir: Path,
        extra_args: tuple[str, ...] = (),
        *,
        clients: tuple[tuple[str, Path], ...] = (),
    ):
        """One job file run here, or (``clients``) one job file per fio server
        (``--client=ADDR`` argument, job file) driven by this one process."""
        self.output_path = workdir / "fio-output.json"
        self.stderr_path = workdir / "fio-stderr.txt"
        if clients:
            # Client mode streams no status snapshots; --eta=always makes fio
            # drop a server that stops answering instead of waiting forever.
            head: tuple[str, ...] = ("--eta=always",)
            tail = tuple(a for client, job in clients for a in (client, str(job)))
        else:
            head = ("--status-interval=1", "--eta=never")
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
        self._proc: subprocess.Popen | None = None
        self._read_pos = 0
        self._buffer = ""

    def start(self) -> None:
        with open(self.stderr_path, "wb") as err:
            self._proc = subprocess.Popen(
                self.command,
                cwd=self.workdir,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=err,
                start_new_session=True,
                preexec_fn=_die_with_parent,
            )

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else None

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

    def _signal(self, sig: int) -> None:
        if self._proc and self._proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self._proc.pid, sig)

    def stop(self, grace_s: float = 10.0) -> None:
        """Ask fio to finish (it then writes results), escalate if it does not."""
        for sig, wait_s in ((signal.SIGINT, grace_s), (signal.SIGTERM, 5.0), (signal.SIGKILL, 5.0)):
            if not self._proc or self._proc.poll() is not None:
                return
            self._signal(sig)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self._proc.wait(timeout=wait_s)

    def run(
        self,
        *,
        cancel: threading.Event,
        on_snapshot: Callable[[dict], bool | None] | None = None,
        timeout_s: float | None = None,
        poll_s: float = 0.25,
        on_tick: Callable[[float], None] | None = None,
    ) -> FioExit:
        """Start fio and wait for it, forwarding snapshots; stop on cancel, on
        timeout, or when ``on_snapshot`` returns True (e.g. steady state)."""
        started = time.monotonic()
        self.start()
        assert self._proc is not None
        stopped_by = None
        try:
            while self._proc.poll() is None and stopped_by is None:
                if cancel.wait(poll_s):
                    stopped_by = "cancel"
                elif timeout_s is not None and time.monotonic() - started > timeout_s:
                    stopped_by = "timeout"
                elif on_snapshot and any([on_snapshot(d) for d in self.new_snapshots()]):
                    stopped_by = "request"
                elif on_tick:
                    on_tick(time.monotonic() - started)
            if stopped_by:
                self.stop()
        finally:
            # Whatever happened (including a bug above), fio must not outlive us.
            self.stop(grace_s=5.0)
        output = self.output_path.read_text(errors="replace") if self.output_path.exists() else ""
        stderr = self.stderr_path.read_text(errors="replace") if self.stderr_path.exists() else ""
        return FioExit(
            returncode=self._proc.returncode,
            output=output,
            stderr=stderr,
            stopped_by=stopped_by,
            elapsed_s=time.monotonic() - started,
        )


def write_sample(fio: str, path: Path, job_text: str) -> None:
    """Run a small, size-bounded write job (e.g. to measure a data pattern)."""
    job = path.with_suffix(".fio")
    job.write_text(job_text)
    try:
        done = subprocess.run(
            [fio, "--output-format=json", str(job)],
            cwd=path.parent,
            capture_output=True,
            text=True,
            timeout=300,
        )
    except subprocess.TimeoutExpired:
        raise UserError("fio took more than 5 minutes to write the data sample") from None
    finally:
        job.unlink(missing_ok=True)
    if done.returncode != 0:
        raise UserError(f"fio could not write the data sample: {done.stderr.strip()[-300:]}")
