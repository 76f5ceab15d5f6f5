"""Storage whose answer is known: a loop device over a file, with direct I/O,
prefilled, and capped by the kernel's block throttle.

The cap makes the ceiling exact (a 40,000 read-IOPS cap measured 39.96 K by
bare fio at QD 32 on this project's machines), so a test's expected figure
comes from the cap it set, or from a bare fio run in the same test.

* cgroup v1: the root ``blkio.throttle.{read,write}_{iops,bps}_device``
  files; every process of the root blkio cgroup (iorig and fio) is capped.
* cgroup v2: ``io.max`` in a child cgroup; the processes under test are
  started inside it (``Capped.run``).

What the device itself did is read from its counters while a test runs
(``Capped.sampling``): bytes and I/Os it completed per interval, and per
window of a second, the figures a test's bounds come from.

Where neither can be written the tests skip with the reason; with
``IORIG_REQUIRE_TRUTH=1`` (CI) they fail instead.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from tests.conftest import READS, CliResult, run_iorig

REPO = Path(__file__).resolve().parents[2]
V1 = Path("/sys/fs/cgroup/blkio")
THROTTLES = ("read_iops", "write_iops", "read_bps", "write_bps")
V2_KEYS = {"read_iops": "riops", "write_iops": "wiops", "read_bps": "rbps", "write_bps": "wbps"}


class Unavailable(Exception):
    """This machine cannot make capped devices (the reason is the message)."""


def _cgroup2_root() -> Path | None:
    for line in Path("/proc/mounts").read_text().splitlines():
        fields = line.split()
        if len(fields) > 2 and fields[2] == "cgroup2":
            return Path(fields[1])
    return None


def mechanism() -> str:
    """'v1' or 'v2', or raise Unavailable saying why neither works."""
    if os.geteuid() != 0:
        raise Unavailable("truth tests need root (loop devices and the block throttle)")
    if shutil.which("losetup") is None or not Path("/dev/loop-control").exists():
        raise Unavailable("no loop devices (losetup or /dev/loop-control missing)")
    if shutil.which("fio") is None:
        raise Unavailable("fio is not installed")
    if (V1 / "blkio.throttle.read_iops_device").exists():
        return "v1"
    root = _cgroup2_root()
    if root is not None and "io" in (root / "cgroup.controllers").read_text().split():
        return "v2"
    raise Unavailable("no block throttle: neither cgroup v1 blkio.throttle nor cgroup v2 io.max")


SLOW_READ_S = 0.002  # a read of the stat file this slow has no one time: dropped


class Samples:
    """A block device's own counters, read every ``interval_s`` while a test
    runs (``Capped.sampling``): what reached the device, whatever the
    program under test says it did. Times are unix seconds (each the middle
    of its read of the stat file), as iorig stores a phase's start and end.

    ``total`` is what the device did between two times, ``bounds`` the
    least and most it can have done between them; ``windows`` its rate
    over every window of about ``length_s`` between two real samples (no
    interpolation: the throttle passes bytes in bursts between samples);
    ``active`` when it did anything."""

    def __init__(self, device: str, interval_s: float) -> None:
        self.device = device
        self.interval_s = interval_s
        self._rows: list[tuple[float, int, int, int, int]] = []

    def take(self) -> None:
        before = time.time()
        fields = Path(f"/sys/block/{self.device}/stat").read_text().split()
        after = time.time()
        if after - before > SLOW_READ_S:
            return
        # Documentation/block/stat.rst: reads completed, merged, sectors (of
        # 512 bytes), ms; then the same four of writes
        n = [int(f) for f in fields[:8]]
        self._rows.append(((before + after) / 2, n[0], n[2] * 512, n[4], n[6] * 512))

    def times(self) -> np.ndarray:
        """When each sample was taken (unix seconds)."""
        return self._columns("read", "ios")[0]

    def _columns(self, ddir: str, what: str) -> tuple[np.ndarray, np.ndarray]:
        """Times and the cumulative I/Os or bytes of ``ddir`` ("read" or
        "write") at each sample, of one copy of the samples taken so far."""
        rows = list(self._rows)
        column = {"ios": 1, "bytes": 2}[what] + (0 if ddir == "read" else 2)
        return (
            np.array([r[0] for r in rows]),
            np.array([r[column] for r in rows], dtype=np.float64),
        )

    @staticmethod
    def _around(t: np.ndarray, start: float, end: float) -> tuple[int, int]:
        """The last sample at or before ``start`` and the first at or after ``end``."""
        i = max(int(np.searchsorted(t, start, side="right")) - 1, 0)
        j = min(int(np.searchsorted(t, end, side="left")), len(t) - 1)
        return i, j

    def total(self, ddir: str, start: float, end: float, what: str = "bytes") -> float:
        """What the device did of ``ddir`` from ``start`` to ``end`` (unix
        seconds), counted from the samples just outside them."""
        t, c = self._columns(ddir, what)
        i, j = self._around(t, start, end)
        return float(c[j] - c[i])

    def bounds(
        self, ddir: str, start: float, end: float, what: str = "bytes"
    ) -> tuple[float, float]:
        """What the device did of ``ddir`` from ``start`` to ``end`` lies
        between these: its counts between the samples just inside those
        times, and between the samples just outside them."""
        t, c = self._columns(ddir, what)
        i, j = self._around(t, start, end)
        k = min(int(np.searchsorted(t, start, side="left")), len(t) - 1)
        m = max(int(np.searchsorted(t, end, side="right")) - 1, 0)
        return float(max(c[m] - c[k], 0.0)), float(c[j] - c[i])

    def seconds(
        self,
        ddir: str,
        origin: float,
        ends_s: np.ndarray,
        what: str = "bytes",
        edge_s: float = 0.0,
    ) -> np.ndarray:
        """``bounds`` of each second of a series (its ``t_s``: each second's
        end, in seconds after ``origin``, unix), one row (least, most) per
        second; ``edge_s`` moves the least's edges in and the most's out
        (samples taken more often than fio's log windows close on time)."""
        rows = []
        for end in ends_s.tolist():
            start, stop = origin + end - 1, origin + end
            least, _ = self.bounds(ddir, start + edge_s, stop - edge_s, what)
            _, most = self.bounds(ddir, start - edge_s, stop + edge_s, what)
            rows.append((least, most))
        return np.array(rows).reshape(-1, 2)

    def inside(self, ddir: str, first: float, last: float) -> tuple[float, float]:
        """The sample after ``first`` and the one before ``last``: I/O that
        moved the counter in both end intervals spanned at least the time
        between these (the thread samples late on a busy machine, so the
        intervals are not all ``interval_s``)."""
        t, _ = self._columns(ddir, "ios")
        i = min(int(np.searchsorted(t, first, side="right")), len(t) - 1)
        j = max(int(np.searchsorted(t, last, side="left")) - 1, 0)
        return float(t[i]), float(t[j])

    def active(self, ddir: str, start: float, end: float) -> tuple[float, float] | None:
        """The first and last sample between which ``ddir``'s counter moved,
        from ``start`` to ``end``; None when it did not."""
        t, c = self._columns(ddir, "ios")
        i, j = self._around(t, start, end)
        moved = np.flatnonzero(np.diff(c[i : j + 1]))
        if not moved.size:
            return None
        return float(t[i + moved[0]]), float(t[i + moved[-1] + 1])

    def mean_rate(
        self, ddir: str, started_at: float, ended_at: float, what: str = "bytes"
    ) -> tuple[float, float]:
        """The least and most a phase's mean rate of ``ddir`` (fio's bytes or
        I/Os over fio's runtime) can be, from the device's own counts: at
        least what it did within the phase over the phase's whole time
        (fio's runtime lies within it: beside stress-ng it ran 0.2-1.2 %
        longer than the device's I/O); at most what it did over its I/O's
        span less the sampling interval at either end, as the samples were
        taken (a soak's 99.8 % lay over a bound taken from 20 ms edges)."""
        span = self.active(ddir, started_at, ended_at)
        assert span is not None, (ddir, started_at, ended_at)
        first, last = span
        done = self.total(ddir, first, last, what)
        within, _ = self.bounds(ddir, started_at, ended_at, what)
        after, before = self.inside(ddir, first, last)
        return within / (ended_at - started_at), done / (before - after)

    def windows(
        self, ddir: str, start: float, end: float, length_s: float = 1.0, what: str = "bytes"
    ) -> np.ndarray:
        """The device's rate of ``ddir`` (bytes or I/Os a second) over every
        window from a sample to the first sample ``length_s`` later, both
        within ``start`` and ``end``: a window from each sample, each divided
        by its real length."""
        t, c = self._columns(ddir, what)
        out = []
        for i in np.flatnonzero((t >= start) & (t <= end)).tolist():
            j = int(np.searchsorted(t, t[i] + length_s - self.interval_s / 2))
            if j >= len(t) or t[j] > end:
                break
            out.append((c[j] - c[i]) / (t[j] - t[i]))
        return np.array(out)


@contextlib.contextmanager
def every(interval_s: float, take: Callable[[], None], name: str) -> Iterator[None]:
    """``take()`` from a thread at once and on every multiple of
    ``interval_s`` on the clock while the block runs (the device's counters,
    the throttle's rules)."""
    stop = threading.Event()

    def run() -> None:
        while True:
            take()
            if stop.wait(interval_s - time.time() % interval_s):
                break

    thread = threading.Thread(target=run, name=name, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()


# How far a throttled loop device's own median one-second rate strayed from
# its cap in soaks beside a load (stress-ng and six truth workers on two
# cores): 4.8 % under 2,000 IOPS, 3.1 % under 40 MB/s (10.0 % under 2,000
# IOPS in a fresh clone beside stress-ng: the events test, which reads the
# throttle's rule itself, needs the rate only to be capped). Within it the device
# is capped (free, these run ten times faster); iorig's figures are held to
# the device's own counts, not to this band.
THROTTLE_BAND = 0.10


@dataclass
class Capped:
    """A capped loop device; ``cap(...)`` changes its limits at any time."""

    path: Path  # /dev/loopN
    backing: Path
    majmin: str
    how: str  # "v1" or "v2"
    size_bytes: int
    limits: dict[str, int] = field(default_factory=dict)
    cgroup: Path | None = None  # v2: the child cgroup the tests' processes run in

    def cap(self, **limits: int) -> None:
        """Set the caps (read_iops=…, write_bps=…; 0 or missing: no cap)."""
        unknown = set(limits) - set(THROTTLES)
        if unknown:
            raise ValueError(f"unknown throttle {unknown}")
        self.limits = {k: v for k, v in limits.items() if v}
        if self.how == "v1":
            for name in THROTTLES:
                (V1 / f"blkio.throttle.{name}_device").write_text(
                    f"{self.majmin} {self.limits.get(name, 0)}"
                )
        else:
            assert self.cgroup is not None
            values = " ".join(f"{V2_KEYS[k]}={self.limits.get(k, 'max')}" for k in THROTTLES)
            (self.cgroup / "io.max").write_text(f"{self.majmin} {values}")

    @contextlib.contextmanager
    def sampling(self, interval_s: float = 0.1) -> Iterator[Samples]:
        """The device's counters read every ``interval_s`` from a thread
        while the block runs (see ``Samples``)."""
        samples = Samples(self.path.name, interval_s)
        with every(interval_s, samples.take, f"sampling {self.path.name}"):
            yield samples
        samples.take()

    def _enter(self) -> None:  # runs in the child between fork and exec
        if self.cgroup is not None:
            (self.cgroup / "cgroup.procs").write_text(str(os.getpid()))

    def run(
        self,
        args: Sequence[str],
        *,
        env: dict[str, str] | None = None,
        timeout: float = 300,
        cwd: Path = REPO,
    ) -> subprocess.CompletedProcess:
        """Run a command subject to the caps (inside the cgroup on v2)."""
        return subprocess.run(
            list(args),
            capture_output=True,
            text=True,
            timeout=timeout,
            env=env,
            cwd=cwd,
            preexec_fn=self._enter if self.cgroup is not None else None,
        )

    def fio(self, *options: str, runtime_s: float = 2.0) -> dict:
        """A bare fio run on the device (fio's JSON output)."""
        done = self.run(
            [
                "fio",
                "--name=bare",
                f"--filename={self.path}",
                "--direct=1",
                "--time_based",
                f"--runtime={runtime_s}",
                "--output-format=json",
                *options,
            ],
            timeout=runtime_s + 60,
        )
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)

    def iorig(
        self, db: Path, *args: str, timeout: float = 300
    ) -> subprocess.CompletedProcess | CliResult:
        """iorig in the cgroup; commands that only read the database run in
        this process (no I/O on the device to cap)."""
        if args and args[0] in READS:
            return run_iorig(db, *args, columns=200)
        env = dict(os.environ, IORIG_DB=str(db), COLUMNS="200", NO_COLOR="1")
        return self.run([sys.executable, "-m", "iorig", *args], env=env, timeout=timeout)


@contextlib.contextmanager
def mounted(device: Capped, directory: Path) -> Iterator[Path]:
    """An ext4 filesystem on the device, mounted at ``directory`` (for file-set
    scenarios); unmounted whatever happens."""
    # inode tables and journal written now, not by ext4lazyinit while the
    # test counts the device's writes (1.2 MB more than a checkpoint wrote)
    made = subprocess.run(
        ["mkfs.ext4", "-q", "-F", "-E", "lazy_itable_init=0,lazy_journal_init=0",
         str(device.path)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    if made.returncode != 0:
        raise Unavailable(f"mkfs.ext4 failed: {made.stderr.strip()}")
    directory.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(
        ["mount", str(device.path), str(directory)], capture_output=True, text=True, timeout=60
    )
    if done.returncode != 0:
        raise Unavailable(f"cannot mount {device.path}: {done.stderr.strip()}")
    try:
        yield directory
    finally:
        for _ in range(50):
            if subprocess.run(["umount", str(directory)], capture_output=True).returncode == 0:
                break
            time.sleep(0.1)


def _fio_total(doc: dict, ddir: str, key: str) -> float:
    return float(sum(j[ddir][key] for j in doc["jobs"]))


def read_iops(doc: dict) -> float:
    return _fio_total(doc, "read", "iops")


def read_bytes_per_s(doc: dict) -> float:
    return _fio_total(doc, "read", "bw_bytes")


@contextlib.contextmanager
def capped_device(directory: Path, size_bytes: int = 256 << 20) -> Iterator[Capped]:
    """A prefilled loop device over a file in ``directory``, uncapped until
    ``cap`` is called; caps removed and device detached whatever happens."""
    how = mechanism()
    backing = directory / f"truth-{uuid.uuid4().hex[:8]}.img"
    with open(backing, "wb") as f:
        f.truncate(size_bytes)
    device = None
    cgroup = None
    try:
        done = subprocess.run(
            ["losetup", "--find", "--show", "--direct-io=on", str(backing)],
            capture_output=True,
            text=True,
            timeout=30,
        )
        if done.returncode != 0:
            raise Unavailable(f"losetup failed: {done.stderr.strip()}")
        device = Path(done.stdout.strip())
        name = device.name
        dio = Path(f"/sys/block/{name}/loop/dio")
        if dio.exists() and dio.read_text().strip() != "1":
            raise Unavailable(f"{device} has no direct I/O (its backing filesystem lacks it)")
        majmin = Path(f"/sys/block/{name}/dev").read_text().strip()
        if how == "v2":
            root = _cgroup2_root()
            assert root is not None
            (root / "cgroup.subtree_control").write_text("+io")
            cgroup = root / f"iorig-truth-{uuid.uuid4().hex[:8]}"
            cgroup.mkdir()
        capped = Capped(device, backing, majmin, how, size_bytes, cgroup=cgroup)
        # written once, uncapped, so that reads read real data
        fill = capped.run(
            [
                "fio",
                "--name=fill",
                f"--filename={device}",
                "--rw=write",
                "--bs=1m",
                "--direct=1",
                "--ioengine=libaio",
                "--iodepth=8",
                "--refill_buffers",
                "--output=/dev/null",
            ],
            timeout=120,
        )
        if fill.returncode != 0:
            raise Unavailable(f"cannot prefill {device}: {fill.stderr.strip()}")
        yield capped
    finally:
        if device is not None:
            with contextlib.suppress(OSError):
                if how == "v1":
                    majmin = Path(f"/sys/block/{device.name}/dev").read_text().strip()
                    for name in THROTTLES:
                        (V1 / f"blkio.throttle.{name}_device").write_text(f"{majmin} 0")
            for _ in range(50):  # a process still closing the device keeps it busy a moment
                if (
                    subprocess.run(["losetup", "-d", str(device)], capture_output=True).returncode
                    == 0
                ):
                    break
                time.sleep(0.1)
        if cgroup is not None:
            with contextlib.suppress(OSError):
                cgroup.rmdir()
        backing.unlink(missing_ok=True)
