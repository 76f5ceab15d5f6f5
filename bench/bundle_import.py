"""How much memory, time and TMPDIR space does `iorig import` of a big bundle take?

Builds a bundle of --runs real-size runs (tests/bundles.py: one measured
phase of 20 s with per-second histograms, a job file and fio's JSON output;
10,000 of them make the 258 MB bundle of issue 27), then imports it into a
new database with `python -m iorig import` and prints, per iorig source tree
given with --src (default: this one), the child's peak resident memory (its
ru_maxrss), wall and CPU seconds, and the most TMPDIR held while it ran.
Import used to copy the bundle into TMPDIR and load every run before
writing any; it now reads the bundle in place and streams the runs. On
2026-11-25 (2 shared cores), 10,000 runs, 268 MB: before 3,686 MiB peak,
268 MB in TMPDIR, 228 s; after 68 MiB, nothing in TMPDIR, 223 s.

    .venv/bin/python bench/bundle_import.py [--runs 10000] [--keep DIR] [--src DIR ...]

e.g. against main: `git archive main src | tar -x -C /tmp/main` then
`--src /tmp/main/src --src src`.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # the tests' bundle builder

from tests.bundles import many_runs  # noqa: E402

# The child's peak RSS and CPU, measured by a small parent around it.
PROBE = """
import json, resource, subprocess, sys, time
started = time.monotonic()
done = subprocess.run(sys.argv[1:], capture_output=True, text=True)
use = resource.getrusage(resource.RUSAGE_CHILDREN)
print(json.dumps({"code": done.returncode, "wall_s": time.monotonic() - started,
                  "cpu_s": use.ru_utime + use.ru_stime, "max_rss_kib": use.ru_maxrss,
                  "stdout_lines": len(done.stdout.splitlines()), "stderr": done.stderr[-2000:]}))
"""


def _tree_bytes(folder: Path) -> int:
    total = 0
    for root, _, files in os.walk(folder):
        for name in files:
            with contextlib.suppress(OSError):  # removed meanwhile
                total += (Path(root) / name).stat().st_size
    return total


def measure(src: Path, bundle: Path, work: Path) -> dict:
    """One `iorig import` of ``bundle`` by the iorig in ``src`` into a new database."""
    db = work / f"into-{time.monotonic_ns()}.sqlite"
    tmpdir = Path(tempfile.mkdtemp(prefix="tmpdir-", dir=work))
    env = dict(os.environ, IORIG_DB=str(db), TMPDIR=str(tmpdir), PYTHONPATH=str(src))
    peak_tmp = 0
    stop = threading.Event()

    def watch() -> None:
        nonlocal peak_tmp
        while not stop.wait(0.2):
            peak_tmp = max(peak_tmp, _tree_bytes(tmpdir))

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        done = subprocess.run(
            [sys.executable, "-c", PROBE, sys.executable, "-m", "iorig", "import", str(bundle)],
            capture_output=True,
            text=True,
            env=env,
            check=True,
            cwd=work,
        )
    finally:
        stop.set()
        watcher.join()
    result = json.loads(done.stdout)
    result["peak_tmpdir_bytes"] = peak_tmp
    for leftover in (db, Path(f"{db}-wal"), Path(f"{db}-shm")):
        leftover.unlink(missing_ok=True)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10_000)
    parser.add_argument("--keep", type=Path, help="folder to keep (and reuse) the bundle in")
    parser.add_argument("--src", type=Path, action="append", help="an iorig src/ tree")
    args = parser.parse_args()
    sources = args.src or [REPO / "src"]
    work = args.keep or Path(tempfile.mkdtemp(prefix="iorig-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    bundle = work / f"bundle-{args.runs}.sqlite"
    if not bundle.is_file():
        started = time.monotonic()
        many_runs(bundle.with_suffix(".partial"), args.runs).rename(bundle)
        print(f"built {bundle} in {time.monotonic() - started:.0f} s")
    size = bundle.stat().st_size
    print(
        f"bundle: {args.runs:,} runs, {size / 1e6:.0f} MB ({size / args.runs / 1e3:.1f} kB a run)"
    )
    print(f"{'source':<40} {'exit':>4} {'peak RSS':>10} {'wall':>8} {'CPU':>8} {'TMPDIR':>10}")
    for src in sources:
        r = measure(src.resolve(), bundle, work)
        print(
            f"{src!s:<40} {r['code']:>4} {r['max_rss_kib'] / 1024:>7.0f} MiB "
            f"{r['wall_s']:>6.0f} s {r['cpu_s']:>6.0f} s {r['peak_tmpdir_bytes'] / 1e6:>7.0f} MB"
        )
        if r["code"] != 0:
            print(f"  stderr: {r['stderr']}")


if __name__ == "__main__":
    main()
