"""What a long run on many hosts costs: iorig's run itself (collecting and
storing the phase), ``show``, ``show --json``, ``report`` (HTML and
``--format seconds``), ``compare`` of two such runs, ``export`` and
``import``, each in a process of its own, with its wall time and its peak
resident memory.

Each run is one measure phase of HOURS × HOSTS, generated as fio's client
writes it for fio servers (the shape recorded in
tests/data/clientserver-3hosts): per host one job's iops, bw and clat_hist
logs (those iorig's jobs ask for), a line a second on the wall clock, about
40 busy histogram bins a second out of 1,856; and the client's json+
output, whose totals and merged histogram are what the logs add up to. The
run goes through iorig's own path: ``parse.read_logs``, the collection step
(``run/collect.py``), the plausibility checks, the store. Only fio itself
and the hosts are left out (a backend that hands over the generated files).

    .venv/bin/python bench/scale.py [--config 1x4 --config 1x16 --config 24x16]
                                     [--memory-limit-gib 16] [--keep DIR]

``--config HOURSxHOSTS``; a step whose process goes past the memory limit
is reported as such (the limit is its address space, RLIMIT_AS).
"""

from __future__ import annotations

import argparse
import copy
import json
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping
from dataclasses import replace
from pathlib import Path

import numpy as np

from iorig.fio import parse
from iorig.fio.hosts import parse_entry
from iorig.fio.runner import FioExit
from iorig.model import Disclosure, RunStatus, histogram
from iorig.run.backend import HostLogs, PhaseJob, RawPhase
from iorig.run.plan import Plan, build_plan
from iorig.scenario.adhoc import adhoc_source
from iorig.scenario.loading import ResolvedScenario, resolve
from iorig.targets import Target

REPO = Path(__file__).resolve().parents[1]
TEMPLATE = REPO / "tests" / "data" / "clientserver-3hosts" / "output.json"
PORT = 8765
BUSY_BINS = 40
T0_MS = 1_795_420_819_000
LEVEL_IOPS = 20_000.0  # each host's mean rate
CENTER_NS = 250_000  # where each second's latencies gather

# ------------------------------------------------------------ the fio output


def _address(i: int) -> str:
    return f"127.0.{2 + i // 250}.{2 + i % 250}"


def _weights() -> np.ndarray:
    center = int(histogram.bin_index(np.array([CENTER_NS]))[0])
    idx = np.arange(center - BUSY_BINS // 2, center + BUSY_BINS // 2)
    w = np.exp(-0.5 * ((idx - center) / (BUSY_BINS / 6)) ** 2)
    return idx, w / w.sum()


def _template() -> tuple[dict, dict]:
    doc = parse.split_documents(TEMPLATE.read_text())[-1]
    jobs = [c for c in doc["client_stats"] if c["jobname"] != "All clients"]
    return doc, jobs[0]


def _hist_lines(times: np.ndarray, rows: np.ndarray, first: int, last: int) -> Iterator[str]:
    """fio's histogram log lines (``time, ddir, bs, bin0 … bin1855``) of
    rows that are zero outside bins [first, last)."""
    before = "0, " * first
    after = ", 0" * (histogram.NR_BINS - last)
    for t, row in zip(times.tolist(), rows.tolist(), strict=True):
        yield f"{t}, 0, 4096, {before}{', '.join(map(str, row))}{after}\n"


def generate(folder: Path, seconds: int, hosts: int, level: float, seed: int) -> str:
    """Write every host's logs into ``folder``; the client's json+ output."""
    rng = np.random.default_rng(seed)
    doc, job = _template()
    idx, weights = _weights()
    first, last = int(idx[0]), int(idx[-1]) + 1
    values = np.array([histogram._bin_value(int(i)) for i in idx], dtype=float)
    entries = []
    for i in range(hosts):
        address, prefix = _address(i), f"randread.h{i}"
        iops = np.maximum(1, np.round(level * (1 + 0.05 * rng.standard_normal(seconds))))
        iops = iops.astype(np.int64)
        rows = np.floor(np.outer(iops, weights)).astype(np.int64)
        rows[:, len(idx) // 2] += iops - rows.sum(axis=1)  # each second's counts add up
        times = T0_MS + 3 * i + 1000 * np.arange(1, seconds + 1) + rng.integers(0, 3, seconds)
        # the logs iorig's jobs ask fio for (fio/jobfile.py): no averaged latency log
        for kind, column in (("iops", iops), ("bw", iops * 4)):
            with (folder / f"{prefix}_{kind}.1.log.{address}").open("w") as out:
                out.writelines(
                    f"{t}, {int(v)}, 0, 0, 0\n"
                    for t, v in zip(times.tolist(), column.tolist(), strict=True)
                )
        with (folder / f"{prefix}_clat_hist.1.log.{address}").open("w") as out:
            out.writelines(_hist_lines(times, rows, first, last))
        ios = int(iops.sum())
        totals = rows.sum(axis=0)
        entry = copy.deepcopy(job)
        read = entry["read"]
        runtime_ms = seconds * 1000
        read |= {
            "total_ios": ios,
            "io_bytes": ios * 4096,
            "io_kbytes": ios * 4,
            "iops": ios * 1000 / runtime_ms,
            "bw_bytes": ios * 4096 * 1000 // runtime_ms,
            "bw": ios * 4 * 1000 // runtime_ms,
            "runtime": runtime_ms,
        }
        read["clat_ns"] |= {
            "N": ios,
            "mean": float((totals * values).sum() / ios),
            "min": int(values[0]),
            "max": int(values[-1]),
            "bins": {str(int(v)): int(c) for v, c in zip(values, totals, strict=True) if c},
        }
        read["clat_ns"].pop("percentile", None)
        entry |= {"jobname": "randread", "hostname": address, "port": PORT}
        entry["job_runtime"] = runtime_ms
        entries.append(entry)
    doc = copy.deepcopy(doc)
    doc["client_stats"] = entries
    return json.dumps(doc)


# ------------------------------------------------------------ a backend of files


class FilesBackend:
    """Hands over a generated phase as a fio client would bring it back."""

    def __init__(self, folder: Path, output: str, hosts: int, seconds: int) -> None:
        self.folder = folder
        self.output = output
        self.seconds = seconds
        self._hosts = tuple(f"{_address(i)}:{PORT}" for i in range(hosts))

    @property
    def hosts(self) -> tuple[str, ...]:
        return self._hosts

    @property
    def remote(self) -> bool:
        return True

    def prepare(
        self,
        resolved: ResolvedScenario,
        target_paths: Mapping[str, Mapping[str, str]],
        *,
        allow_destroy: bool,
        repeats: int,
    ) -> Plan:
        size = resolved.scenario.targets["data"].size
        target = Target("data", "/t", "file", Path("/t/iorig-data.dat"), size, None, False, False)
        plan = build_plan(resolved, {"data": target}, {}, "fio", "fio-3.33", repeats)
        addresses = tuple(parse_entry(h) for h in self._hosts)
        return replace(
            plan,
            hosts=addresses,
            host_targets={h: {"data": target} for h in self._hosts},
            disclosure=Disclosure({"fio": {"version": "fio-3.33"}}),
        )

    def begin_run(self, run_id: str, *, keep_files: bool) -> None:
        pass

    def run_phase(self, job: PhaseJob) -> Iterator[RawPhase]:
        started = T0_MS / 1000
        yield RawPhase(
            started_at=started,
            ended_at=started + self.seconds + 1,
            job_text="[randread]\n",
            command=("fio", "--client"),
            exit=FioExit(0, self.output, "", None, float(self.seconds)),
            logs=parse.read_logs(self.folder),
            hosts=tuple(HostLogs(h, f".h{i}") for i, h in enumerate(self._hosts)),
            wallclock_logs=True,
            exit_code_counts=False,
        )

    def run_jobs(
        self, texts: Mapping[str, str], timeout_s: float, *, read_only: bool = False
    ) -> FioExit:
        raise RuntimeError("no probes: the engine is fixed")

    def stop(self, *, at_once: bool = False) -> None:
        pass

    def clean_up(self, plan: Plan, *, keep_files: bool) -> list[str]:
        return []

    def control(self, host):  # type: ignore[no-untyped-def]
        raise RuntimeError("no events")


def store_run(folder: Path, db: Path, hours: float, hosts: int, label: str, scale: float) -> None:
    """Generate the phase and run it into ``db`` (a child process's work)."""
    from iorig.run.session import execute
    from iorig.store import Store

    seconds = round(hours * 3600)
    output = generate(folder, seconds, hosts, LEVEL_IOPS * scale, seed=ord(label[0]))
    source = adhoc_source("randread", prefill=False)
    # a queue deep enough for the rate at the latency (Little's law, which
    # the plausibility checks hold fio's figures to)
    overrides = {"duration": f"{seconds}s", "size": "1GiB", "engine": "libaio", "iodepth": "16"}
    resolved = resolve(source, None, overrides)
    backend = FilesBackend(folder, output, hosts, seconds)
    plan = backend.prepare(resolved, {}, allow_destroy=False, repeats=1)
    with Store(db) as store:
        outcome = execute(plan, store, backend, command="bench/scale.py", label=label)
        run = store.load_run(outcome.run_id).run
    if run.status is not RunStatus.OK:  # the figures would measure a failure's path
        raise SystemExit(f"run {outcome.run_id} {run.status}: {run.error}")
    print(outcome.run_id)


# ------------------------------------------------------------ measuring

PROBE = """
import json, resource, subprocess, sys, time
limit = int(sys.argv[1])
def cap():
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
started = time.monotonic()
done = subprocess.run(sys.argv[2:], capture_output=True, text=True, preexec_fn=cap)
use = resource.getrusage(resource.RUSAGE_CHILDREN)
print(json.dumps({"code": done.returncode, "wall_s": time.monotonic() - started,
                  "max_rss_kib": use.ru_maxrss, "stdout": done.stdout[-300:],
                  "stderr": done.stderr[-600:]}))
"""


def measure(command: list[str], limit_bytes: int) -> dict:
    done = subprocess.run(
        [sys.executable, "-c", PROBE, str(limit_bytes), *command],
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(done.stdout)


def _iorig(db: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "iorig", "--db", str(db), *args]


def run_config(hours: float, hosts: int, work: Path, limit: int) -> list[tuple[str, dict]]:
    db = work / "results.sqlite"
    steps: list[tuple[str, dict]] = []
    ids = []
    for label, scale in (("A", 1.0), ("B", 1.05)):
        folder = work / f"fio-{label}"
        folder.mkdir()
        script = (
            "import sys; sys.path.insert(0, sys.argv[1]); from bench.scale import store_run; "
            "store_run(*map(__import__('pathlib').Path, sys.argv[2:4]), float(sys.argv[4]), "
            "int(sys.argv[5]), sys.argv[6], float(sys.argv[7]))"
        )
        arguments = [str(REPO), str(folder), str(db), str(hours), str(hosts), label, str(scale)]
        result = measure([sys.executable, "-c", script, *arguments], limit)
        steps.append((f"run {label} (generated logs read, collected, stored)", result))
        if result["code"] != 0:
            return steps
        ids.append(result["stdout"].split()[-1])
    bundle, other = work / "run.iorig", work / "other.sqlite"
    for name, command in (
        ("show", _iorig(db, "show", ids[0])),
        ("show --json", _iorig(db, "show", ids[0], "--json")),
        ("report (HTML)", _iorig(db, "report", ids[0], "-o", str(work / "report.html"))),
        (
            "report --format seconds",
            _iorig(db, "report", ids[0], "--format", "seconds", "-o", str(work / "seconds.csv")),
        ),
        ("compare", _iorig(db, "compare", ids[0], ids[1])),
        ("export", _iorig(db, "export", ids[0], "-o", str(bundle))),
        ("import", _iorig(other, "import", str(bundle))),
    ):
        result = measure(command, limit)
        written = {"report (HTML)": "report.html", "report --format seconds": "seconds.csv"}
        if name in written and result["code"] == 0:
            result["file_mb"] = (work / written[name]).stat().st_size / 1e6
        steps.append((name, result))
    return steps


def _cell(result: dict, limit_gib: float) -> str:
    if result["code"] != 0:
        memory = "MemoryError" in result["stderr"] or "Cannot allocate" in result["stderr"]
        why = f"over {limit_gib:g} GiB" if memory else f"exit {result['code']}"
        return f"failed ({why}) after {result['wall_s']:.1f} s"
    extra = f", file {result['file_mb']:.1f} MB" if "file_mb" in result else ""
    return f"{result['wall_s']:.1f} s, {result['max_rss_kib'] / 1024:.0f} MiB{extra}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", action="append", help="HOURSxHOSTS, e.g. 1x16 (repeatable)")
    parser.add_argument("--memory-limit-gib", type=float, default=16.0)
    parser.add_argument("--keep", type=Path, help="keep the generated files and databases here")
    args = parser.parse_args()
    configs = args.config or ["1x4", "1x16"]
    limit = int(args.memory_limit_gib * 2**30)
    for config in configs:
        hours_text, _, hosts_text = config.partition("x")
        hours, hosts = float(hours_text), int(hosts_text)
        started = time.monotonic()
        with tempfile.TemporaryDirectory(prefix="iorig-scale-") as tmp:
            work = args.keep / config if args.keep else Path(tmp)
            work.mkdir(parents=True, exist_ok=True)
            steps = run_config(hours, hosts, work, limit)
        print(f"\n{hours:g} h × {hosts} hosts ({time.monotonic() - started:.0f} s in all)")
        for name, result in steps:
            print(f"  {name:52} {_cell(result, args.memory_limit_gib)}")
            if result["code"] != 0:
                print("    " + result["stderr"].strip().splitlines()[-1][:200])
    print(f"\npeak memory: each step's process (ru_maxrss); limit {args.memory_limit_gib:g} GiB")


if __name__ == "__main__":
    main()
