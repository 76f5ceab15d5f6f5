"""Does iorig cost anything over bare fio?

Runs the same random-read job three ways, alternating on one prefilled
scratch file so that drift in the device affects all three alike:

  A  bare fio with exactly the job iorig renders (same options, same
     per-second logs and histogram logs)
  B  `iorig run` of a one-phase scenario with the same workload (the ad-hoc
     `--rw randread` run would add its prefill phase right before measuring,
     which changes the device's state rather than measuring iorig), read
     back from its database
  C  bare fio without any logs, to show what the logs themselves cost

and prints each round's IOPS, the iorig/fio ratio (target: >= 0.99) with a
confidence interval over the rounds — the verdict says whether a difference
is measurable at this device's noise, as every iorig comparison does — and
iorig's own CPU time (the Python process, not fio) per minute of run.

    .venv/bin/python bench/overhead.py [--pairs 5] [--duration 10] [--size 256MiB]
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
from iorig.run.local import LocalBackend
from iorig.run.probe import spot_in
from iorig.units import format_si, parse_duration, parse_size

TARGET = 0.99  # iorig must cost no more than 1 % of what bare fio measures
LOG_OPTIONS = (
    "write_iops_log",
    "write_bw_log",
    "write_lat_log",
    "write_hist_log",
    "log_avg_msec",
    "log_hist_msec",
)

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
    p.add_argument("--pairs", type=int, default=5)
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
            f"{version}, engine {engine}, {os.cpu_count()} CPUs; randread "
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
    return 0


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
