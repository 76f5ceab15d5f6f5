"""Truth 5–7: the Exchange (Jetstress-like) scenario against devices whose
answer is known.

5. A capped database and an uncapped log: the log write requirement is
   judged at the log device's own latency (a bare fio run of the same log
   writes on it), not at what fio's flow control adds while a slow database
   holds the log back. Database read latency follows the cap:
   in-flight ÷ cap (Little's law on a throttled queue), thread by thread.
6. On block devices the databases are db_size each (created, duplicated and
   checksummed), not the whole device.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from tests.fioservers import fio_servers
from tests.truth.device import Capped

from iorig.fio.parse import read_logs
from iorig.store import Store
from iorig.units import format_si

pytestmark = [pytest.mark.fio, pytest.mark.truth]

MiB = 1 << 20
# the scheduler's latency on a busy 2-core machine: log writes averaged
# 398 µs against 77 µs bare beside another truth test in a fresh-clone run;
# the fault this slack must still catch adds 17 ms an I/O
LOG_SLACK_NS = 2_000_000
DB_CAP = 60  # IOPS each way on the slow database


def _exchange(db: Capped, log: Capped, truth_db, *args: str, duration: str = "4s"):
    return db.iorig(
        truth_db,
        "run",
        "exchange",
        "--quick",
        "--target-db",
        str(db.path),
        "--target-log",
        str(log.path),
        "--allow-destroy",
        "--duration",
        duration,
        "--maintenance-rate",
        "64KiB",
        *args,
    )


def _bare_log_latency_ns(log: Capped) -> float:
    """The log device's own latency for the log writes iorig judges: 4-8 KiB
    sequential writes at 20 a second, alone on the device."""
    doc = log.fio(
        "--rw=write",
        "--bssplit=4k/50:8k/50",
        "--ioengine=libaio",
        "--iodepth=1",
        "--rate_iops=20",
        "--size=4m",
        runtime_s=3,
    )
    (job,) = doc["jobs"]
    return float(job["write"]["clat_ns"]["mean"])


def test_a_slow_database_does_not_fail_the_log_and_sizes_are_honoured(capped, truth_db):
    # 60 reads a second: 4 threads keep about 4 reads queued on the cap, 67 ms
    # each, far over the 20 ms limit (at 150, 27 ms, flow control's pauses
    # took it under 20 ms on a loaded machine)
    db = capped(size_bytes=256 * MiB, read_iops=DB_CAP, write_iops=DB_CAP)
    log = capped(size_bytes=64 * MiB)
    done = _exchange(db, log, truth_db)
    assert done.returncode in (0, 3), done.stdout + done.stderr
    shown = json.loads(db.iorig(truth_db, "show", "last", "--json").stdout)
    by_name = {v["name"]: v for v in shown["verdicts"]}
    log_avg = by_name["Log writes, average latency"]
    reads = by_name["Database reads, average latency"]
    bare = _bare_log_latency_ns(log)
    print(
        f"truth 5: log write average {log_avg['value'] / 1e3:.0f} µs, the log device alone "
        f"{bare / 1e3:.0f} µs; database reads {reads['value'] / 1e6:.1f} ms (capped at "
        f"{DB_CAP} IOPS)"
    )
    # the fault this guards against adds the database's milliseconds (60 IOPS:
    # 17 ms an I/O) to each log write; a device in memory answers in tens of
    # µs, where a neighbour's CPU alone adds as much (104 µs against 42 bare)
    assert log_avg["passed"] and log_avg["value"] <= 1.5 * bare + LOG_SLACK_NS, (
        log_avg["value"],
        bare,
    )
    # the database is what is slow: its reads queue on the cap
    assert not reads["passed"] and reads["value"] > 30e6, reads["value"]
    writes = by_name["Database writes, average latency (reported, as Jetstress does; no limit)"]
    assert writes["bound"] == "info" and writes["value"] > 0
    # truth 6: two 48 MiB databases on a 256 MiB device, not the device
    timed = {p["phase"]: p for p in shown["timed_phases"]}
    assert timed["create"]["io_bytes"] == 48 * MiB
    assert timed["duplicate"]["io_bytes"] == 48 * MiB
    assert timed["checksum"]["io_bytes"] == 96 * MiB
    assert shown["run"]["targets"][0]["size_bytes"] == 96 * MiB


CAP = 400
CAP_BAND = 0.03  # truth 1's band for a per-second median at the cap


def test_database_read_latency_queues_on_the_cap_thread_by_thread(capped, truth_db):
    """Reads (60 % of the I/Os) capped at 400 a second, writes not: a thread
    spends most of its time waiting on a read, so T threads keep up to T
    reads in flight, and by Little's law each waits the reads in flight ÷
    the device's read rate. The writes between reads are not free, more so
    on a busy CPU: alone, 4 threads kept 3.3 reads in flight (8.2 ms);
    beside a soak's load 2.6 while 2 threads kept 1.9, so the wait grew
    1.37 times, not 2, when the threads doubled. So each latency, times the
    device's own read rate over the phase (its counters, not fio's), is at
    most the threads, and it grows with them."""
    db = capped(size_bytes=128 * MiB, read_iops=CAP)
    log = capped(size_bytes=32 * MiB)
    with db.sampling() as samples:
        done = _exchange(
            db, log, truth_db, "--threads", "1,2,4", "--db-size", "32MiB", duration="2s"
        )
    assert done.returncode in (0, 3), done.stdout + done.stderr
    shown = json.loads(db.iorig(truth_db, "show", "last", "--json").stdout)
    reads = {
        v["phase"]: v["value"]
        for v in shown["verdicts"]
        if v["name"] == "Database reads, average latency"
    }
    with Store(truth_db) as store:
        (run_id,) = store.run_ids(limit=1)
        phases = {p.name: p for p in store.load_run(run_id).phases}
    waits = []
    for threads in (1, 2, 4):
        name = f"performance:threads={threads}"
        got = reads[name]
        span = samples.active("read", phases[name].started_at, phases[name].ended_at)
        assert span is not None, name
        rate = float(np.median(samples.windows("read", *span, what="ios")))
        in_flight = got / 1e9 * rate
        print(
            f"truth 5: {threads} thread(s): db read latency {got / 1e6:.2f} ms, the "
            f"device {rate:.0f} reads/s, so {in_flight:.2f} reads in flight"
        )
        # the device reads at most at its cap, and a thread waits on one read
        # at a time: truth 1's band on the rate
        assert rate <= CAP * (1 + CAP_BAND), (threads, rate)
        assert in_flight <= threads * (1 + CAP_BAND), (threads, got, rate)
        # and the reads do queue on the cap: uncapped, a write takes less of a
        # thread's time than a capped read, so at least half the threads wait
        # on one (a soak's fewest: 2.6 of 4)
        assert in_flight >= threads / 2, (threads, got, rate)
        waits.append(got)
    # more threads queue more reads on the cap: each doubling waits longer
    assert waits[0] < waits[1] < waits[2], waits
    # the scaling table shows IOPS per thread and the read and write latency
    assert "db IOPS per thread" in done.stdout and "scaling" in done.stdout
    assert "db read lat" in done.stdout and "db write lat" in done.stdout
    # --threads auto: with a read limit of 6 ms the model passes 1 and 2 threads
    # (2.5 and 5 ms) and fails 4 (10 ms); the fewest that pass is 1
    auto = _exchange(
        db,
        log,
        truth_db,
        "--threads",
        "auto",
        "--db-size",
        "32MiB",
        "--db-read-avg",
        "6ms",
        duration="2s",
    )
    assert auto.returncode == 0, auto.stdout + auto.stderr
    assert "fewest threads that pass every criterion: 1" in auto.stdout
    # a limit below what one thread waits (2.5 ms), and an IOPS target out of
    # reach, pass nothing: said so with the shortfall, exit 3
    none = _exchange(
        db,
        log,
        truth_db,
        "--threads",
        "auto",
        "--db-size",
        "32MiB",
        "--db-read-avg",
        "1500us",
        "--set",
        "target_iops=100000000",
        duration="2s",
    )
    assert none.returncode == 3, none.stdout + none.stderr
    assert "no thread count tried passes every criterion" in none.stdout
    assert "Verdict: FAIL" in none.stdout and "short by" in none.stdout


THREADS = 12
READ_CAP = 300
READ_CODE = 0  # fio's data direction code for reads in its logs


def _bare_read_seconds_ms(db: Capped, prefix: Path, seconds: int) -> np.ndarray:
    """Bare fio's 12 jobs at queue depth 1, Exchange's I/O (60 % 32 KiB
    random reads, the rest writes) over the same 96 MiB of the device: each
    second's read latency, ms — the jobs' one-second means weighted by their
    reads in that second. Unweighted, a job that waited longer (fewer reads)
    counted as much as one that did not: 1-3 % over fio's own mean."""
    db.fio(
        "--rw=randrw",
        "--rwmixread=60",
        "--bs=32k",
        "--ioengine=libaio",
        "--iodepth=1",
        f"--numjobs={THREADS}",
        "--size=96m",
        f"--write_lat_log={prefix}",
        f"--write_iops_log={prefix}",
        "--log_avg_msec=1000",
        runtime_s=seconds,
    )

    by_second: dict[int, list[tuple[float, float]]] = {}
    for kinds in read_logs(prefix.parent)[(prefix.name, None)].values():
        iops, clat = kinds["iops"], kinds["clat"]
        reads = {
            round(int(t) / 1000): float(n)
            for t, n, d in zip(iops.t_ms, iops.value, iops.ddir, strict=True)
            if d == READ_CODE
        }
        for t, mean, d in zip(clat.t_ms, clat.value, clat.ddir, strict=True):
            second = round(int(t) / 1000)
            if d == READ_CODE and reads.get(second):
                by_second.setdefault(second, []).append((float(mean), reads[second]))
    weighted = [
        sum(m * n for m, n in pairs) / sum(n for _, n in pairs)
        for _, pairs in sorted(by_second.items())
    ]
    return np.array(weighted) / 1e6


def test_twelve_threads_wait_on_reads_as_bare_fios_twelve_jobs_do(capped, truth_db, tmp_path):
    """Issue 49 item 6, differential: Jetstress's threads each keep their I/O
    outstanding, as bare fio's jobs at queue depth 1 do. With reads capped
    (writes not), 12 threads keep nearly 12 reads queued on the cap, each
    waiting about 12 / 300 s. On main every thread and log stream were one
    fio flow group, which holds each job to its own share of it: a thread
    that ran ahead waited for the others, 9.3 I/Os stayed in flight and the
    reads averaged 31.0 ms against bare fio's 39.8 ms, a PASS at a 35 ms
    limit that bare fio fails. The bound is the noise measured here: four
    standard errors of the difference of the two runs' per-second means."""
    db = capped(size_bytes=128 * MiB, read_iops=READ_CAP)
    log = capped(size_bytes=32 * MiB)
    done = _exchange(
        db, log, truth_db, "--threads", str(THREADS), "--checksum", "false", duration="8s"
    )
    assert done.returncode in (0, 3), done.stdout + done.stderr
    with Store(truth_db) as store:
        (run_id,) = store.run_ids(limit=1)
        (phase,) = [p for p in store.load_run(run_id).phases if p.name == "performance"]
    (threads,) = [sc for sc in phase.scopes if sc.scope.workload == "db"]
    mine = threads.series["read"].lat_mean_ns / 1e6
    mine = mine[np.isfinite(mine)]
    bare = _bare_read_seconds_ms(db, tmp_path / "bare", 8)
    stored = threads.totals["read"].lat_mean_ns / 1e6
    error = float(np.sqrt(mine.var(ddof=1) / mine.size + bare.var(ddof=1) / bare.size))
    print(
        f"issue 49: {THREADS} threads, reads capped at {READ_CAP}/s: iorig's reads "
        f"{stored:.1f} ms (seconds {mine.mean():.1f} ± {mine.std(ddof=1):.1f}), bare fio's "
        f"{bare.mean():.1f} ± {bare.std(ddof=1):.1f}; standard error of the difference "
        f"{error:.2f} ms"
    )
    assert mine.size >= 5 and bare.size >= 5, (mine, bare)
    assert abs(mine.mean() - bare.mean()) <= 4 * error, (mine.tolist(), bare.tolist())
    # and the phase's own figure is the seconds' (fio's mean over every read)
    assert abs(stored - mine.mean()) <= 4 * error, (stored, mine.tolist())


def test_two_hosts_are_each_judged_against_their_own_target(capped, truth_db, tmp_path):
    """Truth 7 (issue 26): two hosts, each database capped at 300 read and
    200 write IOPS, so each host does at most 500 transactional IOPS; with
    10,000 mailboxes per host (670 IOPS each) every host fails, though the
    two together exceed one host's target. The run's verdict is the worst."""
    if capped(size_bytes=MiB).how != "v1":
        pytest.skip("the fio servers' jobs are capped only by cgroup v1's root throttle")
    per_host_cap = 300 + 200
    devices = [
        (capped(size_bytes=128 * MiB, read_iops=300, write_iops=200), capped(size_bytes=128 * MiB))
        for _ in range(2)
    ]
    with fio_servers(2, tmp_path) as hosts:
        targets = ",".join(
            f"{role}@{host.label}={device.path}"
            for host, (db, log) in zip(hosts, devices, strict=True)
            for role, device in (("db", db), ("log", log))
        )
        done = devices[0][0].iorig(
            truth_db,
            "run",
            "exchange",
            "--quick",
            "--hosts",
            ",".join(h.label for h in hosts),
            "--target",
            targets,
            "--allow-destroy",
            "--db-size",
            "32MiB",
            "--log-size",
            "16MiB",
            "--duration",
            "4s",
            "--maintenance-rate",
            "64KiB",
            "--mailboxes",
            "10000",
        )
    assert done.returncode == 3, done.stdout + done.stderr
    shown = json.loads(devices[0][0].iorig(truth_db, "show", "last", "--json").stdout)
    iops = [v for v in shown["verdicts"] if v["metric"] == "iops"]
    print(
        f"truth 7: per-host transactional IOPS {[round(v['value']) for v in iops]}, "
        f"target {iops[0]['limit']:.0f} each, verdict {shown['verdict']}"
    )
    assert sorted(v["host"] for v in iops) == sorted(h.label for h in hosts)
    for v in iops:
        assert v["limit"] == pytest.approx(10000 * 0.067)
        assert v["value"] <= 1.05 * per_host_cap and not v["passed"], v
    # what the old verdict judged: the hosts' sum passes one host's target
    assert sum(v["value"] for v in iops) > iops[0]["limit"]
    assert shown["verdict"].startswith("FAIL on "), shown["verdict"]
    assert "Verdict: FAIL on" in done.stdout and "host" in done.stdout


MAILBOXES = 5000  # 335 transactional IOPS asked (0.067 each)


def test_compare_of_a_passing_and_a_failing_run_shows_both_verdicts(capped, truth_db):
    """Truth 8 (issue 26 item 3): the same 5,000 mailboxes (335 IOPS) on a
    database capped at 300 read and 200 write IOPS (at most 500
    transactional IOPS: PASS) and on one capped at 120 and 80 (at most 200:
    FAIL). The reads are 60 % of the I/Os, so both caps fill together and
    each side's transactional IOPS is its caps' sum. compare says PASS vs
    FAIL and shows each side's transactional IOPS, not only the total of
    every stream. 10 s runs: enough seconds for batch means to test the
    difference."""
    caps = {"fast": (300, 200), "slow": (120, 80)}
    log = capped(size_bytes=32 * MiB)
    devices = {}
    for label, (reads, writes) in caps.items():
        db = devices[label] = capped(size_bytes=128 * MiB, read_iops=reads, write_iops=writes)
        done = _exchange(
            db,
            log,
            truth_db,
            "--mailboxes",
            str(MAILBOXES),
            "--db-size",
            "32MiB",
            "--label",
            label,
            duration="10s",
        )
        assert done.returncode in (0, 3), done.stdout + done.stderr
    fast = devices["fast"]
    out = fast.iorig(truth_db, "compare", "fast", "slow").stdout
    print(out)
    verdicts = next(line for line in out.splitlines() if "PASS" in line or "FAIL" in line)
    assert "PASS" in verdicts and "FAIL" in verdicts, verdicts
    row = next(line for line in out.splitlines() if "transactional" in line)
    assert "PASS" in row and "FAIL" in row, row
    doc = json.loads(fast.iorig(truth_db, "compare", "fast", "slow", "--format", "json").stdout)
    compared = doc["verdicts"]
    assert [r["verdict"] for r in compared["runs"]] == ["PASS", "FAIL"]
    iops = next(r for r in compared["requirements"] if r["metric"] == "iops")
    for side, label in zip(iops["runs"], caps, strict=True):
        cap = sum(caps[label])
        print(
            f"truth 8: {label}: transactional IOPS {side['value']:.0f}, caps {cap}, target "
            f"{side['limit']:.0f}: {'PASS' if side['passed'] else 'FAIL'}"
        )
        assert 0.75 * cap <= side["value"] <= 1.05 * cap, (label, side["value"], cap)
        assert side["limit"] == pytest.approx(MAILBOXES * 0.067)
    assert [s["passed"] for s in iops["runs"]] == [True, False]
    # 500 against 200: a difference far beyond any noise
    assert iops["runs"][1]["verdict"] == "worse", iops["runs"][1]
    # the text shows both sides' figures as the verdict table writes them
    for side in iops["runs"]:
        assert f"{format_si(side['value'])} IOPS" in row, (row, side["value"])
