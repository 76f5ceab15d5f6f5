"""fio's figures are checked for consistency before they are stored: a fio
that reports impossible or contradictory figures (a bug, a corrupted
output file, a hostile binary) fails its phase naming what does not add up,
its raw output kept, instead of a run stored ``ok`` with "1e18 T IOPS".

Decided on the fake backend replaying recorded fio output with the figures a
broken fio would print (``Step.edit_job`` / ``edit_log_value``); one real
fio run behind a wrapper that rewrites its output shows the command line's
side (exit code, no traceback, the run stored as failed)."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest
from tests.fake_backend import FakeBackend, Step

from iorig.model import PhaseStatus, RunStatus
from iorig.run.session import execute
from iorig.scenario.loading import resolve, source_from_text
from iorig.store import Store

SCENARIO = """
name: s
title: Implausible fio output
targets:
  data: {size: 16MiB}
phases:
  - {name: fill, kind: prefill, workloads: [{rw: write, bs: 1MiB}]}
  - {name: one, kind: measure, duration: 3s, workloads: [{name: rr, rw: randread, bs: 4k}]}
"""


def _run(db_path: Path, step: Callable[[str], Step]):
    backend = FakeBackend(steps=lambda phase, repeat: step(phase.name))
    resolved = resolve(source_from_text(SCENARIO, "s.yaml"))
    plan = backend.prepare(resolved, {}, allow_destroy=False, repeats=1)
    with Store(db_path) as store:
        outcome = execute(plan, store, backend, command="test")
        return outcome, store.load_run(outcome.run_id, artifacts=True)


def _measured_with(db_path: Path, edit: Callable[[dict], None]):
    outcome, stored = _run(db_path, lambda name: Step(edit_job=edit) if name == "one" else Step())
    assert outcome.status is RunStatus.FAILED
    one = stored.phases[-1]
    assert one.name == "one" and one.status is PhaseStatus.FAILED
    assert one.fio_output, "the raw output is kept to look at"
    assert not one.scopes, "no figure of an inconsistent phase is stored"
    return one.error or ""


def _set(**values: object) -> Callable[[dict], None]:
    def edit(job: dict) -> None:
        job["read"].update(values)

    return edit


def test_a_rate_that_its_own_totals_contradict_fails_the_phase(db_path):
    error = _measured_with(db_path, _set(iops=1e30))
    assert "fio reported 1e+30 IOPS" in error and "I/Os in" in error


def test_negative_and_non_finite_figures_fail_the_phase(db_path):
    assert "negative" in _measured_with(db_path, _set(io_bytes=-4096))
    assert "not a finite number" in _measured_with(db_path, _set(bw_bytes=float("nan")))


def test_more_bytes_than_ios_times_the_block_size_fail_the_phase(db_path):
    def doubled(job: dict) -> None:
        job["read"]["io_bytes"] = job["read"]["total_ios"] * 8192

    assert "more than 4KiB an I/O" in _measured_with(db_path, doubled)
    # 10^21 bytes crashed the store with an OverflowError on main
    assert "beyond what any storage moves" in _measured_with(db_path, _set(io_bytes=10**21))


def test_consistent_but_impossible_figures_fail_the_phase(db_path):
    def scaled(factor: float) -> Callable[[dict], None]:
        def edit(job: dict) -> None:
            read = job["read"]
            for key in ("total_ios", "io_bytes", "iops", "bw_bytes", "bw"):
                read[key] = type(read[key])(read[key] * factor)

        return edit

    # 100 times the I/Os at the recorded latency: 99 in flight at queue depth 1
    assert "in flight where its queue depth is 1" in _measured_with(db_path, scaled(100))
    assert "more than one I/O a nanosecond" in _measured_with(db_path, scaled(1e6))


def test_per_second_logs_beyond_the_phases_total_fail_the_phase(db_path):
    def huge(kind: str, value: float) -> float:
        return 1e21 if kind in ("iops", "bw") else value

    outcome, stored = _run(
        db_path, lambda name: Step(edit_log_value=huge) if name == "one" else Step()
    )
    one = stored.phases[-1]
    assert outcome.status is RunStatus.FAILED and one.status is PhaseStatus.FAILED
    assert "per-second" in (one.error or "") and not one.scopes


def test_a_prefill_that_wrote_nothing_fails(db_path):
    def nothing(job: dict) -> None:
        for d in ("read", "write", "trim"):
            for key in ("total_ios", "io_bytes", "iops", "bw_bytes", "bw", "io_kbytes"):
                job[d][key] = 0

    outcome, stored = _run(
        db_path, lambda name: Step(edit_job=nothing) if name == "fill" else Step()
    )
    fill = stored.phases[0]
    assert outcome.status is RunStatus.FAILED and fill.status is PhaseStatus.FAILED
    assert "did no I/O" in (fill.error or "")


def test_recorded_output_as_fio_wrote_it_is_plausible(db_path):
    outcome, stored = _run(db_path, lambda name: Step())
    assert outcome.status is RunStatus.OK
    assert all(p.status is PhaseStatus.OK for p in stored.phases)


WRAPPER = """\
#!{python}
# fio, but its result's bytes multiplied by 10^12 (10^21 bytes and more)
import json, subprocess, sys
code = subprocess.call([{fio!r}] + sys.argv[1:])
out = next((a.split("=", 1)[1] for a in sys.argv if a.startswith("--output=")), None)
if out and "--parse-only" not in sys.argv:
    text, docs, pos = open(out).read(), [], 0
    decoder = json.JSONDecoder()
    while (start := text.find("{{", pos)) >= 0:
        doc, pos = decoder.raw_decode(text, start)
        for job in doc.get("jobs", []):
            for d in ("read", "write"):
                if job[d]["io_bytes"]:
                    job[d]["io_bytes"] *= 10**12
        docs.append(json.dumps(doc))
    open(out, "w").write(chr(10).join(docs))
sys.exit(code)
"""


@pytest.mark.fio
@pytest.mark.system
def test_a_fio_printing_impossible_bytes_fails_the_run_without_a_traceback(tmp_path, scratch):
    fio_path = shutil.which("fio")
    assert fio_path, "fio is installed by make test"
    wrapper = tmp_path / "fio"
    wrapper.write_text(WRAPPER.format(python=sys.executable, fio=fio_path))
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IXUSR)
    db = tmp_path / "r.sqlite"
    env = os.environ | {"IORIG_FIO": str(wrapper)}
    argv = [
        sys.executable,
        "-m",
        "iorig",
        "--db",
        str(db),
        "run",
        "--rw",
        "randread",
        "--bs",
        "4k",
        "--duration",
        "1s",
        "--size",
        "8MiB",
        "--target",
        str(scratch / "t.dat"),
    ]
    done = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode != 0, done.stdout
    assert "Traceback" not in done.stderr + done.stdout
    shown = subprocess.run(
        [sys.executable, "-m", "iorig", "--db", str(db), "show", "last"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert "failed" in shown.stdout and "bytes" in shown.stdout, textwrap.shorten(shown.stdout, 800)
