"""Generated bad input, each case invalid by construction: built-in scenario
YAML mutated (wrong types, negative, huge and non-finite numbers, unknown
keys, bad units and enums, alias bombs) and command lines (bad --set values,
ad-hoc options, targets, run references). For every case the CLI must exit
with 2, name the field (and file:line for YAML) on stderr, print no
traceback, store no run and leave no file in the target directory or the
working directory.

The cases run in-process through ``iorig.cli.main`` (fast); a sample of
them also through a real subprocess.
"""

from __future__ import annotations

import random
import re
import sqlite3
import sys
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import pytest
from tests.conftest import built_once

from iorig import cli
from iorig.cli import common
from iorig.run.session import RunSession
from iorig.scenario.source import load_yaml

SEED = 13
SCENARIOS = ("peak", "four-corners")


@dataclass(frozen=True)
class Case:
    name: str
    args: tuple[str, ...]  # after `iorig --db DB`; {target} and {yaml} are filled in
    expect: tuple[str, ...]  # substrings stderr must hold (a regex when it starts with ^)
    yaml: str | None = None  # the scenario file's text, for YAML cases


# ------------------------------------------------------------ bad values

BAD_SIZES = ["-1", "lots", ".inf", ".nan", "99999999999999999999TiB", "1.5", "4 parsecs", "[4k]"]
BAD_DURATIONS = [
    ".inf",
    ".nan",
    "-5s",
    "99999999999999999999h",
    "0.0001s",
    "1.5ms",
    "abc",
    "[1, 2]",
    "{a: 1}",
    "true",
    "1000000000000h",
    "5 fortnights",
]
BAD_INTS = ["1.5", "abc", ".inf", "[]", "9" * 45]
BAD_BOOLS = ["maybe", "2", "[]", "-1"]
BAD_CHOICES = ["nope", "1", "[]", "io-uring"]
BY_TYPE = {
    "size": BAD_SIZES,
    "duration": BAD_DURATIONS,
    "int": BAD_INTS,
    "bool": BAD_BOOLS,
    "choice": BAD_CHOICES,
}

# workload key -> values invalid for every workload of the built-ins
WORKLOAD_BAD = {
    "bs": [
        "5000",
        "2g",
        "-4k",
        ".inf",
        ".nan",
        "4 parsecs",
        "0",
        "9" * 25,
        "4KB",
        "513",
        "99999999999999999999TiB",
        "{a: 1}",
    ],
    "iodepth": ["0", "-1", "65537", "1.5", "abc", ".inf", "9" * 35, "[1]", "9" * 45],
    "jobs": ["0", "1025", "-3", "x", ".nan"],
    "rw": ["readd", "trimm", "123", "randwrites", "null", "''"],
    "engine": ["spdk", "io-uring", "exec", "1"],
    "direct": ["maybe", "2", "[]", "-1"],
    "rate_iops": ["5000000000", "-1", ".inf", "1.5", "lots"],  # 0 is valid: no limit
    "verify_interval": ["100", "1000", "3072", "511", "-512", ".inf"],
    "read_pct": ["50", "150", ".nan"],  # none of the built-ins' workloads mixes reads
    "compress": ["101", "-1", "12.5", ".inf"],
    "distribution": ["zipf", "gauss:1", "zoned:1/2/3", "'random; rm -rf /'"],
    "offset": ["-1", "1.5", ".inf", "lots"],
    "size": ["-1", ".inf", "big", "99999999999999999999TiB"],
    "blocksize": ["4k"],
    "io_depth": ["1"],
    "numjobs": ["1"],
    "exec": ["ls"],
    "filename": ["x"],
}
BAD_RAMPS = [".inf", "0.0001s", "-1", "xyz", "1000000000000h", "2.5ms"]
TOP_LEVEL_BAD = {"iorig": ["2", ".inf", "-1", "x"], "version": ["-1", "99999999999", "1.5", ".nan"]}


def _builtin(name: str) -> str:
    return (resources.files("iorig") / "scenarios" / f"{name}.yaml").read_text(encoding="utf-8")


def _set_key(line: str, key: str, value: str) -> str:
    """``key: value`` in a flow mapping line: replaced if there, else added."""
    pattern = re.compile(rf"(?<=[{{ ]){key}: (\"[^\"]*\"|[^,}}]*)")
    if pattern.search(line):
        return pattern.sub(lambda m: f"{key}: {value}", line, count=1)
    head, _, tail = line.rpartition("}")
    return f"{head}, {key}: {value}}}{tail}"


def _yaml_case(label: str, scenario: str, lines: list[str], line: int, field: str) -> Case:
    file = f"{label}.yaml"
    return Case(
        label,
        ("run", "{yaml}", "--target", "{target}/"),
        (f"{file}:{line}:", field),
        "\n".join(lines) + "\n",
    )


def yaml_cases(rng: random.Random) -> list[Case]:
    cases: list[Case] = []
    for scenario in SCENARIOS:
        text = _builtin(scenario)
        lines = text.splitlines()
        doc = load_yaml(text, scenario)
        workload_lines = [i for i, s in enumerate(lines) if re.match(r"^\s+- \{rw: ", s)]
        duration_lines = [i for i, s in enumerate(lines) if re.match(r"^    duration: \$\{", s)]
        ramp_lines = [i for i in duration_lines if "${gap}" not in lines[i]]  # not idle

        def mutated(at: int, new: str, insert: bool = False, lines=lines) -> list[str]:
            out = list(lines)
            if insert:
                out.insert(at, new)
            else:
                out[at] = new
            return out

        for key, values in WORKLOAD_BAD.items():
            for value in values:
                i = rng.choice(workload_lines)
                label = f"{scenario}-wl{len(cases):03d}"
                new = _set_key(lines[i], key, value)
                cases.append(_yaml_case(label, scenario, mutated(i, new), i + 1, key))
        for value in BAD_DURATIONS:
            i = rng.choice(duration_lines)
            label = f"{scenario}-dur{len(cases):03d}"
            cases.append(
                _yaml_case(label, scenario, mutated(i, f"    duration: {value}"), i + 1, "duration")
            )
        for value in BAD_RAMPS:
            i = rng.choice(ramp_lines)
            label = f"{scenario}-ramp{len(cases):03d}"
            cases.append(
                _yaml_case(
                    label, scenario, mutated(i + 1, f"    ramp: {value}", True), i + 2, "ramp"
                )
            )
        for name, spec in doc.data["parameters"].items():
            i = doc.lines[("parameters", name, "default")] - 1
            value = rng.choice(BY_TYPE[spec["type"]])
            label = f"{scenario}-param{len(cases):03d}"
            cases.append(
                _yaml_case(
                    label,
                    scenario,
                    mutated(i, f"    default: {value}"),
                    i + 1,
                    f"parameters.{name}.default",
                )
            )
        for key, values in TOP_LEVEL_BAD.items():
            i = doc.lines[(key,)] - 1
            for value in values:
                label = f"{scenario}-top{len(cases):03d}"
                cases.append(_yaml_case(label, scenario, mutated(i, f"{key}: {value}"), i + 1, key))
        # structure: an alias bomb, deep nesting, a huge number, each appended
        end = len(lines)
        bomb = ['x0: &x0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
        bomb += [f"x{k}: &x{k} [" + ", ".join([f"*x{k - 1}"] * 9) + "]" for k in range(1, 7)]
        for label, extra, line, field in [
            ("bomb", bomb, end + 6, "expands to more than"),
            ("deep", ["x: " + "[" * 50 + "]" * 50], end + 1, "nesting deeper than"),
            ("deepmap", ["x: " + "{a: " * 40 + "1" + "}" * 40], end + 1, "nesting deeper than"),
            ("hugeint", ["x: " + "7" * rng.randint(41, 6000)], end + 1, "a number with"),
            ("hugefloat", ["x: 1." + "5" * rng.randint(41, 600)], end + 1, "a number with"),
            ("aliases", ["y: &y 1", *[f"y{k}: *y" for k in range(101)]], end + 102, "aliases"),
        ]:
            name = f"{scenario}-{label}{len(cases):03d}"
            cases.append(_yaml_case(name, scenario, lines + extra, line, field))
    return cases


def cli_cases(rng: random.Random) -> list[Case]:
    cases: list[Case] = []
    peak = ("run", "peak", "--quick", "--target", "{target}/")
    params = {
        "duration": "duration",
        "gap": "duration",
        "warmup": "duration",
        "size": "size",
        "random_bs": "size",
        "seq_bs": "size",
        "iodepth": "int",
        "jobs": "int",
        "prefill": "bool",
        "direct": "bool",
        "engine": "choice",
    }
    for name, kind in params.items():
        for value in BY_TYPE[kind]:
            cases.append(
                Case(
                    f"set-{name}-{value}", (*peak, "--set", f"{name}={value}"), (f"--set {name}=",)
                )
            )
    for value in ["1B", "4KiB", "512KiB"]:  # smaller than one of the fill's 1 MiB blocks
        cases.append(Case(f"set-size-{value}", (*peak, "--set", f"size={value}"), ("working set",)))
    for value in ["0", "-4", "70000", "99999999999999999999"]:
        cases.append(
            Case(f"set-iodepth-{value}", (*peak, "--set", f"iodepth={value}"), ("iodepth",))
        )
    cases += [
        Case("set-unknown", (*peak, "--set", "nosuch=1"), ("no parameter 'nosuch'",)),
        Case("set-malformed", (*peak, "--set", "novalue"), ("expected name=value",)),
        Case("set-twice", (*peak, "--set", "duration=1s", "--duration", "2s"), ("duration",)),
        Case(
            "profile",
            ("run", "peak", "--profile", "nosuch", "--target", "{target}/"),
            ("no profile 'nosuch'",),
        ),
        Case(
            "scenario", ("run", "no-such-scenario", "--target", "{target}/"), ("no-such-scenario",)
        ),
    ]
    adhoc = ("run", "--rw", "randread", "--size", "16MiB", "--target", "{target}/")
    for value in ["5000", "2g", "0", "-4k", "abc", "99999999999999999999TiB", "4KB"]:
        cases.append(
            Case(f"adhoc-bs-{value}", (*adhoc, "--bs", value, "--duration", "1s"), ("bs",))
        )
    for value in BAD_DURATIONS:
        cases.append(
            Case(
                f"adhoc-duration-{value}",
                (*adhoc, "--bs", "4k", "--duration", value),
                ("duration",),
            )
        )
    for option, values in {
        "--iodepth": ["0", "abc", "1.5", "65537"],
        "--jobs": ["0", "x", "1025"],
        "--repeat": ["0", "-1"],
        "--engine": ["spdk", "exec"],
    }.items():
        for value in values:
            cases.append(
                Case(
                    f"adhoc{option}-{value}",
                    (*adhoc, "--bs", "4k", "--duration", "1s", option, value),
                    (option.lstrip("-"),),
                )
            )
    for value in ["150", "-1", "abc"]:
        cases.append(
            Case(
                f"adhoc-read-pct-{value}",
                (
                    "run",
                    "--rw",
                    "randrw",
                    "--size",
                    "16MiB",
                    "--target",
                    "{target}/",
                    "--bs",
                    "4k",
                    "--duration",
                    "1s",
                    "--read-pct",
                    value,
                ),
                ("read",),
            )
        )
    for value in ["lots", "-1", ".inf", "99999999999999999999TiB"]:
        cases.append(
            Case(
                f"adhoc-size-{value}",
                (
                    "run",
                    "--rw",
                    "read",
                    "--bs",
                    "4k",
                    "--duration",
                    "1s",
                    "--size",
                    value,
                    "--target",
                    "{target}/",
                ),
                ("size",),
            )
        )
    for target, reason in [
        ("/proc/self/mem", "proc filesystem"),
        ("/dev/null", "character"),
        ("/dev/zero", "character"),
        ("/sys/kernel/", "sysfs"),
        ("/proc/", "proc filesystem"),
    ]:
        cases.append(
            Case(
                f"target-{target}",
                (
                    "run",
                    "--rw",
                    "read",
                    "--bs",
                    "4k",
                    "--duration",
                    "1s",
                    "--size",
                    "1MiB",
                    "--target",
                    target,
                ),
                (target.rstrip("/"), reason),
            )
        )
        cases.append(Case(f"doctor-{target}", ("doctor", target), (target.rstrip("/"), reason)))
    for ref in [
        "last~abc",
        "last~-1",
        "last~99999999999999999999",
        "last~",
        "last~1.5",
        "zz-not-a-run",
        "LAST~1",
        "last~~1",
    ]:
        cases.append(Case(f"show-{ref}", ("show", ref), (ref,)))
        cases.append(Case(f"compare-{ref}", ("compare", ref, "last"), (ref,)))
    for value in ["-1", "0", "abc"]:
        cases.append(Case(f"runs-limit-{value}", ("runs", "--limit", value), ("--limit",)))
    cases += [
        Case("doctor-missing", ("doctor", "{target}/nonexistent/"), ("does not exist",)),
        Case("scenarios-show", ("scenarios", "show", "nosuch"), ("nosuch",)),
    ]
    rng.shuffle(cases)
    return cases


ALL = yaml_cases(random.Random(SEED)) + cli_cases(random.Random(SEED + 1))


def test_at_least_200_cases_of_each_kind_together():
    yaml_count = sum(1 for c in ALL if c.yaml is not None)
    assert len(ALL) >= 200 and yaml_count >= 100 and len(ALL) - yaml_count >= 100
    assert len({c.name for c in ALL}) == len(ALL)


def _check(case: Case, code: int | None, out: str, err: str, db: Path, dirs: list[Path]) -> None:
    flat = " ".join(err.split())
    assert code == 2, f"{case.name}: exit {code}\n{out}\n{err}"
    assert "Traceback" not in out + err, f"{case.name}:\n{err}"
    for want in case.expect:
        assert want in flat, f"{case.name}: {want!r} not in stderr:\n{err}"
    if db.exists():
        with sqlite3.connect(db) as con:
            assert con.execute("select count(*) from runs").fetchone()[0] == 0, case.name
    for d in dirs:
        left = sorted(str(p.relative_to(d)) for p in d.rglob("*"))
        assert left == [], f"{case.name}: left {left} in {d}"


def _argv(case: Case, root: Path) -> tuple[list[str], Path, list[Path]]:
    target, work, db = root / "target", root / "cwd", root / "results.sqlite"
    target.mkdir()
    work.mkdir()
    yaml_path = root / f"{case.name}.yaml"
    if case.yaml is not None:
        yaml_path.write_text(case.yaml)
    args = [a.replace("{target}", str(target)).replace("{yaml}", str(yaml_path)) for a in case.args]
    return ["--db", str(db), *args], db, [target, work]


@pytest.fixture
def wide_consoles(monkeypatch):
    """Messages on one line each, so the expected text is not wrapped apart;
    the command line built once for all cases."""
    built_once(monkeypatch)
    for console in (common.console, common.err_console):
        monkeypatch.setattr(console, "width", 10_000)


@pytest.mark.fio
def test_every_generated_bad_input_is_refused_cleanly(tmp_path, monkeypatch, capsys, wide_consoles):
    def started(self: RunSession) -> RunSession:
        # an input that is no longer refused would run the built-in's full
        # default schedule (16 GiB, minutes): fail it at once instead
        raise AssertionError("accepted: a run started")

    monkeypatch.setattr(RunSession, "__enter__", started)
    failures = []
    for number, case in enumerate(ALL):
        root = tmp_path / f"c{number:03d}"
        root.mkdir()
        argv, db, dirs = _argv(case, root)
        monkeypatch.chdir(dirs[1])
        monkeypatch.setattr(sys, "argv", ["iorig", *argv])
        code: int | str | None = 0
        try:
            cli.main()
        except SystemExit as exc:
            code = exc.code
        except BaseException as exc:  # a bug: reported below with its case
            code = f"{type(exc).__name__}: {exc}"
        out, err = capsys.readouterr()
        try:
            _check(case, code, out, err, db, dirs)  # type: ignore[arg-type]
        except AssertionError as exc:
            failures.append(str(exc)[:600])
    assert not failures, f"{len(failures)} of {len(ALL)} cases:\n" + "\n\n".join(failures[:20])


SUBPROCESS_SAMPLE = 6  # the real process path; every case runs in process above


@pytest.mark.fio
@pytest.mark.parametrize(
    "case", random.Random(SEED + 2).sample(ALL, SUBPROCESS_SAMPLE), ids=lambda c: c.name
)
def test_a_sample_through_the_real_command_line(tmp_path, case):
    import os
    import subprocess

    argv, db, dirs = _argv(case, tmp_path)
    src = str(Path(__file__).resolve().parents[2] / "src")
    path = os.pathsep.join(p for p in (src, os.environ.get("PYTHONPATH", "")) if p)
    env = dict(os.environ, COLUMNS="10000", NO_COLOR="1", PYTHONPATH=path)
    done = subprocess.run(
        [sys.executable, "-m", "iorig", *argv],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        cwd=dirs[1],
    )
    _check(case, done.returncode, done.stdout, done.stderr, db, dirs)
