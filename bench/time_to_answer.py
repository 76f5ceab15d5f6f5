"""How long does an answer take: X-Ray's fixed schedule against `--precision`.

On one prefilled, steady target (by default a loop device capped by the
kernel's block throttle, whose answer per phase is its cap), runs:

  X  the X-Ray peak schedule as the built-in `peak` runs it: a 5 min
     random-read warm-up, then four 60 s measured phases with 60 s pauses
     between them (3 pauses);
  P  `iorig run peak --precision 2%`: the warm-up until steady (SNIA rounds
     of 10 s, a window of 5; 5 min at most), each measured phase until its
     median is known to ±2 % (60 s at most), and no pauses (`gap=0s`: a
     phase still disturbed by the one before it is not steady, so its
     interval stays wide and it measures on; the pause is not needed to
     protect the figure).

The working set is written once before either (X-Ray's fill; both would pay
it alike), so the times compared are the schedule's and iorig's alone. It
prints each one's wall time and their ratio (goal: P ≤ 25 % of X), each
phase's median from X and P with P's 95 % interval, and whether X's median
falls inside it (goal: every one).

    .venv/bin/python bench/time_to_answer.py [--target /dev/sdX --allow-destroy]
        [--size 1GiB] [--precision 2%] [--scale 1.0] [--engine libaio]

`--scale 0.25` shortens X's schedule (and P's maxima) for a trial run; the
figures in docs/guide/precision.md come from `--scale 1`. Needs root, fio, loop devices
and the block throttle when no `--target` is given.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # the truth tests' capped devices

from tests.truth.device import capped_device  # noqa: E402

from iorig.units import format_si, parse_size  # noqa: E402

# A steady device: each phase of peak meets one cap (8 KiB random I/O the
# IOPS cap, 1 MiB sequential I/O the bandwidth cap).
CAPS = {"read_iops": 4000, "write_iops": 3000, "read_bps": 100 << 20, "write_bps": 80 << 20}
GOAL_RATIO = 0.25
MEASURED = ("random-read", "sequential-read", "random-write", "sequential-write")


@dataclass(frozen=True)
class Outcome:
    wall_s: float
    phases: dict[str, dict]  # name -> show --json phase
    warmup_s: float


def _iorig(run, db: Path, *args: str) -> dict:
    env = dict(os.environ, IORIG_DB=str(db), COLUMNS="200", NO_COLOR="1")
    done = run([sys.executable, "-m", "iorig", *args], env)
    if done.returncode != 0:
        raise SystemExit(f"iorig {' '.join(args)} failed:\n{done.stdout}\n{done.stderr}")
    return done


def _measure(run, db: Path, target: str, common: Sequence[str], extra: Sequence[str]) -> Outcome:
    started = time.monotonic()
    _iorig(run, db, "run", "peak", "--target", target, *common, *extra)
    wall = time.monotonic() - started
    doc = json.loads(_iorig(run, db, "show", "last", "--json").stdout)
    phases = {p["name"]: p for p in doc["phases"]}
    warm = [p for p in doc["other_phases"] if p["name"] == "warmup"]
    return Outcome(wall, phases, warm[0]["elapsed_s"] if warm else 0.0)


@contextlib.contextmanager
def _target(args: argparse.Namespace) -> Iterator[tuple[str, object]]:
    if args.target:

        def run(cmd, env):
            return subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=REPO)

        yield args.target, run
        return
    with (
        tempfile.TemporaryDirectory(dir=REPO, prefix=".bench-") as tmp,
        capped_device(Path(tmp), parse_size(args.size) + (64 << 20)) as device,
    ):
        device.cap(**CAPS)

        def run(cmd, env):
            return device.run(cmd, env=env, timeout=3600)

        yield str(device.path), run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--target", help="a device or file (default: a capped loop device)")
    parser.add_argument("--allow-destroy", action="store_true")
    parser.add_argument("--size", default="1GiB")
    parser.add_argument("--precision", default="2%")
    parser.add_argument("--scale", type=float, default=1.0)
    parser.add_argument("--engine", default="libaio")
    args = parser.parse_args()
    schedule = {"warmup": 300 * args.scale, "duration": 60 * args.scale, "gap": 60 * args.scale}
    with tempfile.TemporaryDirectory() as tmp, _target(args) as (target, run):
        db = Path(tmp) / "bench.sqlite"
        # a loop device made here holds nothing; a --target needs --allow-destroy
        # io_uring's large I/O through the block throttle comes in bursts
        # (1 MiB reads at QD 128 on a 100 MiB/s cap: 61, 96, 69, 94 … MiB/s
        # per second; libaio: 102 every second), so the capped device is only
        # a steady one with libaio
        common = ["--size", args.size, f"--set=engine={args.engine}"]
        if args.allow_destroy or not args.target:
            common.append("--allow-destroy")
        fill_options = [o for o in common if not o.startswith("--set=")]
        print(f"target {target}, working set {args.size}; filling it once …", flush=True)
        fill_started = time.monotonic()
        _iorig(
            run,
            db,
            "run",
            "--rw",
            "write",
            "--bs",
            "1MiB",
            "--size",
            args.size,
            "--duration",
            "1s",
            "--target",
            target,
            *fill_options[2:],
        )
        print(f"  fill: {time.monotonic() - fill_started:.0f} s", flush=True)
        timed = [f"--set={k}={v:g}s" for k, v in schedule.items()]
        print("X: the X-Ray schedule …", flush=True)
        fixed = _measure(run, db, target, common, [*timed, "--set=prefill=false"])
        print("P: --precision …", flush=True)
        precise = _measure(
            run,
            db,
            target,
            common,
            [
                f"--set=warmup={schedule['warmup']:g}s",
                f"--set=duration={schedule['duration']:g}s",
                "--set=gap=0s",
                "--set=prefill=false",
                "--precision",
                args.precision,
            ],
        )
    ratio = precise.wall_s / fixed.wall_s
    verdict = "meets" if ratio <= GOAL_RATIO else "MISSES"
    print(
        f"\nwall time: X-Ray schedule {fixed.wall_s:.0f} s, --precision {args.precision} "
        f"{precise.wall_s:.0f} s (warm-up {precise.warmup_s:.0f} s of at most "
        f"{schedule['warmup']:.0f}): {ratio:.1%} of the schedule "
        f"({verdict} the ≤ {GOAL_RATIO:.0%} goal)"
    )
    print(
        f"{'phase':<17} {'X median':>10} {'P median':>10} {'P 95 % interval':>24} "
        f"{'P ±':>7} {'P s':>5} {'X in P?':>8}"
    )
    inside_all = True
    for name in MEASURED:
        x, p = fixed.phases[name], precise.phases[name]
        pr = p["precision"] or {}
        median = x["per_second"]["median"]
        low, high = pr.get("low"), pr.get("high")
        inside = low is not None and high is not None and low <= median <= high
        inside_all &= inside
        interval = f"{format_si(low)}…{format_si(high)}" if low is not None else "none"
        half = f"{pr['achieved_pct']:.2f}%" if pr.get("achieved_pct") is not None else "-"
        seconds, answer = pr.get("seconds", 0), "yes" if inside else "NO"
        print(
            f"{name:<17} {format_si(median):>10} {format_si(p['per_second']['median']):>10} "
            f"{interval:>24} {half:>7} {seconds:>5} {answer:>8}"
        )
    print(f"\nevery schedule median inside iorig's interval: {'yes' if inside_all else 'NO'}")


if __name__ == "__main__":
    main()
