"""A flake finder: run a selection of tests again and again, beside a load if
asked, and tell which tests failed in how many rounds and how.

    make soak                                   # --preset flaky --rounds 5
    make soak SOAK_ARGS="--stage truth --rounds 3 --stress"
    .venv/bin/python scripts/soak.py --rounds 2 -- tests/test_units.py

A selection is one of make test's stages (``--stage``, with the Makefile's
own arguments, read through ``make -s print-stage-args``), the preset
``flaky`` (below) or pytest arguments after ``--``. Each pytest run writes
JUnit XML; its output goes to a log beside it (``--out``, kept). The end is
a table of every test that failed or errored in a round, and each round's
time and counts; ``--json`` writes the same. Exit 1 if any test failed in
any round (or pytest ended abnormally), 130 if interrupted.

``--stress`` runs stress-ng beside the rounds, ``--load`` says how much:
``cpu=P`` loads ``cpus`` CPUs (default 1) to P % each, ``io=N`` starts N
writers of ``io-bytes`` (default 64M) each in a directory of TMPDIR, where
the tests' own files go; ``--stress`` is ``--load cpu=50,io=1``: a quarter
of this two-core machine's CPU and one disk writer. stress-ng has a process
group of its own and is stopped on every way out (it also dies with this
script, by the parent-death signal).
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
STAGES = ("first", "timing", "truth", "serial")
# the tests that have been seen to fail now and then, each run as its stage
# runs it: (label, stage, paths that narrow the stage to them)
PRESETS: dict[str, tuple[tuple[str, str, tuple[str, ...]], ...]] = {
    "flaky": (
        ("faults", "first", ("tests/faults",)),
        ("timing", "timing", ()),
        ("truth", "truth", ()),
        ("serial", "serial", ("tests/truth", "tests/faults")),
    ),
}
STRESS_DEFAULT = "cpu=50,io=1"
LOAD_KEYS = {"cpu": "0", "cpus": "1", "io": "0", "io-bytes": "64M"}
STRESS_GRACE_S = 10  # stress-ng's time to stop its workers after SIGTERM
STRESS_START_S = 1  # a stress-ng that refuses its options exits sooner
PYTEST_GRACE_S = 60  # pytest's time to clean up (loop devices, fio) after SIGINT
MESSAGE_WIDTH = 160
# worst first: a test both failed and errored (in teardown) in a round failed
RANK = {"failed": 3, "error": 2, "skipped": 1, "passed": 0}
PR_SET_PDEATHSIG = 1  # linux/prctl.h
PYTEST_EXITS = {2: "interrupted", 3: "internal error", 4: "usage error"}


@dataclass(frozen=True)
class Result:
    """One test's outcome in one round and the first line of each message."""

    outcome: str  # passed, failed, error or skipped
    messages: tuple[str, ...] = ()


@dataclass(frozen=True)
class Part:
    """One pytest run of a round."""

    label: str
    argv: tuple[str, ...]


@dataclass
class Round:
    number: int
    seconds: float = 0.0
    results: dict[str, Result] = field(default_factory=dict)
    runs: list[dict] = field(default_factory=list)
    complete: bool = False


# ------------------------------------------------------------ pure: parsing


def _first_line(text: str) -> str:
    for line in text.splitlines():
        if line.strip():
            line = " ".join(line.split())
            return line if len(line) <= MESSAGE_WIDTH else line[: MESSAGE_WIDTH - 1] + "…"
    return ""


def _test_id(case: ET.Element) -> str:
    """pytest's node id where the XML has the file (junit_family xunit1),
    else the dotted class name and the test's name."""
    classname, name = case.get("classname", ""), case.get("name", "")
    path = case.get("file")
    if not path:
        return f"{classname}::{name}" if classname else name
    if not classname:  # a collection error: the module itself
        return path
    module = path.removesuffix(".py").replace("/", ".")
    inner = classname[len(module) + 1 :] if classname.startswith(module + ".") else ""
    return "::".join(part for part in (path, inner, name) if part)


def _result(case: ET.Element) -> Result:
    outcome, messages = "passed", []
    for child in case:
        kind = {"failure": "failed", "error": "error", "skipped": "skipped"}.get(child.tag)
        if kind is None:
            continue
        if RANK[kind] > RANK[outcome]:
            outcome = kind
        if kind != "skipped":
            messages.append(_first_line(child.get("message") or child.text or "") or child.tag)
    return Result(outcome, tuple(messages))


def merge(first: Result, second: Result) -> Result:
    """One test reported twice (pytest-xdist writes a teardown error as a
    second testcase): the worse outcome, every distinct message."""
    outcome = max(first.outcome, second.outcome, key=RANK.__getitem__)
    return Result(outcome, tuple(dict.fromkeys(first.messages + second.messages)))


def parse_junit(text: str) -> dict[str, Result]:
    """Each test's result in pytest's JUnit XML."""
    results: dict[str, Result] = {}
    for case in ET.fromstring(text).iter("testcase"):
        if not case.get("name"):  # pytest writes one such when interrupted
            continue
        key, result = _test_id(case), _result(case)
        results[key] = merge(results[key], result) if key in results else result
    return results


def parse_load(spec: str) -> list[str]:
    """stress-ng's command line for ``cpu=50,io=1``-style loads."""
    given = dict(LOAD_KEYS)
    for item in filter(None, (s.strip() for s in spec.split(","))):
        key, _, value = item.partition("=")
        if key not in LOAD_KEYS or not value:
            raise ValueError(f"{item!r}: a load is key=value with keys {', '.join(LOAD_KEYS)}")
        given[key] = value
    numbers = {k: given[k] for k in ("cpu", "cpus", "io")}
    if not all(v.isdigit() for v in numbers.values()) or int(given["cpu"]) > 100:
        raise ValueError(f"{spec!r}: cpu is 0-100 (%), cpus and io are counts")
    if not re.fullmatch(r"[1-9]\d*[KMG]?", given["io-bytes"]):
        raise ValueError(f"{given['io-bytes']!r}: io-bytes is a size such as 64M")
    argv = ["stress-ng"]
    if int(given["cpu"]) and int(given["cpus"]):
        argv += ["--cpu", given["cpus"], "--cpu-load", given["cpu"]]
    if int(given["io"]):
        argv += ["--hdd", given["io"], "--hdd-bytes", given["io-bytes"]]
    if len(argv) == 1:
        raise ValueError(f"{spec!r} loads nothing: say cpu=P and/or io=N")
    return argv


# ------------------------------------------------------------ pure: the table


def counts(results: dict[str, Result]) -> dict[str, int]:
    tally = dict.fromkeys(("passed", "failed", "error", "skipped"), 0)
    for result in results.values():
        tally[result.outcome] += 1
    return tally


def flake_table(rounds: list[dict[str, Result]]) -> list[dict]:
    """Every test that failed or errored in a round: in how many of the
    rounds it ran, and each distinct message's first line with its count;
    the most failing first."""
    ran: dict[str, int] = {}
    failed: dict[str, int] = {}
    messages: dict[str, dict[str, int]] = {}
    for results in rounds:
        for test, result in results.items():
            ran[test] = ran.get(test, 0) + 1
            if result.outcome not in ("failed", "error"):
                continue
            failed[test] = failed.get(test, 0) + 1
            seen = messages.setdefault(test, {})
            for message in result.messages:
                seen[message] = seen.get(message, 0) + 1
    return [
        {
            "test": test,
            "failed": failed[test],
            "rounds": ran[test],
            "messages": [{"message": m, "count": n} for m, n in messages[test].items()],
        }
        for test in sorted(failed, key=lambda t: (-failed[t], t))
    ]


def report(rounds: list[Round], selection: str, load: list[str] | None, out: Path) -> dict:
    """What the soak found, as --json writes it."""
    return {
        "selection": selection,
        "load": shlex.join(load) if load else None,
        "out": str(out),
        "rounds": [
            {"round": r.number, "seconds": round(r.seconds, 1), "complete": r.complete}
            | counts(r.results)
            | {"runs": r.runs}
            for r in rounds
        ],
        "failing": flake_table([r.results for r in rounds]),
    }


def format_report(summary: dict) -> str:
    load = f" beside {summary['load']}" if summary["load"] else ""
    lines = [
        f"soak: {summary['selection']}{load}",
        "",
        "round  seconds  passed  failed  errors  skipped",
    ]
    for r in summary["rounds"]:
        note = "" if r["complete"] else "  (interrupted)"
        lines.append(
            f"{r['round']:>5}  {r['seconds']:>7.1f}  {r['passed']:>6}  {r['failed']:>6}"
            f"  {r['error']:>6}  {r['skipped']:>7}{note}"
        )
    lines.append("")
    failing = summary["failing"]
    if not failing:
        lines.append(f"no test failed or errored in {len(summary['rounds'])} round(s)")
    else:
        lines.append(f"{len(failing)} test(s) failed or errored at least once:")
        for row in failing:
            lines.append(f"  {row['failed']}/{row['rounds']}  {row['test']}")
            lines += [f"        {m['count']}x  {m['message']}" for m in row["messages"]]
    lines.append(f"logs and JUnit XML: {summary['out']}")
    return "\n".join(lines)


# ------------------------------------------------------------ the selection


def stage_args(stage: str) -> list[str]:
    """The Makefile's arguments for one of make test's stages."""
    done = subprocess.run(
        [
            "make",
            "-s",
            "--no-print-directory",
            "-C",
            str(REPO),
            "print-stage-args",
            f"STAGE={stage}",
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0 or not done.stdout.strip():
        raise SystemExit(f"soak: make print-stage-args STAGE={stage} failed: {done.stderr.strip()}")
    return shlex.split(done.stdout)


def selection(args: argparse.Namespace) -> tuple[str, list[Part]]:
    if args.pytest_args:
        return f"{args.rounds} round(s) of pytest {shlex.join(args.pytest_args)}", [
            Part("pytest", tuple(args.pytest_args))
        ]
    if args.stage:
        what = f"stage {args.stage}"
        parts = [Part(args.stage, tuple(stage_args(args.stage)))]
    else:
        preset = args.preset or "flaky"
        what = f"preset {preset}"
        parts = [
            Part(label, (*stage_args(stage), *paths)) for label, stage, paths in PRESETS[preset]
        ]
    return f"{args.rounds} round(s) of {what}", parts


# ------------------------------------------------------------ processes


def _dies_with_parent() -> Callable[[], None]:
    """For stress-ng before it starts: SIGTERM when this script dies, even by
    SIGKILL (Linux's PR_SET_PDEATHSIG); libc is looked up before the fork."""
    parent = os.getpid()
    prctl = getattr(ctypes.CDLL(None, use_errno=True), "prctl", None)

    def set_in_child() -> None:
        if prctl is not None:
            prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
        if os.getppid() != parent:  # died before the line above
            os._exit(1)

    return set_in_child


def _stop_group(process: subprocess.Popen, first: int, grace: float) -> None:
    """``first`` to the process's group, SIGKILL to what is left after
    ``grace`` seconds; Ctrl-C does not interrupt this."""
    ignored = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
    old = {s: signal.signal(s, signal.SIG_IGN) for s in ignored}
    try:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, first)
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(grace)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()
    finally:
        for sig, handler in old.items():
            signal.signal(sig, handler)


@contextlib.contextmanager
def stressed(load: list[str] | None, out: Path) -> Iterator[subprocess.Popen | None]:
    """stress-ng for the duration, in a process group of its own."""
    if load is None:
        yield None
        return
    # TMPDIR: where the tests' tmp_path directories are
    scratch = tempfile.mkdtemp(prefix="iorig-soak-stress-")
    try:
        with (out / "stress-ng.log").open("w") as log:
            process = subprocess.Popen(
                [*load, "--temp-path", scratch],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=_dies_with_parent(),
            )
        try:
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(STRESS_START_S)
                raise SystemExit(
                    f"soak: {shlex.join(load)} exited {process.returncode}: {log.name}"
                )
            print(f"soak: started {shlex.join(load)} (pid {process.pid})", flush=True)
            yield process
        finally:
            early = process.poll()
            _stop_group(process, signal.SIGTERM, STRESS_GRACE_S)
            said = f"had exited by itself ({early})" if early is not None else "stopped"
            print(f"soak: stress-ng {said}", flush=True)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def run_pytest(part: Part, xml: Path, log: Path | None) -> int:
    """pytest in a process group of its own, so that one SIGINT reaches it
    and its workers, whoever interrupts this script: they clean up (loop
    devices, fio) before anything stronger is sent."""
    # the venv's pytest as make test runs it (python -m pytest would put the
    # working directory on sys.path first); xunit1 names each test's file
    found = shutil.which("pytest", path=str(Path(sys.executable).parent))
    pytest = [found] if found else [sys.executable, "-m", "pytest"]
    argv = [*pytest, *part.argv, "-o", "junit_family=xunit1"]
    env = {k: v for k, v in os.environ.items() if k != "IORIG_RECORD_DURATIONS"}
    with contextlib.ExitStack() as stack:
        output = stack.enter_context(log.open("w")) if log else None
        process = subprocess.Popen(
            [*argv, f"--junitxml={xml}"],
            cwd=REPO,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=output,
            stderr=subprocess.STDOUT if output else None,
            process_group=0,
        )
        try:
            return process.wait()
        except BaseException:
            _stop_group(process, signal.SIGINT, PYTEST_GRACE_S)
            raise


def _abnormal(code: int, results: dict[str, Result], xml: Path) -> str | None:
    """Why a pytest run failed beyond its tests' results, if it did."""
    if not xml.exists():
        return f"pytest exited {code} without JUnit XML"
    if code in PYTEST_EXITS:
        return f"pytest exited {code} ({PYTEST_EXITS[code]})"
    if code == 1 and not any(r.outcome in ("failed", "error") for r in results.values()):
        return "pytest exited 1 with no test failed"
    if code == 5:
        return "pytest exited 5: no test ran"
    if code not in (0, 1):
        return f"pytest exited {code}"
    return None


def _read_junit(xml: Path) -> tuple[dict[str, Result], str | None]:
    try:
        return parse_junit(xml.read_text()), None
    except FileNotFoundError:
        return {}, None
    except ET.ParseError as exc:
        return {}, f"unreadable JUnit XML: {exc}"


def run_part(part: Part, current: Round, out: Path, verbose: bool) -> None:
    stem = out / f"round-{current.number:02d}-{part.label}"
    xml, log = stem.with_suffix(".xml"), None if verbose else stem.with_suffix(".log")
    print(f"soak: round {current.number}, {part.label}: pytest {shlex.join(part.argv)}", flush=True)
    start = time.monotonic()
    code: int | None = None
    try:
        code = run_pytest(part, xml, log)
    finally:
        seconds = time.monotonic() - start
        current.seconds += seconds
        results, unreadable = _read_junit(xml)
        for test, result in results.items():
            known = current.results.get(test)
            current.results[test] = merge(known, result) if known else result
        why = unreadable or (_abnormal(code, results, xml) if code is not None else None)
        if why:
            current.results[f"<pytest run {part.label}>"] = Result("error", (why,))
        current.runs.append(
            {"label": part.label, "argv": list(part.argv), "exit": code}
            | {"seconds": round(seconds, 1), "junit": str(xml), "log": str(log) if log else None}
        )
    tally = counts(results)
    print(
        f"soak:   {tally['passed']} passed, {tally['failed']} failed, {tally['error']} errors,"
        f" {tally['skipped']} skipped in {seconds:.1f} s" + (f"; {why}" if why else ""),
        flush=True,
    )


# ------------------------------------------------------------ main


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="soak.py", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    which = parser.add_mutually_exclusive_group()
    which.add_argument("--stage", choices=STAGES, help="one of make test's stages")
    which.add_argument("--preset", choices=sorted(PRESETS), help="default: flaky")
    parser.add_argument("--rounds", type=int, default=5, help="default: 5")
    parser.add_argument("--stress", action="store_true", help=f"--load {STRESS_DEFAULT}")
    parser.add_argument("--load", help="stress-ng's load: cpu=P,cpus=N,io=N,io-bytes=SIZE")
    parser.add_argument("--json", type=Path, help="write the table as JSON here")
    parser.add_argument("--out", type=Path, help="logs and JUnit XML (default: a new temp dir)")
    parser.add_argument("-v", "--verbose", action="store_true", help="pytest's output here")
    own, rest = (
        (argv[: argv.index("--")], argv[argv.index("--") + 1 :]) if "--" in argv else (argv, [])
    )
    args = parser.parse_args(own)
    args.pytest_args = rest
    if rest and (args.stage or args.preset):
        parser.error("pytest arguments after -- replace --stage and --preset")
    if args.rounds < 1:
        parser.error("--rounds is at least 1")
    try:
        spec = args.load or (STRESS_DEFAULT if args.stress else None)
        args.load = parse_load(spec) if spec else None
    except ValueError as exc:
        parser.error(f"--load {exc}")
    return args


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt(signal.Signals(signum).name)


def soak(args: argparse.Namespace, parts: list[Part], out: Path) -> tuple[list[Round], bool]:
    rounds: list[Round] = []
    try:
        with stressed(args.load, out):
            for number in range(1, args.rounds + 1):
                rounds.append(Round(number))
                for part in parts:
                    run_part(part, rounds[-1], out, args.verbose)
                rounds[-1].complete = True
    except KeyboardInterrupt:
        print("soak: interrupted", file=sys.stderr, flush=True)
        return rounds, True
    return rounds, False


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    if args.load and shutil.which("stress-ng") is None:
        print(
            "soak: stress-ng is not installed: apt-get install stress-ng (Debian's package)",
            file=sys.stderr,
        )
        return 2
    what, parts = selection(args)
    out = args.out or Path(tempfile.mkdtemp(prefix="iorig-soak-"))
    out.mkdir(parents=True, exist_ok=True)
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, _interrupt)
    # started in the background by a shell (`make soak &`, a CI step) SIGINT
    # comes ignored, and pytest would inherit that: Ctrl-C then waited out
    # PYTEST_GRACE_S before SIGKILL, with no cleanup
    signal.signal(signal.SIGINT, signal.default_int_handler)
    rounds, interrupted = soak(args, parts, out)
    summary = report(rounds, what, args.load, out)
    print("\n" + format_report(summary), flush=True)
    if args.json:
        args.json.write_text(json.dumps(summary, indent=1) + "\n")
    if interrupted:
        return 130
    return 1 if summary["failing"] else 0


if __name__ == "__main__":
    sys.exit(main())
