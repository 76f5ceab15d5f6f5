"""Bad input is refused before anything is written, for the right reason,
without a traceback — each case here once got through or failed late:

* YAML alias bombs, deep nesting and huge numbers (a 342-byte file took 79 s
  and 1.8 GB; the others were tracebacks);
* a value fio takes differently from what the scenario says was found only
  when its phase started, after the run row and the target file existed;
* a megabyte title went through rich's markup parser and highlighter;
* ``last~N`` out of range, ``doctor`` on a missing path, ``/proc/self/mem``;
* ``agent --bind ::ffff:0.0.0.0`` listened on every IPv4 address unwarned.
"""

from __future__ import annotations

import io
import sqlite3
import sys
import time
from pathlib import Path
from types import SimpleNamespace
from typing import ClassVar

import pytest
import yaml
from rich.console import Console

from iorig.cli import common
from iorig.errors import UserError
from iorig.scenario.source import LOADERS, load_yaml

SMALL = """\
iorig: 1
name: small
title: small
targets:
  data: {size: 16MiB}
phases:
  - name: m
    kind: measure
    duration: 1s
    workloads:
      - {rw: randread, bs: 4k, engine: psync%s}
"""


def _runs(db: Path) -> int:
    if not db.exists():
        return 0
    with sqlite3.connect(db) as con:
        return con.execute("select count(*) from runs").fetchone()[0]


def _tree(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


# ------------------------------------------------------------------ YAML


# iorig's limits and messages whatever parser PyYAML has: libyaml first (what
# users get), the pure-Python parser alone (PyYAML built without libyaml)
_PARSERS = pytest.mark.parametrize(
    "loaders", [LOADERS, (yaml.SafeLoader,)], ids=["default", "pure-python"]
)


@_PARSERS
def test_an_alias_bomb_is_refused_at_once_naming_the_line(loaders):
    lines = ['a0: &a0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    for i in range(1, 7):  # 9**7 values once expanded
        lines.append(f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 9) + "]")
    started = time.monotonic()
    with pytest.raises(UserError, match=r"^bomb\.yaml:\d+: the document expands to more than"):
        load_yaml("\n".join(lines), "bomb.yaml", loaders)
    assert time.monotonic() - started < 1.0


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("a: " + "[" * 3000 + "]" * 3000, r"^deep\.yaml:1: nesting deeper than 32 levels"),
        ("a:\n  b: " + "{c: " * 40 + "1" + "}" * 40, r"^deep\.yaml:2: nesting deeper than"),
        ("x: 1\niorig: " + "9" * 5000, r"^deep\.yaml:2: iorig: a number with 5000 characters"),
        ("iorig: -" + "1" * 500 + ".5", r"^deep\.yaml:1: iorig: a number with 503 characters"),
        ("a: &x [1]\n" + "".join(f"b{i}: *x\n" for i in range(101)), r"more than 100 YAML"),
    ],
)
@_PARSERS
def test_deep_nesting_and_huge_numbers_are_refused_naming_the_line(text, message, loaders):
    with pytest.raises(UserError, match=message):
        load_yaml(text, "deep.yaml", loaders)


def test_libyaml_is_the_default_parser_where_pyyaml_has_it():
    """The limit tests above exercise libyaml only if it is the parser tried first."""
    assert LOADERS[-1] is yaml.SafeLoader
    if hasattr(yaml, "CSafeLoader"):
        assert LOADERS[0] is yaml.CSafeLoader


# ------------------------------------------- values checked before anything


@pytest.mark.fio
def test_what_fio_refuses_is_found_before_the_run_row_and_the_file(refused, db_path, scratch):
    """fio's own parser refuses this distribution (its zones add up to 110 %);
    the pre-flight finds it before the run is stored or the file is made."""
    scenario = scratch / "dist.yaml"
    scenario.write_text(SMALL % ', distribution: "zoned:50/50:60/50"')
    target = scratch / "target"
    target.mkdir()
    done = refused("run", str(scenario), "--target", f"{target}/")
    assert done.returncode == 2, done.stdout + done.stderr
    assert "phase 'm': fio refuses its job file" in done.stderr
    assert "random_distribution" in done.stderr
    assert _runs(db_path) == 0
    assert _tree(target) == []


@pytest.mark.fio
@pytest.mark.parametrize("name", ["f.dat", "new/deeper/f.dat"])
def test_a_refused_plan_leaves_no_file_target_behind(refused, db_path, scratch, name):
    target = scratch / "target"
    target.mkdir()
    done = refused("run", "peak", "--quick", "--target", str(target / name), "--set", "size=1B")
    assert done.returncode == 2, done.stdout + done.stderr
    assert "smaller than one block" in done.stderr
    assert _runs(db_path) == 0
    assert _tree(target) == []


@pytest.mark.system
@pytest.mark.parametrize(
    ("setting", "field"),
    [
        ("duration=99999999999999999999h", "longer than a phase may last"),
        ("duration=0.0001s", "not a whole number of milliseconds"),
        ("random_bs=2g", "larger than fio takes"),
    ],
)
def test_values_fio_cannot_take_are_refused_with_the_parameter(
    refused, db_path, tmp_path, setting, field
):
    done = refused("run", "peak", "--quick", "--target", f"{tmp_path}/t/", "--set", setting)
    assert done.returncode == 2, done.stdout + done.stderr
    assert field in done.stderr and setting.split("=")[0] in done.stderr
    assert _runs(db_path) == 0
    assert not (tmp_path / "t").exists()


# ------------------------------------------------------------ user text


def test_a_megabyte_title_prints_at_once_as_plain_text_clipped():
    from iorig.cli.common import ProgressView
    from iorig.report.writers import terminal
    from iorig.run.events import RunStarted

    title = ("[bold red]x 0x1f 123 /a/b 'q' (1, 2) " * 30000)[:1_000_000]
    out = io.StringIO()
    console = Console(file=out, width=100, force_terminal=True, color_system="truecolor")
    plan = SimpleNamespace(
        resolved=SimpleNamespace(scenario=SimpleNamespace(title=title), profile=None),
        targets={"data": SimpleNamespace(path=Path("/scratch/f.dat"), size_bytes=1 << 20)},
        fio_version="fio-3.33",
        engines=["psync"],
    )
    source = SimpleNamespace(scenario=SimpleNamespace(name="big", title=title, phases=[]))
    started = time.monotonic()
    ProgressView(console).handle(RunStarted("abc123", plan))  # type: ignore[arg-type]
    console.print(terminal.scenarios_table([source]))  # type: ignore[list-item]
    assert time.monotonic() - started < 1.0
    text = out.getvalue()
    assert "[bold red]x" in text  # shown as written, not taken for markup
    assert "\x1b[1;31m" not in text  # … and not styled by it
    assert "…" in text and len(text) < 20_000


# ------------------------------------------------ references and targets


def test_last_with_a_count_too_large_is_a_clear_error(iorig):
    done = iorig("show", "last~99999999999999999999")
    assert done.returncode == 2
    assert "not a run reference" in done.stderr and "Traceback" not in done.stderr


@pytest.mark.fio
def test_doctor_on_a_missing_path_fails(refused, tmp_path):
    done = refused("doctor", str(tmp_path / "nonexistent") + "/")
    assert done.returncode == 2, done.stdout
    assert "does not exist" in done.stderr
    assert not (tmp_path / "nonexistent").exists()


@pytest.mark.fio
@pytest.mark.parametrize(
    ("target", "reason"),
    [
        ("/proc/self/mem", "on the kernel's proc filesystem"),
        # not there yet: it would be made on /proc (was refused as "0B is free")
        ("/proc/iorig-not-there/", "on the kernel's proc filesystem"),
        ("/sys/iorig-not-there/data", "on the kernel's sysfs filesystem"),
        ("/dev/null", "a character device, not a regular file, directory or block device"),
        # a mistyped device name was made a file in memory and measured (issue 27's campaign)
        ("/dev/iorig-not-there", "is not a block device, and /dev is the kernel's device"),
        # ENAMETOOLONG was a traceback (issue 27's campaign)
        ("/tmp/" + "d" * 256 + "/data", "has a name of 256 bytes; a file name holds at most 255"),
        ("/tmp/" + "/".join(["e" * 200] * 21), "is 4225 bytes long; a path holds at most 4095"),
    ],
    ids=["proc-mem", "proc-new", "sys-new", "dev-null", "dev-new", "long-name", "long-path"],
)
def test_special_targets_are_refused_for_the_true_reason(refused, db_path, target, reason):
    for args in (
        ["doctor", target],
        [
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
        ],
    ):
        done = refused(*args)
        assert done.returncode == 2, done.stdout + done.stderr
        assert reason in " ".join(done.stderr.split())
        assert "free" not in done.stderr
    assert _runs(db_path) == 0


# ----------------------------------------------------------------- agent

ANY = [
    "0.0.0.0",
    "0",
    "0x0",
    "::",
    "[::]",
    "::0",
    "0:0:0:0:0:0:0:0",
    "::ffff:0.0.0.0",
    "::ffff:0:0",
    "[::ffff:0.0.0.0]",
    "",
]


@pytest.mark.parametrize("spelling", ANY)
def test_every_spelling_of_all_interfaces_is_refused_by_the_server(tmp_path, spelling):
    from iorig.fio.hosts import HostAddress
    from iorig.fio.server import FioServer

    host = spelling.strip("[]")
    with pytest.raises(UserError, match="no authentication"):
        FioServer("/bin/false", HostAddress(host, 18757), tmp_path)


class _StandIn:
    """The agent's fio server, listener and control port: each records how
    it was made (the listener: its address and authentication) and none
    listens anywhere."""

    made: ClassVar[list[tuple[str, object]]] = []

    def __init__(self, *args, **kwargs):
        pass

    def start(self):
        pass

    def close(self):
        pass

    running = False
    processes = None
    jobs_age_s = None

    def stop(self):
        pass


class _ListenerStandIn(_StandIn):
    def __init__(self, address, auth, *args, **kwargs):
        self.made.append((address.host, auth))


def _agent(monkeypatch, tmp_path, *args: str) -> int | str | None:
    import iorig.cli.agent as agent_mod
    from iorig import cli
    from iorig.fio import control, server, tlsrelay

    _StandIn.made = []
    # the agent imports these when it starts, not with the command line
    monkeypatch.setattr(server, "FioServer", _StandIn)
    monkeypatch.setattr(control, "ControlServer", _StandIn)
    monkeypatch.setattr(tlsrelay, "AgentListener", _ListenerStandIn)
    monkeypatch.setattr(
        sys, "argv", ["iorig", "agent", *args, "--dir", str(tmp_path), "--port", "18757"]
    )
    for console in (agent_mod.console, common.err_console):
        monkeypatch.setattr(console, "width", 500)
    with pytest.raises(SystemExit) as ended:
        cli.main()
    return ended.value.code


@pytest.mark.parametrize(
    "bind", [*ANY, "10.0.0.11", "192.0.2.7", "fe80::1", "::ffff:10.0.0.1", "storage01"]
)
def test_an_agent_beyond_loopback_without_authentication_is_refused(
    monkeypatch, capsys, tmp_path, bind
):
    """Refused before fio is looked for (the unit tier forbids a process):
    nothing runs and nothing listens; the error names the way out."""
    assert _agent(monkeypatch, tmp_path, "--bind", bind) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "refusing to start a fio server listening on" in err and "no authentication" in err
    assert "SSH tunnel" in err and "--insecure-no-auth" in err
    assert _StandIn.made == []


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("127.0.0.1", True),
        ("127.0.0.5", True),
        ("::1", True),
        ("[::1]", True),
        ("::ffff:127.0.0.1", True),
        ("localhost", True),
        ("LOCALHOST", True),
        ("10.0.0.1", False),
        ("::ffff:10.0.0.1", False),
        ("0.0.0.0", False),
        ("", False),
        ("::", False),
        ("storage01", False),
        ("127.0.0.1.example.com", False),
    ],
)
def test_loopback_is_only_what_no_other_machine_reaches(host, loopback):
    from iorig.fio.hosts import is_loopback

    assert is_loopback(host) is loopback


@pytest.mark.system  # fio --version: a process
@pytest.mark.parametrize("spelling", ANY)
def test_agent_treats_every_spelling_of_all_interfaces_as_0000(
    monkeypatch, capsys, tmp_path, spelling
):
    """Asked for with --insecure-no-auth, it is named 0.0.0.0 or :: and
    warned about; the server is a stand-in, so nothing listens."""
    _agent(monkeypatch, tmp_path, "--bind", spelling, "--insecure-no-auth")  # the stand-in ends
    assert _StandIn.made == [("::" if ":" in spelling else "0.0.0.0", None)]  # no auth
    out = " ".join(capsys.readouterr().out.split())
    assert "warning: no authentication on" in out and "isolated test network" in out
