"""Trim workloads (rw trim, randtrim, trimwrite, randtrimwrite): the engine
each target trims with, the check that a target takes discards before
anything runs, a prefill first, and trims as a direction of their own in
the figures. Trims with fio: tests/test_fio_jobfiles_e2e.py (a file) and
tests/truth/test_trim.py (a capped loop device)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest
from tests import builders

from iorig.analyze.summary import summarize_phase
from iorig.errors import UserError
from iorig.model import ALL, Metric
from iorig.report.tables.run import direction_tables, summary_tables
from iorig.report.writers.jsoncsv import phase_dict
from iorig.run import local
from iorig.run.plan import trim_engine
from iorig.scenario.adhoc import adhoc_source
from iorig.scenario.loading import resolve
from iorig.scenario.schema import Workload
from iorig.targets import Target, discard


def _target(kind: str) -> Target:
    path = Path("/dev/loop9" if kind == "block" else "/srv/t.dat")
    return Target("data", str(path), kind, path, 1 << 30, None, False, False)  # type: ignore[arg-type]


def test_a_device_trims_with_any_engine_a_file_only_by_punching_holes():
    trim = Workload(rw="randtrim", bs=4096)
    assert trim_engine("w", trim, _target("block"), "io_uring") == "io_uring"
    assert trim_engine("w", trim, _target("file"), "io_uring") == "falloc"
    assert trim_engine("w", Workload(rw="trim", bs=4096), _target("directory"), "x") == "falloc"
    assert trim_engine("w", Workload(rw="trimwrite", bs=4096), _target("block"), "x") == "x"
    for workload, fragment in (
        (Workload(rw="randtrimwrite", bs=4096), "cannot also write"),
        (Workload(rw="randtrim", bs=4096, engine="libaio"), "engine libaio cannot trim a file"),
    ):
        with pytest.raises(UserError, match=fragment):
            trim_engine("w", workload, _target("file"), "libaio")
    with pytest.raises(UserError, match="fio servers"):
        trim_engine("w", trim, _target("remote"), "io_uring")


def test_a_device_takes_discards_when_its_queue_says_so(tmp_path):
    queue = tmp_path / "queue"
    queue.mkdir()
    (queue / "discard_max_bytes").write_text("4294966784\n")
    assert discard.device_problem(Path("/dev/loop9"), queue) is None
    (queue / "discard_max_bytes").write_text("0\n")
    assert "does not take discards" in (discard.device_problem(Path("/dev/loop9"), queue) or "")
    (queue / "discard_max_bytes").unlink()
    assert "cannot tell" in (discard.device_problem(Path("/dev/loop9"), queue) or "")


def test_a_file_takes_trims_where_its_filesystem_punches_holes(scratch):
    # ext4, xfs and tmpfs punch holes; the try leaves nothing behind
    assert discard.file_problem(scratch) is None
    assert list(scratch.iterdir()) == []
    assert "cannot try a hole punch" in (discard.file_problem(scratch / "missing") or "")


def test_trims_are_refused_before_anything_runs_where_they_would_fail(monkeypatch):
    resolved = resolve(adhoc_source("randtrim"))
    asked = []

    def refuse(path: Path, block: bool) -> str:
        asked.append((path, block))
        return "/dev/loop9 does not take discards"

    monkeypatch.setattr(local, "discard_problem", refuse)
    with pytest.raises(UserError, match="workload 'randtrim': rw randtrim trims, and /dev/loop9"):
        local.check_discards(resolved.scenario, {"data": _target("block")})
    assert asked == [(Path("/dev/loop9"), True)]
    reads = resolve(adhoc_source("randread"))
    local.check_discards(reads.scenario, {"data": _target("block")})  # nothing to ask
    assert len(asked) == 1


def test_an_ad_hoc_trim_writes_its_working_set_first():
    for rw in ("trim", "randtrim", "trimwrite", "randtrimwrite"):
        phases = resolve(adhoc_source(rw)).scenario.phases
        assert [p.kind.value for p in phases] == ["prefill", "measure"], rw
    assert resolve(adhoc_source("trim")).scenario.phases[-1].headline is Metric.BYTES_PER_S


def _trimwrite_phase():
    scope = builders.scope(np.full(5, 2000.0))
    write = dataclasses.replace(scope.totals[ALL], ddir="write", iops=1000.0, ios=5000)
    trim = dataclasses.replace(
        scope.totals[ALL], ddir="trim", iops=1000.0, ios=5000, lat_mean_ns=2e5
    )
    scope = dataclasses.replace(scope, totals={**scope.totals, "write": write, "trim": trim})
    return builders.phase("randtrimwrite", np.full(5, 2000.0), scopes=(scope,))


def test_a_phase_that_trims_shows_each_direction_on_its_own():
    summary = summarize_phase(_trimwrite_phase())
    assert [d.ddir for d in summary.directions] == ["write", "trim"]
    (table,) = direction_tables([summary])
    assert [row[:3] for row in table.rows] == [
        ("randtrimwrite (IOPS)", "write", "1.00K"),
        ("randtrimwrite (IOPS)", "trim", "1.00K"),
    ]
    assert table.rows[1][4] == "200.0 µs"
    assert [d["ddir"] for d in phase_dict(summary)["directions"]] == ["write", "trim"]
    # a phase without trims keeps the tables and JSON it always had
    plain = summarize_phase(builders.phase("randread", np.full(5, 2000.0)))
    assert direction_tables([plain]) == [] and len(summary_tables([plain])) == 2
    assert "directions" not in phase_dict(plain)
