"""Training and checkpoint runs rendered from a recorded database
(tests/data/training/record.sh: a quick accelerators search, two runs of
one accelerator, two checkpoint runs): every output states the result as
MLPerf Storage does, with units, and compare says which storage keeps more."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from tests.conftest import DATA, CliResult

from iorig.analyze.analysis import analyse
from iorig.report.writers.disclosure import disclosure_context
from iorig.report.writers.html import ReportRun, search_charts
from iorig.store import Store
from iorig.units import format_bytes

RECORDED = DATA / "training" / "results.sqlite"


@pytest.fixture
def db(tmp_path: Path) -> Path:
    copy = tmp_path / "results.sqlite"
    shutil.copyfile(RECORDED, copy)
    return copy


@pytest.fixture
def _cli(cli):
    def run(db: Path, *args: str) -> CliResult:
        return cli(db, *args, columns=250, check=False)

    return run


def test_show_states_the_training_result_with_both_units(_cli, db):
    out = _cli(db, "show", "one-a").stdout
    assert "Training result (MLPerf Storage-like; not an MLPerf Storage result)" in out
    row = next(line for line in out.splitlines() if line.startswith("│ unet3d"))
    assert "H100" in row and "MB/s" in row and "MiB/s" in row and "PASS" in row
    assert "verdict: PASS" in out
    doc = json.loads(_cli(db, "show", "one-a", "--json").stdout)
    (t,) = doc["training"]
    # what the accelerators consumed, in bytes/s, as both units show it
    assert f"{t['bytes_per_s'] / 1e6:.1f} MB/s" in row
    assert f"{t['bytes_per_s'] / 2**20:.1f} MiB/s" in row


def test_the_search_shows_every_count_its_answer_and_a_chart(_cli, db):
    out = _cli(db, "show", "search").stdout
    table = out[out.index("Accelerators search") :]
    counts = [int(line.split("│")[1]) for line in table.splitlines() if line.startswith("│ ")]
    doc = json.loads(_cli(db, "show", "search", "--json").stdout)
    search = doc["search"]
    assert counts == [p["accelerators"] for p in search["points"]] == [1, 2, 4, 8, 16]
    # every count passed up to the search's limit (32 reader jobs a CPU): a lower bound
    assert search["most"] == 16
    assert "at least 16" in table and "the search's limit" in table
    assert doc["verdict"] == "PASS at accelerators=16 per host (at least: the search's limit)"
    with Store(db) as store:
        (run_id,) = [r for r in store.run_ids() if store.load_run(r).run.name == "search"]
        analysis = analyse(store.load_run(run_id))
    charts = search_charts([ReportRun(analysis, "search")])
    (chart,) = [c for c in charts if c["id"] == "search-accelerators"]
    lowest, mean, floor = chart["data"]
    assert lowest["x"] == mean["x"] == counts and floor["y"] == [90.0, 90.0]
    assert lowest["y"] == pytest.approx([p["au_min"] * 100 for p in search["points"]])
    # the search's details are its answer's: one epoch table, of 16 accelerators
    assert out.count("Training epochs") == 1


def test_a_searchs_data_set_is_each_counts_own(_cli, db):
    """Each count writes its own data set: the header gave the plan's, the
    first count's (19.7MiB for 1 to 16 accelerators, issue 49); each count's
    is what its data generation wrote, in the search's table."""
    out = _cli(db, "show", "search").stdout
    doc = json.loads(_cli(db, "show", "search", "--json").stdout)
    (target,) = [line for line in out.splitlines() if line.startswith("target")]
    assert target.endswith("(fileset, a data set per count)"), target
    written = {
        p["phase"].partition(":")[2]: p["io_bytes"]
        for p in doc["timed_phases"]
        if p["phase"].startswith("datagen:")
    }
    table = out[out.index("Accelerators search") :]
    for point in doc["search"]["points"]:
        wrote = written[f"accelerators={point['accelerators']}"]
        assert point["dataset_bytes"] == wrote
        row = next(
            line
            for line in table.splitlines()
            if [c.strip() for c in line.split("│")[1:2]] == [str(point["accelerators"])]
        )
        assert f" {format_bytes(wrote)} " in row, row


def test_checkpoint_result_and_each_checkpoint(_cli, db):
    out = _cli(db, "show", "ckpt-a").stdout
    assert "Checkpoint result" in out and "GiB/s" in out and "GB/s" in out
    doc = json.loads(_cli(db, "show", "ckpt-a", "--json").stdout)["checkpoint"]
    for op in ("write", "read"):
        levels = [c["bytes_per_s"] for c in doc[op]["checkpoints"]]
        assert len(levels) == 3
        assert doc[op]["mean_bytes_per_s"] == pytest.approx(sum(levels) / 3)
        low, high = doc[op]["interval"]
        assert low <= doc[op]["mean_bytes_per_s"] <= high
        for c in doc[op]["checkpoints"]:
            assert c["bytes_per_s"] == pytest.approx(c["io_bytes"] / c["slowest_s"])


def test_compare_says_which_storage_keeps_more_accelerators(_cli, db):
    out = _cli(db, "compare", "one-a", "one-b").stdout
    assert "Training: accelerators kept at the floor" in out
    doc = json.loads(_cli(db, "compare", "one-a", "one-b", "--format", "json").stdout)
    (change,) = doc["training"]["changes"]
    assert change["label"] == "one-b" and change["change"] in ("same", "better", "worse")
    assert "at 1 accelerator per host" in change["sentence"]
    doc = json.loads(_cli(db, "compare", "ckpt-a", "ckpt-b", "--format", "json").stdout)
    assert {c["op"] for c in doc["checkpoints"]} == {"write", "read"}
    assert all(c["interval"] is not None for c in doc["checkpoints"])


def test_the_disclosure_page_leads_with_the_mlperf_style_result(db):
    with Store(db) as store:
        ids = {store.load_run(r).run.name: r for r in store.run_ids()}
        trained = disclosure_context(analyse(store.load_run(ids["one-a"])))
        checkpointed = disclosure_context(analyse(store.load_run(ids["ckpt-a"])))
    assert trained["headline"][0].title.startswith("Training result")
    assert checkpointed["headline"][0].title.startswith("Checkpoint result")
