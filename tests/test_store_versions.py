"""Databases written by earlier iorig versions upgrade and read back.

``tests/data/schema-vN/results.sqlite`` were written by the iorig of each
earlier schema version (v1: commit 67e5ed4, an ad-hoc run and a steady-state
warm-up; v2: commit 716f9f7, adding a sweep and a knee search; v3: commit
41b835e, an ad-hoc randrw run and a run whose iorig was killed mid-way, left
`running` without an owner start time; v4: commit b74e587, an ad-hoc run and
a quick peak run, from before phases stored their events; v5: commit b035f38,
an ad-hoc randread run with a `mark` event at 4 s and an ad-hoc randrw run,
from before phases stored their I/O errors; v6: commit 5af065e, an ad-hoc
randread run and a labelled ad-hoc randrw run, from before runs stored the
system under test — every golden since then has an empty `sut`; v7: commit
67f437d, an ad-hoc randread run labelled v7-read and an ad-hoc randrw run
repeated twice, from before phases stored their precision and runs their A/B
link — every golden since then has `precision: null` per phase and `run.ab:
null`; v8: commit 542d934, an ad-hoc randread run labelled v8-read and an
ad-hoc randrw run until precise (±20 %), from before phases stored the CPU
iorig measured fio using — every golden since then has `generator_cpu:
null` per phase; v9: commit b63b5de, an ad-hoc randread run labelled
v9-read with a note and a `mark` event, and an ad-hoc randrw run until
precise (±20 %), from before payloads lost their version envelopes); the
JSON next
to each is its run as this iorig reads it after upgrading (checked field by
field against what the writing iorig's own `show --json` printed when the
goldens were made). Any change to the schema, the payload codecs or the
analysis that alters what an old run says shows up here.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

import pytest

from iorig.analyze.analysis import analyse
from iorig.cli.refs import resolve_run_id
from iorig.errors import UserError
from iorig.model import Disclosure, InterfaceLimit
from iorig.report.exporters import render
from iorig.store import Store, codecs, import_runs
from iorig.store.schema import LATEST

DATA = Path(__file__).resolve().parent / "data"
VERSIONS = sorted(DATA.glob("schema-v*"))


def test_every_earlier_schema_version_has_a_database():
    assert [int(p.name.removeprefix("schema-v")) for p in VERSIONS] == list(range(1, LATEST))


@pytest.mark.parametrize("folder", VERSIONS, ids=lambda p: p.name)
def test_an_old_database_upgrades_and_reads_back_to_its_golden_json(folder, tmp_path):
    copy = tmp_path / "results.sqlite"
    shutil.copy(folder / "results.sqlite", copy)
    old_version = sqlite3.connect(copy).execute("PRAGMA user_version").fetchone()[0]
    assert old_version == int(folder.name.removeprefix("schema-v"))
    goldens = sorted(folder.glob("*.json"))
    assert goldens
    with Store(copy) as store:
        assert store.schema_version == LATEST
        assert sorted(store.run_ids()) == sorted(p.stem for p in goldens)
        for golden in goldens:
            run_id = resolve_run_id(store, golden.stem)
            doc = json.loads(
                render("json", analyse(store.load_run(run_id), store.job_texts(run_id)))
            )
            assert doc == json.loads(golden.read_text()), golden.name
    # the upgraded file keeps working as a current one: a second open changes nothing
    with Store(copy) as store:
        assert store.schema_version == LATEST


LIMIT = {"bytes_per_s": 3.94e9, "source": "nvme0n1"}
V1_DISCLOSURE = {"cpu": {"model": "x"}, "interface_limit": LIMIT}


def _with_v1_disclosure(tmp_path: Path) -> tuple[Path, str]:
    """The schema-v9 fixture with one run's disclosure as payload version 1
    wrote it (the interface limit among the sections)."""
    copy = tmp_path / "v9.sqlite"
    shutil.copy(DATA / "schema-v9" / "results.sqlite", copy)
    conn = sqlite3.connect(copy)
    (run_id,) = conn.execute("SELECT id FROM runs ORDER BY id LIMIT 1").fetchone()
    envelope = json.dumps({"version": 1, "data": V1_DISCLOSURE})
    with conn:
        conn.execute("UPDATE runs SET disclosure_json = ? WHERE id = ?", (envelope, run_id))
    conn.close()
    return copy, run_id


EXPECTED = Disclosure({"cpu": {"model": "x"}}, InterfaceLimit(3.94e9, "nvme0n1"))


def test_a_payload_shape_change_is_a_schema_migration(tmp_path):
    """Version 10 takes every payload out of its envelope and gives a
    version-1 disclosure version 2's shape: in the upgraded database, and
    in a bundle of version 9 read in place."""
    copy, run_id = _with_v1_disclosure(tmp_path)
    bundle = tmp_path / "bundle.sqlite"
    shutil.copy(copy, bundle)
    with Store(copy) as store:
        assert store.load_run(run_id).run.disclosure == EXPECTED
        stored = store.conn.execute(
            "SELECT disclosure_json, sut_json FROM runs WHERE id = ?", (run_id,)
        ).fetchone()
    assert json.loads(stored[0]) == {
        "sections": {"cpu": {"model": "x"}},
        "interface_limit": V1_DISCLOSURE["interface_limit"],
    }
    assert "version" not in json.loads(stored[1])  # the data alone
    with Store(tmp_path / "into.sqlite") as store:
        imported = dict(import_runs(store, bundle))
        assert imported[run_id] is True
        assert store.load_run(run_id).run.disclosure == EXPECTED
    assert sqlite3.connect(bundle).execute("PRAGMA user_version").fetchone()[0] == 9


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[1, 2", "not JSON"),
        ('{"version": 1, "data": {}}', "unexpected content"),  # an envelope is not data
        ('{"sections": [1]}', "unexpected content"),
    ],
)
def test_bad_payloads_are_refused_by_name(text, message):
    with pytest.raises(codecs.PayloadError, match=message):
        codecs.DISCLOSURE.decode(text)


def test_a_run_whose_payload_is_not_iorigs_is_refused_clearly(tmp_path):
    copy = tmp_path / "results.sqlite"
    shutil.copy(VERSIONS[-1] / "results.sqlite", copy)
    with Store(copy) as store:
        run_id = store.run_ids()[0]
        store.conn.execute("UPDATE runs SET hosts_json = ? WHERE id = ?", ("[1, 2", run_id))
        with pytest.raises(UserError, match=f"run {run_id}: hosts: not JSON"):
            store.load_run(run_id)


@pytest.mark.parametrize("text", ["[1e999]", "[-1]", '["1"]', "[true]", "{}"])
def test_a_stored_figure_is_a_finite_number_not_negative(text):
    """The decoders check every figure of their payload as the model checker
    checks the plain columns' (an import checks each field once)."""
    with pytest.raises(codecs.PayloadError, match="steady-state rounds"):
        codecs.ROUNDS.decode(text)
    assert codecs.ROUNDS.decode("[0, 1.5, NaN]")[:2] == (0.0, 1.5)
