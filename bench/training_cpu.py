"""What does iorig's AI-training emulation cost the load generator in CPU per byte?

For each workload (default unet3d and resnet50) an ``iorig run train`` on a
scratch directory in /dev/shm: memory, so that the storage is never the
limit and the CPU is the emulation's own, read through the page cache
(direct=false). Its ``train`` phase reads the data set at the simulated
accelerators' pace; the figure is fio's CPU in that phase as iorig measured
it (``generator_cpu.cpu_s``: user + system of every fio process, from /proc)
over the bytes fio read (its own output's io_bytes), in CPU seconds per GB
(10^9 bytes) and per GiB. The accelerator utilisation (AU) is printed as a
sanity check: below 99 % the generator (or this busy machine) may have
been the limit.

For context, bare fio runs the same job on the same files right after, with
its pacing (``rate``, ``runtime``) and per-I/O logs taken out: the same
reads, block size, engine and jobs as fast as they go, with plain json
output. Its CPU is fio's resource usage as the bench reaps it (all its
processes: fio waits for its jobs), less fio's start-up (the same job doing
one read per job). Both are CPU per byte, not per second: what the paced
emulation adds over bare reading is its per-I/O latency logging (every
completion, for the accelerators' batch times), the rate pacing (sleeps and
wake-ups between reads) and iorig's command line (json+ and a status
document every second, whose cost grows with the run's length, not its
bytes); emulation / bare is that cost as a factor. The emulation's figure
counts from when fio has forked its jobs (iorig's window), so it holds their
start-up, bare fio's does not. ``--cross-check`` also runs the emulation's
own job (paced and logged) with iorig's fio command line, measured the way
bare fio is, to check iorig's figure.

Each workload runs ``--repeats`` times (one emulation and one baseline each);
median and range are printed. Paced fio's CPU is not steady from run to
run: now and then a run takes 2-3 times the user time of the others (seen
with resnet50's 16 paced jobs, in fio's own resource usage too, so not
iorig's measurement), and CPUs shared with other work make every figure
vary more; the per-run load column shows the latter. The defaults make each
run last 30-40 s on a 2-CPU machine (about 4 minutes in all);
``--set [WORKLOAD:]NAME=VALUE`` changes a parameter of the ``train``
scenario (all workloads, or one). Nothing is asserted: there is no target.

    .venv/bin/python bench/training_cpu.py [--workloads unet3d,resnet50] [--repeats 3]
                                           [--set resnet50:dataset_size=1GiB]
                                           [--dir /dev/shm] [--direct] [--cross-check]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from iorig.fio import runner
from iorig.fio.parse import split_documents
from iorig.store import Store
from iorig.units import format_si

GB, GIB = 1e9, 2**30
AU_SANE = 0.99  # below it the reads did not keep up: not the emulation's cost at its pace
MEMORY_DIR = Path("/dev/shm")
# each run 30-40 s on 2 CPUs (datagen ~2 s, train the rest) and a few GB at most in memory
DEFAULTS: dict[str, dict[str, str]] = {
    "unet3d": {"scale": "0.01", "accelerators": "2", "epochs": "2", "dataset_size": "1GiB"},
    "resnet50": {"scale": "0.1", "accelerators": "2", "epochs": "2", "dataset_size": "512MiB"},
    "cosmoflow": {"scale": "0.01", "accelerators": "2", "epochs": "2", "dataset_size": "256MiB"},
}
# job options that pace fio or log per I/O: gone from the baseline
PACING_AND_LOGS = ("rate", "thinktime", "runtime", "time_based", "write_", "log_", "per_job_logs")


@dataclass(frozen=True)
class Emulation:
    cpu_s: float | None  # None: iorig could not measure fio's CPU
    cpu_wall_s: float  # the window iorig measured it over
    io_bytes: int
    ios: int
    au: float
    transfer: int  # bytes per read
    jobs: int
    engine: str
    run_wall_s: float  # the whole `iorig run`, datagen and iorig's start included
    train_s: float
    machine_busy: float  # CPUs busy machine-wide during the run: this run's own and others'
    job_text: str


@dataclass(frozen=True)
class FioCpu:
    cpu_s: float  # start-up taken off
    startup_s: float
    io_bytes: int


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--workloads", default="unet3d,resnet50", help="comma-separated")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="[WORKLOAD:]NAME=VALUE",
        help="a train scenario parameter, for one workload or all (repeatable)",
    )
    p.add_argument("--dir", type=Path, default=MEMORY_DIR, help="where the scratch data set goes")
    p.add_argument("--direct", action="store_true", help="read with direct I/O (O_DIRECT)")
    p.add_argument(
        "--cross-check",
        action="store_true",
        help="also run the emulation's job (paced, logged) with iorig's fio command line, "
        "measured as bare fio is",
    )
    args = p.parse_args()
    args.workloads = [w.strip() for w in args.workloads.split(",") if w.strip()]
    unknown = [w for w in args.workloads if w not in DEFAULTS]
    if unknown:
        p.error(f"unknown workload(s) {unknown}: {sorted(DEFAULTS)}")
    return args


def cpu_jiffies() -> tuple[int, int]:
    """(busy, all) clock ticks of every CPU so far, from /proc/stat's cpu line."""
    with open("/proc/stat") as f:
        fields = [int(v) for v in f.readline().split()[1:]]
    idle = fields[3] + fields[4]  # idle and iowait
    return sum(fields) - idle, sum(fields)


def settings(workload: str, overrides: Iterable[str]) -> dict[str, str]:
    out = dict(DEFAULTS[workload])
    for item in overrides:
        name, value = item.split("=", 1)
        scope, _, name = name.rpartition(":")
        if scope in ("", workload):
            out[name] = value
    return out


def accepts_direct(folder: Path) -> bool:
    probe = folder / ".o_direct"
    try:
        os.close(os.open(probe, os.O_CREAT | os.O_WRONLY | os.O_DIRECT, 0o600))
    except OSError:
        return False
    finally:
        probe.unlink(missing_ok=True)
    return True


def scratch(base: Path, direct: bool) -> tuple[Path, bool, str]:
    """A fresh directory for the data set, whether to read it with direct I/O,
    and what was chosen. Without the memory directory (or where it refuses
    O_DIRECT when asked for) a temporary directory on disk, read with direct
    I/O where accepted: buffered, the reads would come from the page cache
    that datagen filled, never from the disk."""
    if base.is_dir() and os.access(base, os.W_OK):
        folder = Path(tempfile.mkdtemp(prefix="iorig-bench-training-", dir=base))
        if not direct or accepts_direct(folder):
            kind = "memory (tmpfs)" if base == MEMORY_DIR else "as given"
            return folder, direct, f"{folder}, {kind}, direct={str(direct).lower()}"
        shutil.rmtree(folder)
        why = f"{base} refuses O_DIRECT"
    else:
        why = f"no writable {base}"
    folder = Path(tempfile.mkdtemp(prefix="iorig-bench-training-"))
    direct = accepts_direct(folder)
    where = f"{folder}, on disk ({why}), direct={str(direct).lower()}"
    return folder, direct, where + ("" if direct else ": reads come from the page cache")


def run_to_end(command: list[str], log: Path, env: dict[str, str] | None = None) -> None:
    """Run ``command`` (output to ``log``); on an interruption stop it the way
    a user would (SIGINT: iorig stops its fio) before the scratch goes."""
    with log.open("wb") as out:
        proc = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=env)
        try:
            code = proc.wait()
        finally:
            if proc.poll() is None:
                proc.send_signal(signal.SIGINT)
                try:
                    proc.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
    if code != 0:
        tail = log.read_text(errors="replace").strip().splitlines()[-15:]
        raise RuntimeError(f"{' '.join(command)} failed ({code}):\n" + "\n".join(tail))


def emulate(
    workload: str, params: dict[str, str], target: Path, direct: bool, work: Path
) -> Emulation:
    db = work / f"{workload}.sqlite"
    db.unlink(missing_ok=True)  # one run per database: `last` is this one
    sets = [f"workload={workload}", f"direct={str(direct).lower()}"]
    sets += [f"{k}={v}" for k, v in params.items()]
    command = [sys.executable, "-m", "iorig", "run", "train", "--target", f"{target}/"]
    command += ["--keep-files"]  # the baseline reads the same files
    command += [a for s in sets for a in ("--set", s)]
    env = os.environ | {"IORIG_DB": str(db)}
    started, busy = time.monotonic(), cpu_jiffies()
    run_to_end(command, work / "iorig-run.log", env)
    wall = time.monotonic() - started
    after = cpu_jiffies()
    machine = (after[0] - busy[0]) / max(1, after[1] - busy[1]) * (os.cpu_count() or 1)
    shown = subprocess.run(
        [sys.executable, "-m", "iorig", "show", "last", "--json"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    doc = json.loads(shown.stdout)
    (phase,) = [p for p in doc["phases"] if p["name"] == "train"]
    (training,) = doc["training"]
    # show --json has no byte total for a measured phase (bytes_per_s ×
    # elapsed_s holds fio's start): fio's own io_bytes, from its stored output
    with Store(db) as store:
        stored = store.load_run(doc["run"]["id"], artifacts=True)
    (train,) = [p for p in stored.phases if p.name == "train"]
    final = split_documents(train.fio_output)[-1]
    cpu = phase["generator_cpu"]
    return Emulation(
        cpu_s=None if cpu is None else float(cpu["cpu_s"]),
        cpu_wall_s=0.0 if cpu is None else float(cpu["wall_s"]),
        io_bytes=sum(j["read"]["io_bytes"] for j in final["jobs"]),
        ios=int(phase["ios"]),
        au=float(training["au_mean"]),
        transfer=int(option(train.job_text, "bs")),
        jobs=int(phase["jobs"]),
        engine=option(train.job_text, "ioengine"),
        run_wall_s=wall,
        train_s=float(phase["elapsed_s"]),
        machine_busy=machine,
        job_text=train.job_text,
    )


def option(job_text: str, name: str) -> str:
    for line in job_text.splitlines():
        key, sep, value = line.partition("=")
        if sep and key.strip() == name:
            return value.strip()
    raise KeyError(f"no {name}= in the job file")


def edit_job(job_text: str, drop: tuple[str, ...], add: dict[str, str]) -> str:
    """``job_text`` without the options starting with one of ``drop`` and with
    ``add`` at the end of each job section (not [global])."""
    out: list[str] = []
    section = ""

    def close() -> None:
        if section and section != "global":
            out.extend(f"{k}={v}" for k, v in add.items())

    for line in job_text.splitlines():
        stripped = line.strip()
        if stripped.startswith("[") and stripped.endswith("]"):
            close()
            section = stripped[1:-1]
        elif stripped.split("=", 1)[0].strip().startswith(drop):
            continue
        out.append(line)
    close()
    return "\n".join(out) + "\n"


def fio_cpu_s(fio: str, job_text: str, work: Path, *, as_iorig: bool) -> tuple[float, int]:
    """CPU seconds (user + system) of a fio run, its job processes included
    (fio reaps them, so they are in its resource usage), and the bytes it
    read; with iorig's command line (json+, a status document every second)
    or bare fio's."""
    job, output = work / "job.fio", work / "output.json"
    job.write_text(job_text)
    command = [fio, "--output-format=json", f"--output={output}", str(job)]
    if as_iorig:
        process = runner.FioProcess(fio, job, work)
        command, output = list(process.command), process.output_path
    with (work / "stderr.txt").open("wb") as errors:
        proc = subprocess.Popen(
            command,
            cwd=work,
            stdout=subprocess.DEVNULL,
            stderr=errors,
        )
        try:
            _, status, usage = os.wait4(proc.pid, 0)
        except BaseException:  # interrupted: fio stops its jobs on SIGINT
            proc.send_signal(signal.SIGINT)
            proc.wait()
            raise
    proc.returncode = code = os.waitstatus_to_exitcode(status)
    if code != 0:
        said = (work / "stderr.txt").read_text(errors="replace").strip()
        raise RuntimeError(f"fio {job} failed ({code}): {said}")
    final = split_documents(output.read_text())[-1]
    return usage.ru_utime + usage.ru_stime, sum(j["read"]["io_bytes"] for j in final["jobs"])


def bare_fio(fio: str, job_text: str, work: Path, *, paced: bool = False) -> FioCpu:
    """fio's CPU for ``job_text`` without its pacing and logs, or (``paced``)
    as it is, with iorig's command line, less its start-up: the same job doing
    one read per job."""
    text = job_text if paced else edit_job(job_text, PACING_AND_LOGS, {})
    one = edit_job(
        text, ("loops", "io_size", *PACING_AND_LOGS), {"loops": "1", "io_size": option(text, "bs")}
    )
    folder = Path(tempfile.mkdtemp(prefix="bench-fio-", dir=work))
    try:
        cpu, io_bytes = fio_cpu_s(fio, text, folder, as_iorig=paced)
        startup, _ = fio_cpu_s(fio, one, folder, as_iorig=paced)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return FioCpu(cpu - startup, startup, io_bytes)


def spread(values: list[float], fmt: str) -> str:
    if not values:
        return "n/a"
    if len(values) == 1:
        return format(values[0], fmt)
    return f"{statistics.median(values):{fmt}} ({min(values):{fmt}}-{max(values):{fmt}})"


@dataclass(frozen=True)
class Repeat:
    run: Emulation
    bare: FioCpu
    paced: FioCpu | None  # --cross-check

    @property
    def per_gb(self) -> float | None:
        return None if self.run.cpu_s is None else self.run.cpu_s / (self.run.io_bytes / GB)

    @property
    def bare_per_gb(self) -> float:
        return self.bare.cpu_s / (self.bare.io_bytes / GB)


def one_repeat(
    workload: str, args: argparse.Namespace, fio: str, work: Path, first: bool
) -> Repeat:
    target, direct, where = scratch(args.dir, args.direct)
    try:
        if first:
            print(f"    scratch: {where}")
        run = emulate(workload, settings(workload, args.set), target, direct, work)
        bare = bare_fio(fio, run.job_text, work)
        paced = bare_fio(fio, run.job_text, work, paced=True) if args.cross_check else None
    finally:
        shutil.rmtree(target, ignore_errors=True)
    if first:
        print(
            f"    reads of {run.transfer:,} B ({format_si(run.transfer)}B), {run.engine}, "
            f"{run.jobs} reader jobs"
        )
    return Repeat(run, bare, paced)


def row(i: int, r: Repeat) -> str:
    run = r.run
    line = f"{i:>3} {run.io_bytes / GB:>7.3f} {run.ios:>7,}"
    if run.cpu_s is None or r.per_gb is None:
        line += f" {'not measured':>31}"
    else:
        busy = run.cpu_s / run.cpu_wall_s if run.cpu_wall_s else float("nan")
        line += f" {run.cpu_s:>7.2f} {busy:>5.3f} {r.per_gb:>7.3f} {r.per_gb * GIB / GB:>7.3f}"
    line += f" {run.au * 100:>6.2f}% {run.run_wall_s:>5.1f} {run.train_s:>7.1f}"
    line += f" {run.machine_busy:>4.2f}"
    ratio = f"{r.per_gb / r.bare_per_gb:>6.1f}" if r.per_gb is not None else f"{'-':>6}"
    line += f" | {r.bare.cpu_s:>7.3f} {r.bare_per_gb:>7.3f} {ratio}"
    if r.paced is not None:
        line += f" | {r.paced.cpu_s:>7.3f} {r.paced.cpu_s / (r.paced.io_bytes / GB):>7.3f}"
    return line


def measure(workload: str, args: argparse.Namespace, fio: str, work: Path) -> None:
    params = settings(workload, args.set)
    print(f"\n{workload}: " + ", ".join(f"{k}={v}" for k, v in params.items()))
    head = (
        f"{'rep':>3} {'GB read':>7} {'I/Os':>7} {'CPU s':>7} {'CPUs':>5} {'s/GB':>7} {'s/GiB':>7}"
    )
    head += f" {'AU':>7} {'run s':>5} {'train s':>7} {'load':>4}"
    head += f" | {'bare s':>7} {'s/GB':>7} {'ratio':>6}"
    print(head + (f" | {'paced s':>7} {'s/GB':>7}" if args.cross_check else ""))
    repeats: list[Repeat] = []
    for i in range(args.repeats):
        r = one_repeat(workload, args, fio, work, first=i == 0)
        repeats.append(r)
        print(row(i + 1, r))
        if r.bare.io_bytes != r.run.io_bytes:
            print(
                f"    note: bare fio read {r.bare.io_bytes:,} B, the emulation {r.run.io_bytes:,}"
            )
        if r.run.au < AU_SANE:
            print(
                f"    AU {r.run.au * 100:.1f} % < {AU_SANE * 100:.0f} %: the reads did not keep "
                "up; the generator (or a busy machine) may have been the limit"
            )
    emulated = [r.per_gb for r in repeats if r.per_gb is not None]
    bare = [r.bare_per_gb for r in repeats]
    ratios = [r.per_gb / r.bare_per_gb for r in repeats if r.per_gb is not None]
    startups = [r.bare.startup_s for r in repeats]
    au = [r.run.au * 100 for r in repeats]
    print(
        f"  {workload}: fio CPU s per GB: emulation {spread(emulated, '.3f')} "
        f"(per GiB {spread([v * GIB / GB for v in emulated], '.3f')}); bare fio "
        f"{spread(bare, '.3f')} (its start-up, {spread(startups, '.3f')} s, taken off); "
        f"emulation / bare {spread(ratios, '.1f')}; AU {spread(au, '.2f')} %"
    )
    checked = [
        r.per_gb / (r.paced.cpu_s / (r.paced.io_bytes / GB))
        for r in repeats
        if r.paced is not None and r.per_gb is not None
    ]
    if checked:
        print(
            f"  {workload}: iorig's figure / the paced job's under fio with iorig's command line "
            f"(start-up taken off) {spread(checked, '.2f')}"
        )


def _terminated(signum: int, _frame: object) -> None:
    raise SystemExit(128 + signum)  # through the finally blocks: the scratch goes too


def main() -> int:
    args = parse_args()
    signal.signal(signal.SIGTERM, _terminated)
    fio = runner.find_fio()
    load = os.getloadavg()[0]
    print(
        f"fio CPU per byte of iorig's training emulation: {runner.fio_version(fio)}, "
        f"{os.cpu_count()} CPUs, load average {load:.2f} at the start; median (range) of "
        f"{args.repeats} repeats; GB = 10^9 bytes, GiB = 2^30"
    )
    print(
        "columns: fio's CPU s in the train phase (iorig's generator_cpu), CPUs it kept busy, "
        "per GB and GiB read; AU; the whole iorig run's and the train phase's wall time; load: "
        "CPUs busy machine-wide meanwhile, this run's own and any other's (noise) | bare "
        "fio's CPU s (start-up taken off), per GB, emulation / bare per GB"
        + (
            " | the paced job with iorig's fio command line: CPU s, per GB"
            if args.cross_check
            else ""
        )
    )
    work = Path(tempfile.mkdtemp(prefix="iorig-bench-training-"))  # databases, logs, job files
    try:
        for workload in args.workloads:
            measure(workload, args, fio, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(
        f"\nload average {os.getloadavg()[0]:.2f} at the end. Another process's CPU is not "
        "counted as fio's, but sharing the CPUs with it makes fio's own work cost more and "
        "vary more: where the load column is well above a run's own (a few tenths of a CPU), "
        "trust the figures less."
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
