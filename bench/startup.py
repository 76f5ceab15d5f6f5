"""What does an ``iorig`` process cost to start?

Every ``iorig`` command pays for its imports and its command line before it
does anything: ``iorig --help`` as much as ``iorig show``, and the test suite
starts ``python -m iorig`` over a hundred times. This starts a few commands
(against a copy of tests/data/report-peak's database) and, as baselines in
the same run, ``python -c pass`` and ``python -c "import typer"`` (the
command-line library's own floor), each --runs times in interleaved rounds,
and prints each one's median CPU seconds (user + system, from wait4) with
its ratio to the two baselines. With several --src trees (e.g. main's:
``git archive main src | tar -x -C /tmp/main``) it measures each in the same
rounds, the first the one the others are divided by.

    .venv/bin/python bench/startup.py [--runs 9] [--src DIR ...]
"""

from __future__ import annotations

import argparse
import compileall
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
RECORDED_DB = REPO / "tests/data/report-peak/results.sqlite"

BASELINES = {"python -c pass": ["-c", "pass"], "python -c 'import typer'": ["-c", "import typer"]}
COMMANDS = (
    ("--help",),
    ("--version",),
    ("runs",),
    ("show", "last"),
    ("scenarios",),
    ("run", "--help"),
    ("agent", "--help"),
)


@dataclass(frozen=True)
class Start:
    cpu_s: float
    wall_s: float


def start(args: list[str], env: dict[str, str], cwd: Path) -> Start:
    """One process to its end: its CPU (user + system) and wall seconds."""
    started = time.monotonic()
    proc = subprocess.Popen(
        [sys.executable, *args],
        env=env,
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    assert proc.stderr is not None
    said = proc.stderr.read()  # small: read before wait4, so the child never blocks on it
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.monotonic() - started
    proc.stderr.close()
    code = os.waitstatus_to_exitcode(status)
    if code != 0:
        raise RuntimeError(f"python {' '.join(args)} exited {code}: {said.decode()[-2000:]}")
    return Start(usage.ru_utime + usage.ru_stime, wall)


def environment(src: Path, work: Path) -> dict[str, str]:
    """An iorig from ``src`` on a copy of a recorded database; nothing of the
    caller's (its database, a PYTHONDONTWRITEBYTECODE) changes what is measured."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("IORIG_", "PYTHON"))}
    return env | {
        "PYTHONPATH": str(src),
        "IORIG_DB": str(work / "results.sqlite"),
        "XDG_DATA_HOME": str(work),
        "COLUMNS": "100",
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=9, help="starts of each command")
    parser.add_argument("--src", type=Path, action="append", help="an iorig src/ tree")
    args = parser.parse_args()
    sources = [s.resolve() for s in args.src or [REPO / "src"]]
    work = Path(tempfile.mkdtemp(prefix="iorig-bench-startup-"))
    try:
        shutil.copy(RECORDED_DB, work / "results.sqlite")
        # as scripts/bootstrap.sh leaves it: every start reads bytecode
        for src in sources:
            compileall.compile_dir(src, quiet=1)
        cases: dict[tuple[str, str], tuple[list[str], dict[str, str]]] = {}
        plain = environment(sources[0], work)
        for name, argv in BASELINES.items():
            cases[("", name)] = (argv, plain)
        for src in sources:
            env = environment(src, work)
            for command in COMMANDS:
                cases[(str(src), "iorig " + " ".join(command))] = (["-m", "iorig", *command], env)
        for argv, env in cases.values():  # a first start of each fills caches: not counted
            start(argv, env, work)
        taken: dict[tuple[str, str], list[Start]] = {key: [] for key in cases}
        for i in range(args.runs):
            # in turn forwards and backwards: no case always follows another
            for key in list(cases)[:: 1 if i % 2 == 0 else -1]:
                taken[key].append(start(*cases[key], work))
        report(taken, sources, args.runs)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


def median_cpu(starts: list[Start]) -> float:
    return statistics.median(s.cpu_s for s in starts)


def report(taken: dict[tuple[str, str], list[Start]], sources: list[Path], runs: int) -> None:
    floor = {name: median_cpu(taken[("", name)]) for name in BASELINES}
    bare, typer_floor = floor.values()
    print(
        f"process starts, median of {runs} each, {os.cpu_count()} CPUs, "
        f"{sys.executable} {sys.version.split()[0]}"
    )
    for name, cpu in floor.items():
        wall = statistics.median(s.wall_s for s in taken[("", name)])
        print(f"  {name:<28} {cpu:6.3f} CPU s {wall:6.3f} wall s")
    for src in sources:
        print(f"\niorig from {src}")
        print(f"  {'command':<28} {'CPU s':>6} {'wall s':>7} {'/pass':>6} {'/typer':>7}", end="")
        print(f" {'/first':>7}" if src != sources[0] else "")
        for (where, name), starts in taken.items():
            if where != str(src):
                continue
            cpu = median_cpu(starts)
            wall = statistics.median(s.wall_s for s in starts)
            line = f"  {name:<28} {cpu:6.3f} {wall:7.3f} {cpu / bare:6.1f} {cpu / typer_floor:7.1f}"
            if src != sources[0]:
                line += f" {cpu / median_cpu(taken[(str(sources[0]), name)]):7.2f}"
            print(line)


if __name__ == "__main__":
    sys.exit(main())
