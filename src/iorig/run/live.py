"""Live seconds of a running phase (``model/live.py``), from what each kind
of host can show while fio runs (docs/methodology.md, "Live figures"):

* this machine: fio's status snapshots (``--status-interval=1``), whose
  cumulative counters and latency histograms are differenced (``StatusMeter``);
* a fio server with iorig's agent or keeper: the bytes the host's kernel
  counted for fio's processes (``fio/hostio.py``), asked once a second from
  a thread per host (``HostIoWatch``) and differenced (``HostIoMeter``). I/O
  counts come from read and write calls where every workload uses a
  synchronous engine (one call per I/O), else from the bytes where the
  direction has one block size; latency from Little's law where every
  workload keeps its queue full (no pacing) in one direction.
"""

from __future__ import annotations

import functools
import json
import math
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Protocol

from iorig.errors import UserError
from iorig.fio import status
from iorig.fio.control import ControlError
from iorig.fio.hostio import HostIo
from iorig.model import PhaseKind, PhaseResult, PhaseStatus, histogram
from iorig.model.live import (
    LiveEvent,
    LivePhase,
    LiveRun,
    LiveSecond,
    LiveSource,
    MetricPhase,
    PhaseTotal,
)
from iorig.run.events import Event, PhaseFinished, PhaseProgress, PhaseStarted, RunStarted
from iorig.run.plan import Plan, PlannedPhase
from iorig.scenario.schema import READS, TRIMS, WRITES
from iorig.store.live import LiveUnwritable

MIN_INTERVAL_S = 0.5  # a shorter interval (fio's last status) is folded into the next
SYNC_ENGINES = frozenset({"psync", "sync", "pvsync", "pvsync2"})  # one call per I/O


def _per_s(delta: float, seconds: float) -> float:
    return max(delta, 0.0) / seconds


class StatusMeter:
    """This machine's live seconds from fio's cumulative status snapshots."""

    def __init__(self, phase_index: int, phase: str, host: str) -> None:
        self.phase_index, self.phase, self.host = phase_index, phase, host
        self._previous: status.Snapshot | None = None

    def feed(self, snap: status.Snapshot, now_s: float) -> list[LiveSecond]:
        """The seconds ``snap`` closes (one per direction with I/O); none for
        a snapshot within ``MIN_INTERVAL_S`` of the last one used."""
        previous = self._previous
        if snap.runtime_ms <= 0:
            return []
        since = previous.t_ms if previous is not None else snap.t_ms - snap.runtime_ms
        seconds = (snap.t_ms - since) / 1000
        if seconds < MIN_INTERVAL_S:
            return []
        self._previous = snap
        second = max(1, round(snap.runtime_ms / 1000))
        out = []
        for direction, now in snap.dirs.items():
            before = previous.dirs.get(direction) if previous is not None else None
            d_ios = now.ios - (before.ios if before else 0)
            d_lat = now.lat_sum_ns - (before.lat_sum_ns if before else 0.0)
            hist = now.hist - before.hist if before is not None else now.hist
            counted = int(hist.sum()) > 0 and bool((hist <= now.hist).all())
            p = histogram.percentiles(hist, (50.0, 99.0)) if counted else {}
            out.append(
                LiveSecond(
                    phase_index=self.phase_index,
                    phase=self.phase,
                    host=self.host,
                    direction=direction,
                    second=second,
                    t_s=now_s,
                    ios=now.ios,
                    io_bytes=now.io_bytes,
                    ios_per_s=_per_s(d_ios, seconds),
                    bytes_per_s=_per_s(now.io_bytes - (before.io_bytes if before else 0), seconds),
                    lat_mean_ns=d_lat / d_ios if d_ios > 0 and d_lat >= 0 else None,
                    lat_p50_ns=_finite(p.get(50.0)),
                    lat_p99_ns=_finite(p.get(99.0)),
                    source=LiveSource.FIO_STATUS,
                    # fio's histogram since the phase began, where it has one
                    lat_sum_ns=_finite(now.lat_sum_ns) if now.lat_sum_ns >= 0 else None,
                    lat_buckets=(
                        histogram.metric_buckets(now.hist) if int(now.hist.sum()) > 0 else None
                    ),
                )
            )
        return out


def _finite(value: float | None) -> float | None:
    return value if value is not None and math.isfinite(value) else None


@dataclass(frozen=True)
class HostJobShape:
    """What a host's counters need from the phase's job to give counts and latency."""

    block_bytes: dict[str, int | None]  # the direction's one block size, None if several
    calls_are_ios: bool  # every workload issues one read or write call per I/O
    in_flight: int | None  # I/Os queued at all times, where every workload keeps it full
    direction: str | None  # the one direction every workload does, if one
    # the directions the workloads do: a process's other reads or writes (a
    # job reading its libraries, a server its socket) are not the job's I/O
    directions: frozenset[str] = frozenset({"read", "write"})

    @classmethod
    def of(cls, phase: PlannedPhase) -> HostJobShape:
        sizes: dict[str, set[int | None]] = {"read": set(), "write": set()}
        directions: set[str] = set()
        paced = False
        in_flight = 0
        for w in phase.workloads:
            spec = w.spec
            size = None if spec.bssplit else int(spec.bs)
            for direction, kinds in (("read", READS), ("write", WRITES), ("trim", TRIMS)):
                if spec.rw in kinds:
                    directions.add(direction)
                    sizes.setdefault(direction, set()).add(size)
            paced = paced or bool(spec.rate_iops or spec.rate or spec.flow)
            in_flight += spec.jobs * (1 if w.engine in SYNC_ENGINES else spec.iodepth)
        return cls(
            block_bytes={d: next(iter(s)) if len(s) == 1 else None for d, s in sizes.items()},
            calls_are_ios=all(w.engine in SYNC_ENGINES for w in phase.workloads),
            in_flight=None if paced else in_flight,
            direction=next(iter(directions)) if len(directions) == 1 else None,
            directions=frozenset(directions),
        )


class HostIoMeter:
    """A fio server's live seconds from its I/O counters (``HostIo``),
    counted from the reading taken as the phase began."""

    def __init__(
        self, phase_index: int, phase: str, host: str, shape: HostJobShape, began_s: float
    ) -> None:
        self.phase_index, self.phase, self.host = phase_index, phase, host
        self.shape = shape
        self.began_s = began_s  # this machine's clock
        self._base: tuple[HostIo, float] | None = None
        self._previous: tuple[HostIo, float] | None = None

    def feed(self, io: HostIo, now_s: float) -> list[LiveSecond]:
        if self._base is None:
            self._base = self._previous = (io, now_s)
            return []
        assert self._previous is not None
        (last, _), (base, _) = self._previous, self._base
        seconds = io.t_s - last.t_s  # the host's clock: both readings are its own
        if seconds < MIN_INTERVAL_S:
            return []
        self._previous = (io, now_s)
        second = max(1, round(now_s - self.began_s))
        out = []
        figures = (
            ("read", io.read_bytes - base.read_bytes, io.read_bytes - last.read_bytes,
             io.reads - base.reads, io.reads - last.reads),
            ("write", io.write_bytes - base.write_bytes, io.write_bytes - last.write_bytes,
             io.writes - base.writes, io.writes - last.writes),
        )  # fmt: skip
        rates = {}
        for direction, total_bytes, d_bytes, total_calls, d_calls in figures:
            if total_bytes <= 0 or direction not in self.shape.directions:
                continue
            ios, d_ios = self._counts(direction, total_bytes, d_bytes, total_calls, d_calls)
            rates[direction] = (ios, d_ios, total_bytes, d_bytes)
        latency = None  # Little's law, for the one direction the job does
        if self.shape.in_flight and self.shape.direction in rates:
            done = rates[self.shape.direction][1]
            if done:
                latency = self.shape.in_flight / (done / seconds) * 1e9
        for direction, (ios, d_ios, total_bytes, d_bytes) in rates.items():
            out.append(
                LiveSecond(
                    phase_index=self.phase_index,
                    phase=self.phase,
                    host=self.host,
                    direction=direction,
                    second=second,
                    t_s=now_s,
                    ios=ios,
                    io_bytes=total_bytes,
                    ios_per_s=None if d_ios is None else _per_s(d_ios, seconds),
                    bytes_per_s=_per_s(d_bytes, seconds),
                    lat_mean_ns=latency if direction == self.shape.direction else None,
                    lat_p50_ns=None,
                    lat_p99_ns=None,
                    source=LiveSource.HOST_IO,
                )
            )
        return out

    def _counts(
        self, direction: str, total_bytes: int, d_bytes: int, total_calls: int, d_calls: int
    ) -> tuple[int | None, int | None]:
        if self.shape.calls_are_ios:
            return max(total_calls, 0), max(d_calls, 0)
        size = self.shape.block_bytes.get(direction)
        if size:
            return total_bytes // size, max(d_bytes, 0) // size
        return None, None


class HostIoWatch:
    """Each host's I/O counters, asked every ``poll_s`` from a thread of its
    own (a hung host holds up only itself), turned into live seconds. A host
    that cannot tell (a fio server without iorig's agent) is left out after
    ``GIVE_UP_AFTER`` failed asks in a row."""

    GIVE_UP_AFTER = 5

    def __init__(
        self,
        asks: dict[str, Callable[[], HostIo]],
        meters: dict[str, HostIoMeter],
        poll_s: float = 1.0,
    ) -> None:
        self.poll_s = poll_s
        self._meters = meters
        self._lock = threading.Lock()
        self._pending: list[LiveSecond] = []
        self._closed = threading.Event()
        self.silent: dict[str, str] = {}  # host -> why it tells nothing
        self._threads = [
            threading.Thread(target=self._watch, args=(host, ask), daemon=True)
            for host, ask in asks.items()
        ]
        for thread in self._threads:
            thread.start()

    def _watch(self, host: str, ask: Callable[[], HostIo]) -> None:
        meter = self._meters[host]
        next_at = time.monotonic()
        failed = 0
        while not self._closed.is_set():
            try:
                io = ask()
            except (ControlError, UserError, OSError, ValueError) as exc:
                # a busy control channel misses a second; one that never
                # answers (no agent, an older one) is left alone
                failed += 1
                if failed >= self.GIVE_UP_AFTER:
                    self.silent[host] = str(exc)
                    return
            else:
                failed = 0
                seconds = meter.feed(io, time.time())
                if seconds:
                    with self._lock:
                        self._pending += seconds
            next_at += self.poll_s
            self._closed.wait(max(next_at - time.monotonic(), 0.0))

    def begin(self, io_started_at: float) -> None:
        """The hosts' jobs began I/O then (this machine's clock): the
        seconds count from it, as the phase's events do."""
        for meter in self._meters.values():
            meter.began_s = io_started_at

    def take(self) -> list[LiveSecond]:
        """The seconds read since the last call."""
        with self._lock:
            taken, self._pending = self._pending, []
        return taken

    def close(self) -> None:
        self._closed.set()


class LiveSink(Protocol):
    """Where live figures go: the live file (``store/live.py``), a metrics
    endpoint (``serve/metrics.py``)."""

    def put_run(self, run_id: str, run: LiveRun) -> None:
        """What the run is and its phases known so far (again as it learns more)."""

    def put_phase(self, run_id: str, phase: LivePhase) -> None: ...

    def put_seconds(self, run_id: str, seconds: Sequence[LiveSecond]) -> None: ...

    def put_totals(self, run_id: str, totals: Sequence[PhaseTotal], *, aborted: bool) -> None:
        """A phase ended: what each host did, as stored (``aborted``: by a signal)."""

    def drop_run(self, run_id: str) -> None: ...


def _drop(sink: LiveSink, run_id: str) -> None:
    sink.drop_run(run_id)


@dataclass
class _Following:
    """One run's place, for the feed (``ab`` follows two at once)."""

    run_id: str | None = None
    phase: LivePhase | None = None
    written_at: float = 0.0
    events_seen: int = 0
    hosts: tuple[str, ...] = ()  # the run's host labels
    info: LiveRun | None = None  # what the metrics say of it, and its phases known so far
    points: dict[str, int] = field(default_factory=dict)  # each point's number, in order
    planned: tuple[str, ...] = ()  # the phases' names in order, where the plan says them


DIRECTIONS = ("read", "write", "trim")


def phase_totals(phase_index: int, result: PhaseResult, hosts: Sequence[str]) -> list[PhaseTotal]:
    """Each host's stored totals of a finished phase: its host scopes, or on
    one host the aggregate (a single host's phase has no host scope); with
    the stored latency histogram where fio gave one."""
    scopes = [(s.scope.host or "", s) for s in result.host_scopes]
    if not scopes and len(hosts) == 1 and result.aggregate is not None:
        scopes = [(hosts[0], result.aggregate)]
    out = []
    for host, scope in scopes:
        for d in DIRECTIONS:
            if d not in scope.totals or scope.totals[d].io_bytes <= 0:
                continue
            t = scope.totals[d]
            counted = int(t.hist.sum()) > 0
            lat_sum = t.lat_mean_ns * t.ios if counted and math.isfinite(t.lat_mean_ns) else None
            out.append(
                PhaseTotal(
                    phase_index,
                    result.name,
                    host,
                    d,
                    t.ios,
                    t.io_bytes,
                    lat_sum_ns=max(lat_sum, 0.0) if lat_sum is not None else None,
                    lat_buckets=histogram.metric_buckets(t.hist) if counted else None,
                )
            )
    return out


def phase_directions(phase: PlannedPhase) -> tuple[str, ...]:
    """What a phase's workloads do, in ``DIRECTIONS`` order: its series'
    directions (a verify phase reads back what was written)."""
    if phase.kind is PhaseKind.VERIFY:
        return ("read",)
    done = set()
    for w in phase.workloads:
        if w.spec.op != "io":
            continue
        for direction, kinds in (("read", READS), ("write", WRITES), ("trim", TRIMS)):
            if w.spec.rw in kinds:
                done.add(direction)
    return tuple(d for d in DIRECTIONS if d in done)


def _point_key(point: dict) -> str:
    return json.dumps(point, sort_keys=True, default=str)


def _metric_phase(run: _Following, index: int, phase: PlannedPhase) -> MetricPhase:
    """``phase``, the run's ``index``-th, as metrics label it: the points
    are numbered in the order they first run (a sweep's grid order)."""
    point = None
    if phase.point:
        point = run.points.setdefault(_point_key(phase.point), len(run.points))
    return MetricPhase(index, phase.scenario_name, point, phase_directions(phase))


def _targets_text(plan: Plan, host: str) -> str:
    """A host's targets as one text: the path, or each role's where several."""
    targets = plan.host_targets.get(host) or plan.targets
    if len(targets) == 1:
        return str(next(iter(targets.values())).path)
    return ", ".join(f"{role}={t.path}" for role, t in sorted(targets.items()))


class LiveFeed:
    """A run's events turned into live figures for each sink; ``key`` tells
    apart runs that go on together (``iorig ab``'s sides). A sink that
    fails (``LiveUnwritable``, ``OSError``) is dropped: a run never fails
    for its live view; ``problems`` says which and why."""

    PHASE_EVERY_S = 1.0  # the phase's state is written at most this often

    def __init__(self, sinks: Sequence[LiveSink]) -> None:
        self.sinks = list(sinks)
        self.problems: list[str] = []
        self._runs: dict[str, _Following] = {}

    def _each(self, work: Callable[[LiveSink], None]) -> None:
        for sink in list(self.sinks):
            try:
                work(sink)
            except (LiveUnwritable, OSError) as exc:
                self.sinks.remove(sink)
                self.problems.append(f"live figures stopped going to {type(sink).__name__}: {exc}")

    def handle(self, event: Event, key: str = "") -> None:
        run = self._runs.setdefault(key, _Following())
        if isinstance(event, RunStarted):
            run.run_id = event.run_id
            run.hosts = tuple(event.plan.host_labels)
            run.planned = tuple(phase.name for phase, _ in event.schedule or ())
            # the planned phases' series count from 0 from now on: a scrape
            # before a phase's I/O is the baseline its rate() counts from
            phases = tuple(
                _metric_phase(run, index, phase)
                for index, (phase, _) in enumerate(event.schedule or ())
            )
            run.info = LiveRun(
                label=event.label or "",
                scenario=event.plan.resolved.scenario.name,
                hosts=tuple((h, _targets_text(event.plan, h)) for h in run.hosts),
                phases=phases,
            )
            self._put_run(run)
        elif isinstance(event, PhaseFinished) and run.phase is not None and run.run_id:
            run_id = run.run_id
            totals = phase_totals(run.phase.phase_index, event.result, run.hosts)
            aborted = event.result.status is PhaseStatus.ABORTED
            self._each(lambda sink: sink.put_totals(run_id, totals, aborted=aborted))
        elif isinstance(event, PhaseStarted):
            run.phase = LivePhase(
                phase_index=event.index,
                phase=event.phase.name,
                repeat=event.repeat,
                index=event.index + 1,
                total=event.total,
                elapsed_s=0.0,
                fraction=0.0,
                rule=None,
                source=None,
                metric=str(event.phase.headline),
                coming=run.planned[event.index + 1 :],
                duration_s=(
                    None
                    if event.phase.until_done or event.phase.kind.size_based
                    else event.phase.duration_s
                ),
            )
            run.events_seen = 0
            self._learn(run, event.index, event.phase)
            self._put_phase(run, force=True)
        elif isinstance(event, PhaseProgress) and run.phase is not None:
            run.phase = replace(
                run.phase,
                elapsed_s=event.elapsed_s,
                fraction=event.fraction,
                rule=event.rule,
                source=event.live[-1].source if event.live else run.phase.source,
                events=tuple(
                    LiveEvent(e.at_s, e.label, str(e.status), e.started_at, e.detail[:200])
                    for e in event.events
                ),
            )
            if event.live and run.run_id is not None:
                run_id, seconds = run.run_id, event.live
                self._each(lambda sink: sink.put_seconds(run_id, seconds))
            self._put_phase(run, force=bool(event.live) or len(event.events) != run.events_seen)
            run.events_seen = len(event.events)

    def _learn(self, run: _Following, index: int, phase: PlannedPhase) -> None:
        """The phase the run starts, in its metrics' phases: new for a
        search, in place of the planned one where the plan changed (a
        stopped run skips phases: the later ones run at other places)."""
        if run.info is None:
            return
        labelled = _metric_phase(run, index, phase)
        known = {p.phase_index: p for p in run.info.phases}
        if known.get(index) == labelled:
            return
        known[index] = labelled
        run.info = replace(run.info, phases=tuple(known[i] for i in sorted(known)))
        self._put_run(run)

    def _put_run(self, run: _Following) -> None:
        if run.run_id is None or run.info is None:
            return
        run_id, info = run.run_id, run.info
        self._each(lambda sink: sink.put_run(run_id, info))

    def _put_phase(self, run: _Following, *, force: bool) -> None:
        if run.run_id is None or run.phase is None:
            return
        if not force and time.monotonic() - run.written_at < self.PHASE_EVERY_S:
            return
        run.written_at = time.monotonic()
        run_id, phase = run.run_id, run.phase
        self._each(lambda sink: sink.put_phase(run_id, phase))

    def close(self) -> None:
        """The runs ended: what they measured is stored."""
        for run_id in [r.run_id for r in self._runs.values() if r.run_id is not None]:
            self._each(functools.partial(_drop, run_id=run_id))
