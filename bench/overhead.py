"""What does iorig cost over bare fio?

1. CPU per I/O (target: <= 1.02). fio running the job iorig renders, with
   the per-second logs iorig asks for and iorig's command line (json+ output,
   a status snapshot every second), against bare fio running the same job
   without logs or snapshots, alternating in pairs. The I/Os are random
   4 KiB reads from memory: a file in /dev/shm read through the page cache
   with psync, the generator's limit, where every cycle fio spends on an
   I/O shows (psync also keeps all the work in fio's own processes, where
   wait4's resource usage counts it: io_uring's kernel workers are not).
   The figure is CPU seconds (user + system) per million I/Os, and the
   verdict comes from the paired ratios' confidence interval: CPU time
   varies by 5-10 % from run to run on a shared machine, so it says when the
   pairs cannot decide.
2. IOPS of a whole ``iorig run`` (target: >= 0.99) against bare fio with
   exactly the job iorig renders, and against fio without logs, alternating
   on one prefilled scratch file with direct I/O (a one-phase scenario: the
   ad-hoc ``--rw randread`` run would add its prefill right before
   measuring); and iorig's own CPU time (its Python process, not fio) per
   minute of run.

    .venv/bin/python bench/overhead.py [--cpu-pairs 30] [--ios 1000000] [--with-lat-log]
                                       [--pairs 5] [--duration 10s] [--size 256MiB]
                                       [--only cpu|iops]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from iorig.analyze.stats import t_quantile
from iorig.fio import runner
from iorig.fio.jobfile import Section, render, workload_options
from iorig.fio.parse import split_documents
from iorig.run.local import LocalBackend
from iorig.run.probe import spot_in
from iorig.units import format_si, parse_duration, parse_size

TARGET = 0.99  # iorig must cost no more than 1 % of what bare fio measures
CPU_TARGET = 1.02  # fio as iorig runs it: at most 2 % more CPU per I/O
LOG_OPTIONS = (
    "write_iops_log",
    "write_bw_log",
    "write_lat_log",
    "write_hist_log",
    "log_avg_msec",
    "log_hist_msec",
)
MEMORY_DIR = Path("/dev/shm")

# Runs iorig in-process and records the CPU time of that process alone
# (RUSAGE_SELF excludes the fio children it starts).
_IORIG_WITH_RUSAGE = """
import atexit, resource, sys
out, sys.argv = sys.argv[1], ["iorig", *sys.argv[2:]]
def _report():
    r = resource.getrusage(resource.RUSAGE_SELF)
    with open(out, "w") as f:
        f.write(f"{r.ru_utime + r.ru_stime}")
atexit.register(_report)
from iorig.cli import main
main()
"""


@dataclass(frozen=True)
class Round:
    fio_iops: float
    iorig_iops: float
    no_logs_iops: float
    iorig_cpu_s: float
    iorig_wall_s: float


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--only", choices=("cpu", "iops"), help="one of the two measurements")
    p.add_argument("--cpu-pairs", type=int, default=30, help="pairs of the CPU measurement")
    p.add_argument("--ios", type=int, default=1_000_000, help="I/Os of a CPU measurement run")
    p.add_argument(
        "--with-lat-log",
        action="store_true",
        help="also measure fio with an averaged latency log, as iorig's jobs had before",
    )
    p.add_argument("--pairs", type=int, default=5, help="rounds of the IOPS measurement")
    p.add_argument("--duration", default="10s")
    p.add_argument("--size", default="256MiB")
    p.add_argument("--dir", default="./iorig-scratch/bench-overhead")
    p.add_argument("--bs", default="4k")
    p.add_argument("--iodepth", type=int, default=32)
    p.add_argument("--jobs", type=int, default=1)
    return p.parse_args()


def fio_job(engine: str, data: Path, args: argparse.Namespace, logs: bool) -> str:
    options = workload_options(
        engine=engine,
        rw="randread",
        bs=parse_size(args.bs),
        filename=str(data),
        size=parse_size(args.size),
        offset=0,
        iodepth=args.iodepth,
        jobs=args.jobs,
        direct=True,
        read_pct=None,
        rate_iops=None,
        runtime_s=parse_duration(args.duration),
        log_prefix="randread",
    )
    if not logs:
        options = {k: v for k, v in options.items() if k not in LOG_OPTIONS}
    return render({}, [Section("randread", options)])


# ------------------------------------------------------------ CPU per I/O


@dataclass(frozen=True)
class CpuRun:
    cpu_s: float
    ios: int


def memory_job(data: Path, args: argparse.Namespace, logs: str, ios: int) -> str:
    """The job iorig renders for ``ios`` random reads of ``data`` through the
    page cache; ``logs``: "iorig" (its logs), "none", or "lat" (its logs and
    the averaged latency log its jobs had before)."""
    bs = parse_size(args.bs)
    size = min(parse_size(args.size), ios * bs)
    options = workload_options(
        engine="psync",
        rw="randread",
        bs=bs,
        filename=str(data),
        size=size,
        offset=0,
        iodepth=1,
        jobs=1,
        direct=False,
        read_pct=None,
        rate_iops=None,
        runtime_s=None,
        log_prefix="randread",
        loops=max(1, math.ceil(ios * bs / size)),
    )
    if logs == "none":
        options = {k: v for k, v in options.items() if k not in LOG_OPTIONS}
    elif logs == "lat":
        options["write_lat_log"] = "randread"
    return render({}, [Section("randread", options)])


def cpu_of(command: list[str], cwd: Path, output: Path) -> CpuRun:
    """fio's CPU (user + system, its job processes included: fio waits for
    them) and the I/Os it reports."""
    errors = cwd / "stderr.txt"  # a file, not a pipe nobody reads while fio runs
    with errors.open("wb") as stderr:
        proc = subprocess.Popen(command, cwd=cwd, stdout=subprocess.DEVNULL, stderr=stderr)
        _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        said = errors.read_text(errors="replace").strip()
        raise RuntimeError(f"{' '.join(command)} failed ({proc.returncode}): {said}")
    final = split_documents(output.read_text())[-1]
    ios = sum(j["read"]["total_ios"] for j in final["jobs"])
    return CpuRun(usage.ru_utime + usage.ru_stime, ios)


def cpu_run(fio: str, job_text: str, as_iorig: bool) -> CpuRun:
    """One fio run of ``job_text``: with iorig's command line (that of
    ``runner.FioProcess``) or bare fio's."""
    with tempfile.TemporaryDirectory(prefix="bench-cpu-") as tmp:
        work = Path(tmp)
        job = work / "job.fio"
        job.write_text(job_text)
        if as_iorig:
            process = runner.FioProcess(fio, job, work)
            return cpu_of(list(process.command), work, process.output_path)
        output = work / "output.json"
        return cpu_of([fio, "--output-format=json+", f"--output={output}", str(job)], work, output)


def measure_cpu(fio: str, args: argparse.Namespace) -> None:
    if not MEMORY_DIR.is_dir():
        print(f"no {MEMORY_DIR}: the CPU measurement reads from a file in memory there")
        return
    data = Path(tempfile.mkdtemp(prefix="iorig-bench-", dir=MEMORY_DIR)) / "data.bin"
    try:
        subprocess.run(
            [fio, "--name=fill", f"--filename={data}", "--rw=write", "--bs=1m",
             f"--size={args.size}", "--output=/dev/null"],
            check=True,
        )  # fmt: skip
        sides = {"bare": "none", "iorig": "iorig"} | (
            {"+lat log": "lat"} if args.with_lat_log else {}
        )
        jobs = {name: memory_job(data, args, logs, args.ios) for name, logs in sides.items()}
        # fio's start-up (clock calibration, shared memory, its job process)
        # is CPU no I/O causes: a run of one I/O measures it, for each side
        startup = {
            name: statistics.median(
                cpu_run(fio, memory_job(data, args, logs, 1), name != "bare").cpu_s
                for _ in range(5)
            )
            for name, logs in sides.items()
        }
        print(
            f"\n1. CPU per I/O: {runner.fio_version(fio)}, random {args.bs} reads of "
            f"{args.size} in {MEMORY_DIR} (psync, page cache), {args.ios:,} I/Os a run, "
            f"{args.cpu_pairs} pairs; CPU seconds per million I/Os, fio's start-up "
            "(" + ", ".join(f"{name} {s:.3f} s" for name, s in startup.items()) + ") taken off"
        )
        print(f"{'pair':>4} " + " ".join(f"{name:>9}" for name in sides) + "   ratio")
        for name, text in jobs.items():  # a first run of each is slower: not counted
            cpu_run(fio, text, as_iorig=name != "bare")
        runs: dict[str, list[float]] = {name: [] for name in sides}
        for i in range(args.cpu_pairs):
            # each side first in turn, so that neither always follows the other
            for name in list(jobs)[:: 1 if i % 2 == 0 else -1]:
                run = cpu_run(fio, jobs[name], as_iorig=name != "bare")
                runs[name].append((run.cpu_s - startup[name]) / run.ios * 1e6)
            figures = " ".join(f"{runs[name][-1]:>9.3f}" for name in sides)
            print(f"{i + 1:>4} {figures} {runs['iorig'][-1] / runs['bare'][-1]:>7.3f}")
        for name in sides:
            if name != "bare":
                report_cpu(name, runs[name], runs["bare"])
    finally:
        shutil.rmtree(data.parent, ignore_errors=True)


def report_cpu(name: str, per_million_s: list[float], bare: list[float]) -> None:
    ratios = [r / b for r, b in zip(per_million_s, bare, strict=True)]
    geo, low, high = ratio_interval(ratios)
    if high <= CPU_TARGET:
        verdict = f"meets the target of <= {CPU_TARGET}"
    elif low > CPU_TARGET:
        verdict = f"MISSES the target: more than {CPU_TARGET} beyond this machine's noise"
    else:
        verdict = (
            f"undecided at this machine's noise: the interval holds {CPU_TARGET}; "
            "more --cpu-pairs narrow it"
        )
    print(
        f"{name} / bare fio, CPU per I/O: median {statistics.median(ratios):.3f}; geometric "
        f"mean {geo:.3f}, 95 % CI {low:.3f} to {high:.3f}: {verdict}"
    )


# ------------------------------------------------------------ IOPS of a run


def run_fio(fio: str, job_text: str) -> float:
    """IOPS of one bare fio run (sum over jobs)."""
    with tempfile.TemporaryDirectory(prefix="bench-fio-") as tmp:
        job = Path(tmp) / "job.fio"
        job.write_text(job_text)
        done = subprocess.run(
            [fio, "--output-format=json+", str(job)],
            cwd=tmp,
            capture_output=True,
            text=True,
            check=True,
        )
    return sum(j["read"]["iops"] for j in json.loads(done.stdout)["jobs"])


SCENARIO = """\
name: bench-overhead
title: bench/overhead.py measured phase
targets:
  data: {{size: {size}}}
phases:
  - name: randread
    kind: measure
    duration: {duration}
    workloads:
      - {{rw: randread, bs: {bs}, iodepth: {iodepth}, jobs: {jobs}}}
"""


def run_iorig(
    data: Path, db: Path, scenario: Path, args: argparse.Namespace
) -> tuple[float, float, float]:
    """(IOPS of the measured phase, iorig CPU seconds, iorig wall seconds)."""
    with tempfile.NamedTemporaryFile(prefix="bench-rusage-", delete=False) as f:
        rusage_file = Path(f.name)
    cmd = [
        sys.executable,
        "-c",
        _IORIG_WITH_RUSAGE,
        str(rusage_file),
        "--db",
        str(db),
        "run",
        str(scenario),
        "--target",
        str(data),
        "--allow-destroy",
    ]
    started = time.monotonic()
    subprocess.run(cmd, capture_output=True, text=True, check=True)
    wall = time.monotonic() - started
    cpu = float(rusage_file.read_text())
    rusage_file.unlink()
    shown = subprocess.run(
        [sys.executable, "-m", "iorig", "--db", str(db), "show", "last", "--json"],
        capture_output=True,
        text=True,
        check=True,
    )
    (phase,) = json.loads(shown.stdout)["phases"]
    return float(phase["iops"]), cpu, wall


def startup_cpu_s() -> float:
    """CPU of an iorig process that only starts and exits (imports, CLI)."""
    with tempfile.NamedTemporaryFile(prefix="bench-rusage-", delete=False) as f:
        rusage_file = Path(f.name)
    subprocess.run(
        [sys.executable, "-c", _IORIG_WITH_RUSAGE, str(rusage_file), "--version"],
        capture_output=True,
        check=True,
    )
    cpu = float(rusage_file.read_text())
    rusage_file.unlink()
    return cpu


def prefill(fio: str, data: Path, size: str) -> None:
    subprocess.run(
        [
            fio,
            "--name=prefill",
            f"--filename={data}",
            "--rw=write",
            "--bs=1m",
            f"--size={size}",
            "--direct=1",
            "--refill_buffers",
            "--output=/dev/null",
        ],
        check=True,
    )


def main() -> int:
    args = parse_args()
    fio = runner.find_fio()
    if args.only != "iops":
        measure_cpu(fio, args)
    if args.only != "cpu":
        measure_iops(fio, args)
    return 0


def measure_iops(fio: str, args: argparse.Namespace) -> None:
    work = Path(args.dir).resolve()
    work.mkdir(parents=True, exist_ok=True)
    data, db, scenario = work / "data.bin", work / "bench.sqlite", work / "bench.yaml"
    scenario.write_text(
        SCENARIO.format(
            size=args.size, duration=args.duration, bs=args.bs, iodepth=args.iodepth, jobs=args.jobs
        )
    )
    try:
        prefill(fio, data, args.size)
        version = runner.fio_version(fio)
        engine = LocalBackend(fio, version).probe(
            {"local": spot_in(work, block_device=False)}, direct=True
        )
        print(
            f"\n2. IOPS of iorig run: {version}, engine {engine}, {os.cpu_count()} CPUs; randread "
            f"bs={args.bs} iodepth={args.iodepth} jobs={args.jobs} {args.duration} on "
            f"{args.size} at {data}"
        )
        with_logs, without_logs = (
            fio_job(engine, data, args, True),
            fio_job(engine, data, args, False),
        )
        rounds = []
        print(f"{'round':>5} {'fio IOPS':>10} {'iorig IOPS':>11} {'ratio':>7} {'no-logs IOPS':>13}")
        for i in range(args.pairs):
            a = run_fio(fio, with_logs)
            b, cpu, wall = run_iorig(data, db, scenario, args)
            c = run_fio(fio, without_logs)
            rounds.append(Round(a, b, c, cpu, wall))
            print(
                f"{i + 1:>5} {format_si(a):>10} {format_si(b):>11} {b / a:>7.3f} {format_si(c):>13}"
            )
        report(rounds, startup_cpu_s())
    finally:
        shutil.rmtree(work, ignore_errors=True)


def ratio_interval(ratios: list[float], confidence: float = 0.95) -> tuple[float, float, float]:
    """Geometric mean of paired ratios with its t confidence interval: each
    round's two runs share the device's state, so the pairs are the units."""
    logs = [math.log(r) for r in ratios]
    mean = statistics.fmean(logs)
    if len(logs) < 2:
        return math.exp(mean), math.nan, math.nan
    half = t_quantile(0.5 + confidence / 2, len(logs) - 1) * statistics.stdev(logs)
    half /= math.sqrt(len(logs))
    return math.exp(mean), math.exp(mean - half), math.exp(mean + half)


def report(rounds: list[Round], startup_s: float) -> None:
    ratios = [r.iorig_iops / r.fio_iops for r in rounds]
    ratio = statistics.median(ratios)
    geo, low, high = ratio_interval(ratios)
    logs_cost = statistics.median(r.fio_iops / r.no_logs_iops for r in rounds)
    cpu = sum(r.iorig_cpu_s for r in rounds)
    wall = sum(r.iorig_wall_s for r in rounds)
    fio_runs = [r.fio_iops for r in rounds]
    noise = statistics.stdev(fio_runs) / statistics.fmean(fio_runs) if len(rounds) > 1 else 0.0
    print(
        f"\nmedian iorig/fio IOPS ratio: {ratio:.3f}; geometric mean {geo:.3f}, "
        f"95 % CI {low:.3f} to {high:.3f}"
    )
    if high < TARGET:
        verdict = f"MISSES the target: iorig is measurably slower than bare fio (< {TARGET})"
    elif low >= TARGET:
        verdict = f"meets the target of >= {TARGET}"
    else:
        verdict = (
            f"no measurable cost: the interval includes 1.0, but this device's run-to-run "
            f"noise ({noise * 100:.1f} % CoV of bare fio) is too large to rule out a cost of up "
            f"to {(1 - low) * 100:.1f} %; more --pairs narrow it"
        )
    print(f"verdict: {verdict}")
    print(f"median fio-with-logs / fio-without-logs: {logs_cost:.3f} (what the 1 s logs cost)")
    steady = max(0.0, cpu - startup_s * len(rounds))
    print(
        f"iorig's own CPU (its Python process, excluding fio): {cpu:.2f} s over {wall:.0f} s "
        f"of runs; start-up {startup_s:.2f} s per run; the rest (engine probe bookkeeping, "
        f"live progress, parsing, storing) = {steady / wall * 60:.2f} CPU-seconds per minute"
    )


if __name__ == "__main__":
    sys.exit(main())
