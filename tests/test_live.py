"""Live figures: status snapshots and host counters into live seconds, the
live file, the run's events into sinks, the metrics a scrape sees."""

from __future__ import annotations

import itertools
import json
import sqlite3
import threading
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from prometheus_client import CollectorRegistry, generate_latest
from tests import builders

from iorig.analyze.precision import PrecisionWatch
from iorig.errors import UserError
from iorig.fio import status
from iorig.fio.hostio import HostIo
from iorig.fio.runner import scan_documents
from iorig.model import (
    AGGREGATE,
    EventAction,
    EventRecord,
    EventStatus,
    PhaseResult,
    PhaseStatus,
    Scope,
    histogram,
)
from iorig.model.live import (
    LiveEvent,
    LivePhase,
    LiveRun,
    LiveSecond,
    LiveSource,
    MetricPhase,
    PhaseTotal,
)
from iorig.run.events import PhaseFinished, PhaseProgress, PhaseStarted, RunStarted
from iorig.run.live import HostIoMeter, HostJobShape, LiveFeed, StatusMeter, phase_totals
from iorig.run.local import RuleFeed
from iorig.serve.address import parse_address
from iorig.serve.metrics import (
    MAX_LABEL_CHARS,
    LiveMetrics,
    Scrapes,
    final_values,
    label_value,
    served_everyone,
)
from iorig.serve.server import MetricFeed
from iorig.store.live import KEEP_ENDED_S, KEEP_S, LiveStore, LiveUnwritable, live_path

DATA = Path(__file__).parent / "data" / "live"


def _plan(rw: str = "randread", **workload: str):
    from iorig.run.plan import build_plan
    from iorig.scenario.adhoc import adhoc_source
    from iorig.scenario.loading import resolve
    from iorig.targets import remote_target

    resolved = resolve(
        adhoc_source(rw, name="live"),
        None,
        {"bs": "4k", "iodepth": "8", "jobs": "2", "duration": "3s", "size": "16MiB"} | workload,
    )
    target = remote_target(
        None, host="127.0.0.2:8765", role="data", size=16 << 20, size_explicit=True,
        allow_destroy=False,
    )  # fmt: skip
    return build_plan(resolved, {"data": target}, {("data", True): "libaio"}, "fio", "fio-3.33")


@pytest.fixture
def fake_plan():
    return _plan()


def test_a_hosts_counters_read_what_the_job_makes_knowable():
    (phase,) = [p for p in _plan().phases if p.name == "randread"]
    shape = HostJobShape.of(phase)
    assert shape == HostJobShape(
        {"read": 4096, "write": None}, False, 16, "read", frozenset({"read"})
    )
    (mixed,) = [p for p in _plan("randrw", read_pct="70").phases if p.name == "randrw"]
    shape = HostJobShape.of(mixed)
    assert shape.direction is None and shape.block_bytes["write"] == 4096


def _recorded() -> list[status.Snapshot]:
    """fio 3.33's status (json+, --status-interval=1) of status-randrw.fio:
    4 KiB psync reads paced at 3,000/s and writes at 1,000/s for 4 s."""
    docs, _ = scan_documents((DATA / "status-randrw.status").read_text())
    return [status.snapshot(d) for d in docs]


def _summed(kind: str) -> list[int]:
    """Each second's value in the two jobs' logs of ``kind``, added."""
    logs = [(DATA / f"status-capped_{kind}.{j}.log").read_text().splitlines() for j in (1, 2)]
    return [sum(int(line.split(",")[1]) for line in lines) for lines in zip(*logs, strict=True)]


def test_the_status_reveals_each_second_fios_logs_will_hold():
    """status-capped.*: two jobs on a device in memory capped at 2,000 read
    IOPS (record-capped.sh): the seconds from the status's sample means are
    the logs' own, summed over the jobs; the counters' differences are not."""
    docs, _ = scan_documents((DATA / "status-capped.status").read_text())
    snaps = [status.snapshot(d) for d in docs]
    logged = status.LoggedSeconds()
    seconds = [second for snap in snaps for second in logged.feed(snap)]
    iops = _summed("iops")
    kib = _summed("bw")
    assert [round(i) for i, _ in seconds] == iops[: len(seconds)]
    assert [round(b / 1024) for _, b in seconds] == kib[: len(seconds)]
    assert len(seconds) >= len(iops) - 1  # the last may end with fio, after its last status
    assert not logged.lost
    counted = [
        (b.ios - a.ios) / ((b.t_ms - a.t_ms) / 1000)
        for a, b in itertools.pairwise(snaps[:-1])
        if b.t_ms > a.t_ms
    ]
    # the counters' windows catch bursts of completions either way
    assert max(counted) - min(counted) > 10 * (max(iops) - min(iops)), (counted, iops)


def test_logged_seconds_stop_where_the_samples_go_back():
    docs, _ = scan_documents((DATA / "status-capped.status").read_text())
    snaps = [status.snapshot(d) for d in docs]
    logged = status.LoggedSeconds()
    assert logged.feed(snaps[3])  # three seconds at once: the third status's
    assert logged.feed(snaps[2]) == [] and logged.lost  # fewer samples than before
    assert logged.feed(snaps[5]) == []


def test_status_snapshots_make_one_second_each_at_the_paced_rates():
    snaps = _recorded()
    meter = StatusMeter(3, "measure", "local")
    seconds = [s for snap in snaps for s in meter.feed(snap, 1000.0 + snap.t_ms / 1000)]
    # the last status comes 0.14 s after the one before (fio's end): folded away
    assert sorted({s.second for s in seconds}) == [1, 2, 3, 4]
    for s in seconds:
        paced = 3000 if s.direction == "read" else 1000
        assert s.ios_per_s == pytest.approx(paced, rel=0.02), s
        assert s.bytes_per_s == pytest.approx(4096 * s.ios_per_s, rel=0.002)
        assert s.lat_p50_ns is not None and s.lat_p50_ns <= s.lat_p99_ns
        assert (s.phase_index, s.phase, s.host, s.source) == (3, "measure", "local", "fio status")
    last_read = [s for s in seconds if s.direction == "read"][-1]
    used = [snap for snap in snaps if snap.runtime_ms][-2]  # the last one not folded away
    assert last_read.ios == used.dirs["read"].ios
    assert last_read.io_bytes == used.dirs["read"].io_bytes


def test_a_second_histogram_is_the_difference_of_two_cumulative_ones():
    snaps = _recorded()
    meter = StatusMeter(0, "p", "local")
    meter.feed(snaps[0], 0.0)
    (read, _) = sorted(meter.feed(snaps[1], 1.0), key=lambda s: s.direction)
    # the second's I/Os are what the histograms add between the snapshots
    grew = snaps[1].dirs["read"].hist.sum() - snaps[0].dirs["read"].hist.sum()
    assert grew == snaps[1].dirs["read"].ios - snaps[0].dirs["read"].ios
    assert read.ios_per_s * (snaps[1].t_ms - snaps[0].t_ms) / 1000 == pytest.approx(grew)


def _shape(**given) -> HostJobShape:
    base = {"block_bytes": {"read": 4096}, "calls_are_ios": False, "in_flight": None}
    return HostJobShape(**(base | {"direction": "read"} | given))


def _io(t: float, rb: int, wb: int = 0, reads: int = 0, writes: int = 0) -> HostIo:
    return HostIo(t_s=t, read_bytes=rb, write_bytes=wb, reads=reads, writes=writes)


def test_host_counters_count_from_the_phase_start_on_the_hosts_clock():
    meter = HostIoMeter(1, "measure", "h1:8765", _shape(in_flight=32), began_s=500.0)
    assert meter.feed(_io(9000.0, 10_000_000), 500.0) == []  # the base: earlier phases' bytes
    (s,) = meter.feed(_io(9001.0, 10_000_000 + 40_960_000), 501.2)
    assert (s.second, s.host, s.direction) == (1, "h1:8765", "read")
    assert s.io_bytes == 40_960_000 and s.bytes_per_s == pytest.approx(40_960_000)
    assert s.ios == 10_000 and s.ios_per_s == pytest.approx(10_000)
    # Little's law: 32 I/Os always queued at 10,000 I/Os per second, 3.2 ms each
    assert s.lat_mean_ns == pytest.approx(3.2e6)
    assert s.lat_p50_ns is None and s.source is LiveSource.HOST_IO
    # half a second later on the host's clock (the ask took long): folded away
    assert meter.feed(_io(9001.4, 60_000_000), 501.6) == []
    (s2,) = meter.feed(_io(9002.0, 10_000_000 + 81_920_000), 502.2)
    assert s2.second == 2 and s2.bytes_per_s == pytest.approx(40_960_000)


def test_host_counters_of_a_direction_the_job_does_not_do_are_not_its_io():
    """A write-only fill's processes also read (a job its libraries and
    job file): those reads are no second of the phase's."""
    shape = _shape(block_bytes={"write": 1 << 20}, direction="write", directions={"write"})
    meter = HostIoMeter(0, "fill", "local", shape, began_s=0.0)
    meter.feed(_io(1.0, 0), 0.0)
    (s,) = meter.feed(_io(2.0, 65536, wb=8 << 20), 1.0)
    assert (s.direction, s.io_bytes, s.ios) == ("write", 8 << 20, 8)


def test_host_counts_and_latency_only_where_the_job_tells_them():
    paced = HostIoMeter(0, "p", "h", _shape(in_flight=None, calls_are_ios=True), began_s=0.0)
    paced.feed(_io(1.0, 0, reads=7), 0.0)
    (s,) = paced.feed(_io(2.0, 4096 * 100, reads=107), 1.0)
    assert s.ios_per_s == 100 and s.lat_mean_ns is None  # paced: the queue is not full
    mixed = HostIoMeter(0, "p", "h", _shape(block_bytes={"read": None}), began_s=0.0)
    mixed.feed(_io(1.0, 0), 0.0)
    (s,) = mixed.feed(_io(2.0, 1 << 20), 1.0)
    assert s.ios is None and s.ios_per_s is None and s.bytes_per_s == 1 << 20


def test_the_live_file_keeps_recent_seconds_drops_ended_runs_and_skips_nonsense(tmp_path):
    db = tmp_path / "results.sqlite"
    with LiveStore(db) as live:
        assert live.path == live_path(db)

        def second(n: int, index: int = 0) -> LiveSecond:
            return LiveSecond(index, "m", "local", "read", n, 1.0 + n, n, 4096 * n, 1.0, 4096.0,
                              None, None, None, LiveSource.FIO_STATUS)  # fmt: skip

        live.put_seconds("r1", [second(1), second(2)])
        stop = LiveEvent(4.0, "stop-host 2", "done", 1004.0, "stopped 4 processes")
        live.put_phase(
            "r1", LivePhase(0, "m", 0, 1, 2, 2.0, 0.5, "rule", LiveSource.FIO_STATUS, (stop,))
        )
        assert live.phase("r1").events == (stop,)
        got = live.seconds_after("r1")
        assert [s.second for _, s in got] == [1, 2]
        assert live.seconds_after("r1", got[0][0])[0][1] == second(2)
        assert live.phase("r1").rule == "rule"
        live.put_seconds("r1", [second(KEEP_S + 5)])  # a long phase keeps its last KEEP_S
        assert [s.second for _, s in live.seconds_after("r1")] == [KEEP_S + 5]
        live.put_seconds("r1", [second(1, index=1)])  # the next phase: the last one's go
        assert [(s.phase_index, s.second) for _, s in live.seconds_after("r1")] == [(1, 1)]
        live.conn.execute("UPDATE live_seconds SET bytes_per_s = -1")  # not a figure
        assert live.seconds_after("r1") == []
        live.conn.execute("UPDATE live_phase SET payload = '[1'")
        assert live.phase("r1") is None
        assert live.runs() == ["r1"]
        live.drop_run("r1")
        assert live.runs() == [] and live.seconds_after("r1") == []
    conn = sqlite3.connect(live_path(db))  # a file of another layout is made again
    conn.execute("PRAGMA user_version = 99")
    conn.close()
    with LiveStore(db) as live:
        assert live.runs() == []


def test_a_live_file_that_cannot_be_made_says_so(tmp_path):
    (tmp_path / "results.sqlite-live").mkdir()
    with pytest.raises(LiveUnwritable, match=r"results\.sqlite-live"):
        LiveStore(tmp_path / "results.sqlite")


class _Sink:
    def __init__(self, fail: bool = False) -> None:
        self.fail = fail
        self.calls: list[tuple] = []

    def put_run(self, run_id, run):
        self._record("run", run_id, run)

    def put_phase(self, run_id, phase):
        self._record("phase", run_id, phase)

    def put_seconds(self, run_id, seconds):
        self._record("seconds", run_id, tuple(seconds))

    def put_totals(self, run_id, totals, *, aborted):
        self._record("totals", run_id, tuple(totals), aborted)

    def drop_run(self, run_id):
        self._record("drop", run_id)

    def _record(self, *call):
        if self.fail:
            raise LiveUnwritable("disk full")
        self.calls.append(call)


def test_a_runs_events_reach_every_sink_and_a_failing_one_is_dropped(fake_plan):
    good, bad = _Sink(), _Sink(fail=True)
    feed = LiveFeed([good, bad])
    phase = fake_plan.phases[0]
    second = LiveSecond(0, phase.name, "local", "read", 1, 1.0, 10, 40960, 10.0, 40960.0,
                        None, None, None, LiveSource.FIO_STATUS)  # fmt: skip
    feed.handle(RunStarted("abc123", fake_plan))
    feed.handle(PhaseStarted(phase, 0, 0, 1))
    stopped = EventRecord(4.0, EventAction.STOP_HOST, "2", EventStatus.DONE, 10.0, 10.2, "ok")
    feed.handle(
        PhaseProgress(phase, 0, 1.0, 0.5, None, (second,), "steady state: 1 round", (stopped,))
    )
    feed.handle(PhaseFinished(phase, _finished(phase.name, PhaseStatus.OK)))
    feed.close()
    kinds = [c[0] for c in good.calls]
    # the run, then its phase as it starts (no schedule given: as a search's)
    assert kinds == ["run", "run", "phase", "seconds", "phase", "totals", "drop"]
    target = str(fake_plan.targets["data"].path)
    assert good.calls[0][2] == LiveRun("", "live", (("local", target),), ())
    assert good.calls[1][2].phases == (MetricPhase(0, "fill", None, ("write",)),)
    # the stored totals of the one host, which has no host scope of its own,
    # with its latency histogram: 1,000 completions in fio's bin 600
    (total,) = good.calls[5][2]
    assert (total.phase, total.host, total.ios, total.io_bytes) == (phase.name, "local", 500,
                                                                    4096000)  # fmt: skip
    assert total.lat_buckets == histogram.metric_buckets(_ONE_BIN)
    assert total.lat_sum_ns == pytest.approx(500 * 1e6)  # the stored mean, 1 ms, × the I/Os
    assert good.calls[3] == ("seconds", "abc123", (second,))
    assert good.calls[4][2].rule == "steady state: 1 round"
    assert good.calls[4][2].source is LiveSource.FIO_STATUS
    assert good.calls[4][2].events == (LiveEvent(4.0, "stop-host 2", "done", 10.0, "ok"),)
    assert feed.sinks == [good] and "disk full" in feed.problems[0]


_ONE_BIN = histogram.empty()
_ONE_BIN[600] = 1000  # builders.totals' histogram


def _finished(
    name: str, status: PhaseStatus, hosts: tuple[str, ...] = (), ddir: str = "read"
) -> PhaseResult:
    """A finished phase that read (or did ``ddir``) 500 I/Os of 8 KiB on
    each host (and in all)."""
    done = replace(builders.totals(100.0, 5), ddir=ddir)
    where = [AGGREGATE, *(Scope(host=h) for h in hosts)]
    scopes = tuple(
        replace(builders.scope(np.full(5, 100.0), where=w), totals={ddir: done}) for w in where
    )
    return builders.phase(name, np.full(5, 100.0), scopes=scopes, status=status)


def test_a_finished_phase_gives_each_hosts_stored_totals_and_says_if_interrupted():
    two = _finished("measure", PhaseStatus.ABORTED, hosts=("a:8765", "b:8765"))
    assert [(t.host, t.ios) for t in phase_totals(3, two, ["a:8765", "b:8765"])] == [
        ("a:8765", 500),
        ("b:8765", 500),
    ]
    # one host: its figures are the aggregate's; several without host scopes: none known
    one = _finished("fill", PhaseStatus.OK)
    assert [(t.host, t.io_bytes) for t in phase_totals(0, one, ["local"])] == [("local", 4096000)]
    assert phase_totals(0, one, ["a:8765", "b:8765"]) == []


def test_an_interrupted_phase_tells_the_sinks_so(fake_plan):
    sink = _Sink()
    feed = LiveFeed([sink])
    phase = fake_plan.phases[0]
    feed.handle(RunStarted("abc123", fake_plan))
    feed.handle(PhaseStarted(phase, 0, 0, 1))
    feed.handle(PhaseFinished(phase, _finished(phase.name, PhaseStatus.ABORTED)))
    assert [c[3] for c in sink.calls if c[0] == "totals"] == [True]


def test_a_counter_ends_on_the_stored_total_and_never_goes_back():
    key = ("r1", 0, "local", "read")
    live = LiveSecond(0, "measure", "local", "read", 9, 1.0, 480, 3932160, 100.0, 819200.0,
                      None, None, None, LiveSource.FIO_STATUS)  # fmt: skip
    total = PhaseTotal(0, "measure", "local", "read", 500, 4096000)

    def counters(known, seconds, totals):
        return {k: (v.ios, v.io_bytes) for k, v in final_values(known, seconds, totals).items()}

    assert counters([], {key: live}, {}) == {key: (480, 3932160)}
    assert counters([], {key: live}, {key: total}) == {key: (500, 4096000)}
    # a fill that streamed no live second still ends on its totals
    assert counters([], {}, {key: total}) == {key: (500, 4096000)}
    # a host kernel that counted more (readahead) than fio: the counter stays
    higher = replace(live, ios=None, io_bytes=5_000_000)
    assert counters([], {key: higher}, {key: total}) == {key: (500, 5_000_000)}
    # a series the run knows of counts from 0 before its phase's I/O
    assert counters([key], {}, {}) == {key: (0, 0)}
    assert final_values([key], {}, {})[key].lat_buckets == (0,) * 25


def test_the_endpoint_waits_for_every_scraper_it_has_seen():
    assert not served_everyone({}, 10.0)  # nobody scraped yet: wait for one
    assert served_everyone({"prom A": 10.5}, 10.0)
    assert not served_everyone({"prom A": 10.5, "prom B": 9.0}, 10.0)
    scrapes = Scrapes()
    assert scrapes.wait_everyone(0.0, 0.01) is False  # nobody came
    scrapes.served("127.0.0.1 Prometheus/2.42", time.monotonic())
    since = time.monotonic()
    assert scrapes.wait_everyone(since, 0.01) is False  # seen, but not since the end
    # answered after the end, but asked before it: not the final figures
    scrapes.served("127.0.0.1 Prometheus/2.42", since - 0.5)
    assert scrapes.wait_everyone(since, 0.01) is False
    later = threading.Timer(0.05, scrapes.served, ("127.0.0.1 Prometheus/2.42", since + 0.01))
    later.start()
    assert scrapes.wait_everyone(since, 5.0) is True  # woken by the scrape, not the timeout
    later.join()


def _scrape(metrics: LiveMetrics) -> str:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(metrics)
    return generate_latest(registry).decode()


def _samples(text: str, name: str, **labels: str) -> dict[str, float]:
    """The samples of ``name`` whose labels include ``labels``, by their
    ``le`` (or "" for a sample without one)."""
    out = {}
    for line in text.splitlines():
        if not line.startswith(name + "{"):
            continue
        inside, value = line[len(name) + 1 :].rsplit("} ", 1)
        pairs = dict(part.split("=", 1) for part in inside.split('",'))
        pairs = {k: v.strip('"') for k, v in pairs.items()}
        if all(pairs.get(k) == v for k, v in labels.items()):
            out[pairs.get("le", "")] = float(value)
    return out


def _lats(values_ns) -> np.ndarray:
    return histogram.from_values(np.asarray(values_ns, dtype=np.uint64))


def test_metric_buckets_are_edges_of_fios_bins_and_count_what_lies_below():
    bounds = np.asarray(histogram.METRIC_BOUNDS_NS)
    rng = np.random.default_rng(47)
    # from 100 ns to 20 s, and each bound itself and the nanosecond below it
    values = np.concatenate(
        [np.exp(rng.uniform(np.log(100), np.log(2e10), 20_000)).astype(np.uint64),
         bounds, bounds - 1]
    )  # fmt: skip
    buckets = histogram.metric_buckets(_lats(values))
    assert len(buckets) == len(bounds) + 1 and sum(buckets) == values.size
    below = np.cumsum(buckets)[:-1]
    # each bucket counts exactly the completions below its bound: the bounds
    # are edges of fio's bins (a completion at a bound is the next bin's)
    assert below.tolist() == [int((values < b).sum()) for b in bounds]


def test_status_seconds_carry_fios_histogram_since_the_phase_began():
    snaps = _recorded()
    meter = StatusMeter(0, "p", "local")
    seconds = [s for snap in snaps for s in meter.feed(snap, 1000.0 + snap.t_ms / 1000)]
    reads = [s for s in seconds if s.direction == "read"]
    assert len(reads) >= 3
    for s in reads:  # cumulative: every completion so far, each once
        assert sum(s.lat_buckets) == s.ios
    used = [snap for snap in snaps if snap.runtime_ms][-2]  # the last one not folded away
    assert reads[-1].lat_buckets == histogram.metric_buckets(used.dirs["read"].hist)
    assert reads[-1].lat_sum_ns == used.dirs["read"].lat_sum_ns  # fio's means × counts, summed
    for before, after in itertools.pairwise(reads):
        assert all(a >= b for a, b in zip(after.lat_buckets, before.lat_buckets, strict=True))
        assert after.lat_sum_ns > before.lat_sum_ns


def test_metrics_are_counters_and_a_latency_histogram_in_base_units():
    metrics = LiveMetrics()
    early, late = _lats([900] * 60 + [1500] * 40), _lats([900] * 120 + [1500] * 80)
    later = LiveSecond(2, "measure", "10.0.0.2:8765", "write", 2, 2.0, 200, 819200, 100.0,
                       409600.0, 2e6, 1.5e6, 9e6, LiveSource.FIO_STATUS, 2.4e5,
                       histogram.metric_buckets(late))  # fmt: skip
    earlier = LiveSecond(2, "measure", "10.0.0.2:8765", "write", 1, 1.0, 100, 409600, 100.0,
                         409600.0, 2e6, 1.5e6, 9e6, LiveSource.FIO_STATUS, 1.2e5,
                         histogram.metric_buckets(early))  # fmt: skip
    metrics.put_seconds("r1", [later, earlier])  # a late second never takes a counter back
    text = _scrape(metrics)
    labels = 'direction="write",host="10.0.0.2:8765",phase="measure",phase_index="2",point=""'
    labels += ',run="r1"'
    assert f"iorig_io_operations_total{{{labels}}} 200.0" in text
    assert f"iorig_io_bytes_total{{{labels}}} 819200.0" in text
    assert f"iorig_io_latency_mean_seconds{{{labels}}} 0.002" in text
    where = {"run": "r1", "phase_index": "2", "direction": "write"}
    # 120 completions below 1 µs, all 200 below 2 µs; the sum in seconds
    buckets = _samples(text, "iorig_io_latency_seconds_bucket", **where)
    assert (buckets["1e-06"], buckets["2e-06"], buckets["+Inf"]) == (120, 200, 200)
    assert len(buckets) == 25 and list(buckets)[-1] == "+Inf"  # the same on every host
    assert _samples(text, "iorig_io_latency_seconds_count", **where) == {"": 200}
    assert _samples(text, "iorig_io_latency_seconds_sum", **where) == {"": pytest.approx(2.4e-4)}
    assert "quantile" not in text  # percentiles are the histogram's, for any set of hosts
    # the phase ends: the stored histogram, whatever the last live second was
    stored = _lats([900] * 130 + [1500] * 80 + [3_000_000] * 5)
    metrics.put_totals(
        "r1",
        [PhaseTotal(2, "measure", "10.0.0.2:8765", "write", 215, 880640, 2.7e5,
                    histogram.metric_buckets(stored))],
        aborted=False,
    )  # fmt: skip
    text = _scrape(metrics)
    buckets = _samples(text, "iorig_io_latency_seconds_bucket", **where)
    assert buckets["1e-06"] == 130 and buckets["0.002048"] == 210 and buckets["+Inf"] == 215
    assert list(buckets.values()) == np.cumsum(histogram.metric_buckets(stored)).tolist()
    assert _samples(text, "iorig_io_latency_seconds_sum", **where) == {"": pytest.approx(2.7e-4)}
    assert f"iorig_io_bytes_total{{{labels}}} 880640.0" in text
    metrics.forget(set())
    assert "iorig_io_bytes_total{" not in _scrape(metrics)


def test_run_info_names_each_run_and_host_in_bounded_label_values():
    metrics = LiveMetrics()
    hostile = "fast \x1b[31mred\x1b[0m \u202eevil" + "x" * 500
    target = "/mnt/\udcff" + "deep/" * 100  # a path whose bytes were not UTF-8
    metrics.put_run("r1", LiveRun(hostile, "peak", (("h1:8765", target), ("h2:8765", "/d")), ()))
    text = _scrape(metrics)  # written at all: no byte of it fails to encode
    info = [line for line in text.splitlines() if line.startswith("iorig_run_info{")]
    assert len(info) == 2 and all(line.endswith("} 1.0") for line in info)
    assert 'host="h2:8765"' in info[1] and 'scenario="peak"' in info[1]
    assert 'target="/d"' in info[1] and 'run="r1"' in info[1]
    for line in info:  # the exposition writes a backslash as two
        for value in line.split('"')[1::2]:
            assert len(value.replace("\\\\", "\\")) <= MAX_LABEL_CHARS
        # shown as escapes, never the characters a console would act on
        assert "\x1b" not in line and "\u202e" not in line and "\udcff" not in line
        assert "fast \\\\x1b[31mred" in line and "\\\\u202eevil" in line
    assert "/mnt/\\\\udcffdeep/" in info[0]
    assert label_value("plain") == "plain"
    assert label_value("a\nb") == "a\\x0ab"
    assert label_value("é" * 200) == "é" * (MAX_LABEL_CHARS - 1) + "…"


@pytest.mark.parametrize(
    ("given", "host", "port"),
    [("9464", "127.0.0.1", 9464), ("127.0.0.2:0", "127.0.0.2", 0), ("[::1]:80", "::1", 80),
     ("localhost:5", "127.0.0.1", 5)],
)  # fmt: skip
def test_a_metrics_address_is_on_loopback(given, host, port):
    assert parse_address(given) == parse_address(f"{host}:{port}" if ":" not in host else
                                                 f"[{host}]:{port}")  # fmt: skip
    assert (parse_address(given).host, parse_address(given).port) == (host, port)


@pytest.mark.parametrize(
    ("given", "why"),
    [("10.1.2.3:9464", "loopback only"), ("0.0.0.0:9464", "loopback only"),
     ("127.0.0.1:99999", "port"), ("127.0.0.1:x", "port"), ("example.com:80", "not an IP")],
)  # fmt: skip
def test_a_metrics_address_beyond_loopback_or_malformed_is_refused(given, why):
    with pytest.raises(UserError, match=why):
        parse_address(given)
    if why == "loopback only":  # what authenticates its clients may listen there
        assert parse_address(given, anywhere=True).port == 9464


def test_the_stop_rules_say_where_they_stand():
    from iorig.analyze.precision import PrecisionWatch
    from iorig.analyze.steady import SteadyWatch
    from iorig.scenario.schema import SteadyRule

    steady = SteadyWatch(SteadyRule(metric="iops", round=1.0, window=3))
    assert "3 needed" in steady.describe()
    for t in range(5):
        steady.feed(t * 1000, t, 1000 * t, 0)
    assert "window held" in steady.describe() and "range 0.0%" in steady.describe()
    precise = PrecisionWatch(2.0, 5, 60, "iops")
    assert "no interval yet" in precise.describe()
    json.dumps(precise.describe())


def test_runs_that_go_on_together_are_followed_apart(fake_plan):
    sink = _Sink()
    feed = LiveFeed([sink])
    phase = fake_plan.phases[0]
    feed.handle(RunStarted("aaa", fake_plan), "a")
    feed.handle(RunStarted("bbb", fake_plan), "b")
    feed.handle(PhaseStarted(phase, 0, 0, 2), "a")
    feed.handle(PhaseStarted(phase, 0, 3, 8), "b")
    feed.close()
    phases = {c[1]: c[2].index for c in sink.calls if c[0] == "phase"}
    assert phases == {"aaa": 1, "bbb": 4}  # each run's own phase, not the other's
    assert sorted(c[1] for c in sink.calls if c[0] == "drop") == ["aaa", "bbb"]


def test_a_status_with_bins_fio_cannot_write_gives_no_percentiles_not_a_failure():
    docs, _ = scan_documents((DATA / "status-randrw.status").read_text())
    for doc in docs[:2]:
        for job in doc["jobs"]:
            job["read"]["clat_ns"]["bins"] = {"17": 3, "not a bin": "x"}
    snaps = [status.snapshot(d) for d in docs[:2]]
    assert int(snaps[1].dirs["read"].hist.sum()) == 0  # no histogram, the counters stay
    meter = StatusMeter(0, "p", "local")
    meter.feed(snaps[0], 0.0)
    (read,) = [s for s in meter.feed(snaps[1], 1.0) if s.direction == "read"]
    assert read.lat_p99_ns is None and read.ios_per_s == pytest.approx(3000, rel=0.02)


def test_the_stop_rules_read_the_logged_seconds_where_every_job_logs_averages():
    docs, _ = scan_documents((DATA / "status-capped.status").read_text())
    snaps = [status.snapshot(d) for d in docs]
    watch = PrecisionWatch(2.0, 3, 60, "iops", margin=1.0, stop_artifact_s=0)
    feed = RuleFeed([watch], logged=True)
    stopped = [feed.feed(snap) for snap in snaps]
    # 2,000 or 2,001 each second: constant to a logged second, known at once
    assert [round(v) for v in watch.series] == _summed("iops")[: len(watch.series)]
    assert stopped.index(True) == 8  # the status holding second 8, the fewest for an interval
    feed.stopped()
    assert feed.stopped_after_s == 8  # the series keeps the eight seconds judged
    counted = PrecisionWatch(2.0, 3, 60, "iops")
    by_counts = RuleFeed([counted], logged=False)
    assert not any(by_counts.feed(snap) for snap in snaps)  # the counters' bursts: never


def test_a_reader_of_the_live_file_never_writes_it(tmp_path):
    (tmp_path / "odd?dir#1%").mkdir()
    db = tmp_path / "odd?dir#1%" / "results.sqlite"  # a URI's characters, in a path
    with pytest.raises(LiveUnwritable, match="no live file yet"):
        LiveStore.reading(db)
    assert not live_path(db).exists()  # a reader made nothing
    with LiveStore(db) as live:
        live.put_seconds("r1", [LiveSecond(0, "m", "local", "read", 1, 2.0, 1, 4096, 1.0, 4096.0,
                                           None, None, None, LiveSource.FIO_STATUS)])  # fmt: skip
        live.put_phase("r1", LivePhase(0, "m", 0, 1, 2, 2.0, 0.5, "", LiveSource.FIO_STATUS, ()))
        with LiveStore.reading(db) as reader:
            assert reader.runs() == ["r1"] and len(reader.seconds_after("r1")) == 1
            with pytest.raises(sqlite3.OperationalError, match="readonly"):
                reader.conn.execute("DELETE FROM live_seconds")


def _sweep_plan():
    from iorig.run.plan import build_plan
    from iorig.scenario.adhoc import adhoc_source
    from iorig.scenario.sweep import resolve_with_sweep
    from iorig.targets import remote_target

    resolved = resolve_with_sweep(
        adhoc_source("randread", name="live"),
        None,
        {"iodepth": "8", "jobs": "2", "duration": "3s", "size": "16MiB"},
        {"bs": ["4k", "8k", "16k"]},
    )
    target = remote_target(
        None, host="127.0.0.2:8765", role="data", size=16 << 20, size_explicit=True,
        allow_destroy=False,
    )  # fmt: skip
    return build_plan(resolved, {"data": target}, {("data", True): "libaio"}, "fio", "fio-3.33")


def test_a_sweeps_points_are_the_scenarios_phase_and_a_number_from_the_start():
    plan = _sweep_plan()
    assert [p.name for p in plan.phases][1] == "randread:bs=4KiB"  # the point's own name
    metrics = LiveMetrics()
    feed = LiveFeed([metrics])
    feed.handle(RunStarted("r1", plan, "try 1", tuple(plan.schedule())))
    # before any phase ran: every phase's series, at 0, labelled with bounded values
    text = _scrape(metrics)
    moved = [line for line in text.splitlines() if line.startswith("iorig_io_bytes_total{")]
    assert len(moved) == 4 and all(line.endswith(" 0.0") for line in moved)
    assert "bs=" not in text and "KiB" not in text
    assert 'phase="fill",phase_index="0",point=""' in moved[0] and 'direction="write"' in moved[0]
    for index, line in enumerate(moved[1:], start=1):
        assert f'phase="randread",phase_index="{index}",point="{index - 1}"' in line, line
    assert 'label="try 1"' in text and 'scenario="live"' in text
    buckets = _samples(text, "iorig_io_latency_seconds_bucket", phase_index="2")
    assert len(buckets) == 25 and set(buckets.values()) == {0.0}
    # an A/B side's phase is shown with its label live, but labelled as the scenario's
    second = replace(plan.phases[2], name="side a: randread:bs=8KiB")
    second = replace(second, scenario_phase=plan.phases[2].scenario_name)
    feed.handle(PhaseStarted(second, 0, 2, 4))
    assert 'phase="randread",phase_index="2",point="1"' in _scrape(metrics)
    assert "side a" not in _scrape(metrics)


def test_the_live_page_is_told_the_phases_still_to_come(tmp_path):
    # issue 50: the live page said "(2/4)" and not which phases were to come
    plan = _sweep_plan()
    with LiveStore(tmp_path / "results.sqlite") as live:
        feed = LiveFeed([live])
        feed.handle(RunStarted("r1", plan, None, tuple(plan.schedule())))
        feed.handle(PhaseStarted(plan.phases[1], 0, 1, 4))
        now = live.phase("r1")
        assert now is not None and (now.index, now.total) == (2, 4)
        assert now.coming == ("randread:bs=8KiB", "randread:bs=16KiB")
        feed.handle(PhaseStarted(plan.phases[3], 0, 3, 4))
        assert live.phase("r1").coming == ()  # the last phase
        # a search decides its phases as it goes: none are said to come
        feed.handle(RunStarted("r2", plan, None, None))
        feed.handle(PhaseStarted(plan.phases[1], 0, 1, None))
        assert live.phase("r2").coming == ()


def test_a_stopped_runs_phases_that_never_began_are_dropped_at_its_end():
    metrics = LiveMetrics()
    phases = (MetricPhase(0, "fill", None, ("write",)), MetricPhase(1, "measure", None, ("read",)))
    metrics.put_run("r1", LiveRun("", "s", (("local", "/dev/x"),), phases))
    assert 'phase="measure"' in _scrape(metrics)
    metrics.put_phase("r1", LivePhase(0, "fill", 0, 1, 2, 3.0, 1.0, None, None))
    metrics.put_totals("r1", [PhaseTotal(0, "fill", "local", "write", 4, 16384)], aborted=True)
    metrics.drop_run("r1")  # interrupted in the fill: the measure never began
    text = _scrape(metrics)
    assert 'phase="measure"' not in text
    assert _samples(text, "iorig_io_bytes_total", phase="fill") == {"": 16384.0}


def _a_run_in(sink, plan, phase_bytes: int) -> PhaseResult:
    """The events of a run of ``plan``'s fill and first measured phase into
    ``sink``: one live second of the measured phase, its stored totals; the
    stored result of the measured phase."""
    feed = LiveFeed([sink])
    feed.handle(RunStarted("r1", plan, None, tuple(plan.schedule())))
    fill, measure = plan.phases[:2]
    feed.handle(PhaseStarted(fill, 0, 0, 2))
    filled = replace(_finished(fill.name, PhaseStatus.OK, ddir="write"), kind=fill.kind)
    feed.handle(PhaseFinished(fill, filled))
    feed.handle(PhaseStarted(measure, 0, 1, 2))
    second = LiveSecond(1, measure.name, "local", "read", 1, 1.0, 10, phase_bytes // 2, 10.0,
                        40960.0, None, None, None, LiveSource.FIO_STATUS)  # fmt: skip
    feed.handle(PhaseProgress(measure, 0, 1.0, 0.5, None, (second,)))
    result = _finished(measure.name, PhaseStatus.OK)
    feed.handle(PhaseFinished(measure, result))
    feed.close()
    return result


def test_the_live_file_keeps_an_ended_runs_totals_for_a_while(tmp_path, fake_plan):
    db = tmp_path / "results.sqlite"
    with LiveStore(db) as live:
        second = LiveSecond(0, "m", "local", "read", 1, 2.0, 3, 12288, 3.0, 12288.0, None, None,
                            None, LiveSource.FIO_STATUS, 4.5e4, (3,) + (0,) * 24)  # fmt: skip
        live.put_seconds("r0", [second])
        assert live.seconds_after("r0")[0][1] == second  # the histogram goes through the file
        _a_run_in(live, fake_plan, 4096000)
        assert live.runs() == [] and live.seconds_after("r1") == []  # the run ended
        ((info, ended_at),) = [v for k, v in live.metric_runs().items() if k == "r1"]
        assert ended_at == pytest.approx(time.time(), abs=60)
        assert [p.phase for p in info.phases] == ["fill", "randread"]
        totals = live.totals("r1")
        assert [(t.phase_index, t.io_bytes) for t in totals] == [(0, 4096000), (1, 4096000)]
        assert totals[1].lat_buckets == histogram.metric_buckets(_ONE_BIN)
        # long after: the next run's end takes them away
        live.conn.execute("UPDATE live_runs SET ended_at = ?", (time.time() - KEEP_ENDED_S - 1,))
        live.drop_run("r2")
        assert live.metric_runs() == {} and live.totals("r1") == []


def test_serve_exports_an_ended_runs_final_figures_until_every_scraper_has_them(
    tmp_path, fake_plan
):
    db = tmp_path / "results.sqlite"
    with LiveStore(db) as live:
        exported = LiveMetrics()
        scrapes = Scrapes()
        feed = MetricFeed(exported, scrapes, linger_s=3600)
        live.put_run("r1", LiveRun("", "live", (("local", "/x"),), ()))
        feed.poll(live)
        scrapes.served("prom", time.monotonic())  # a scraper that saw the run going
        result = _a_run_in(live, fake_plan, 4096000)  # the whole run between two reads
        feed.poll(live)
        text = _scrape(exported)
        stored = result.aggregate.totals["read"]
        assert _samples(text, "iorig_io_bytes_total", phase="randread") == {"": stored.io_bytes}
        assert _samples(text, "iorig_io_bytes_total", phase="fill") == {"": 4096000.0}
        assert _samples(text, "iorig_io_latency_seconds_count", phase="randread") == {"": 1000.0}
        feed.poll(live)
        assert 'phase="randread"' in _scrape(exported)  # not scraped since: it stays
        scrapes.served("prom", time.monotonic())
        feed.poll(live)
        assert "iorig_io_bytes_total{" not in _scrape(exported)
        feed.poll(live)  # the file still holds it: it does not come back
        assert "iorig_run_info{" not in _scrape(exported)
        # without a scraper, for at most the linger
        at_once = LiveMetrics()
        MetricFeed(at_once, Scrapes(), linger_s=0).poll(live)
        assert "iorig_io_bytes_total{" not in _scrape(at_once)


def test_a_phase_over_its_data_once_runs_without_fios_status_unless_a_rule_needs_it():
    """fio before 3.42 deadlocks in its status reporting where I/Os take
    seconds (run/local.py, needs_status): the data set's fill decides
    nothing from the status, so fio runs it without; a measured phase
    streams it, and so does a fill whose events count from it."""
    from iorig.model import PhaseKind
    from iorig.run.local import needs_status

    fill, measured = _sweep_plan().phases[:2]
    assert fill.kind is PhaseKind.PREFILL and measured.kind is PhaseKind.MEASURE
    assert not needs_status(fill, [])
    assert needs_status(measured, [])
    assert needs_status(fill, [PrecisionWatch(5.0, 3.0, 30.0, "iops")])
    assert needs_status(replace(fill, events=(object(),)), [])
