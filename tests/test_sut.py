"""The system under test as the user describes it (issue 16): the --sut
schema and its template, file:line errors before anything runs, merging
over a scenario's sut: section, and a real run's description round trip
(store → show/report/export/import → compare), the full-disclosure page in
a headless Chromium included."""

from __future__ import annotations

import json
import re
import shutil
import sqlite3
from pathlib import Path

import pytest
from tests.browser import dump_dom
from tests.conftest import REPO, CliResult, chromium_or_skip, run_iorig

from iorig.errors import UserError
from iorig.model import SutRecord
from iorig.model.sut import NOT_DISCLOSED, describe, disclosure_tables, flat_description
from iorig.scenario import loading as scenario_mod
from iorig.scenario.sut import check_notes, check_template, load_sut_file, merged, template
from iorig.store import codecs

EVIL = '<script>window.pwned=1</script> & "q" <a href="https://example.com/x">l</a>'


def _cli(db: Path, *args: str, check: bool = True) -> CliResult:
    return run_iorig(db, *args, columns=200, check=check)


def _write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


# ------------------------------------------------------------ schema


def test_the_template_validates_and_fills_every_section():
    model = check_template()
    record = SutRecord(describe(model))
    assert [t.title for t in disclosure_tables(record) if t.missing] == ["Run notes (--note)"]
    assert template().startswith("# iorig system-under-test description")


def test_the_printed_template_passes_sut_check(tmp_path):
    printed = _cli(tmp_path / "db.sqlite", "sut", "template").stdout
    path = _write(tmp_path / "sut.yaml", printed)
    assert (
        "a valid system-under-test description"
        in _cli(tmp_path / "db", "sut", "check", str(path)).stdout
    )


@pytest.mark.parametrize(
    ("text", "line", "message"),
    [
        ("test:\n  tested_by: me\n  colour: red\n", 3, "test.colour: unknown field 'colour'"),
        (
            "tuning:\n  software:\n    - parameter: x\n      valeu: 3\n",
            4,
            "tuning.software[0].valeu: unknown field",
        ),
        ("storage:\n  filesystems: many\n", 2, "storage.filesystems"),
        ("bill_of_materials:\n  - quantity: -1\n", 2, "bill_of_materials[0].quantity"),
        ("sut:\n  network:\n    transport:\n      - mtu: 1.5e3x\n", 4, "mtu"),
        ("product: [1, 2\n", 2, "not valid YAML"),
    ],
)
def test_a_bad_sut_file_names_file_line_and_field(tmp_path, text, line, message):
    path = _write(tmp_path / "bad.yaml", text)
    with pytest.raises(UserError) as caught:
        load_sut_file(path)
    assert re.search(rf"bad\.yaml:{line}\b", str(caught.value)), caught.value
    assert message in str(caught.value)


def test_a_scenario_sut_section_is_validated_with_file_and_line():
    text = (
        "name: s\ntitle: t\nphases:\n  - name: m\n    kind: measure\n    duration: 1s\n"
        "    workloads:\n      - rw: randread\nsut:\n  product:\n    nam: x\n"
    )
    with pytest.raises(UserError, match=r"s\.yaml:11: sut\.product\.nam: unknown field"):
        scenario_mod.resolve(
            scenario_mod.ScenarioSource(text, "s.yaml", scenario_mod.load_yaml(text, "s.yaml"))
        )


def test_the_sut_file_merges_over_the_scenario_section():
    base = {
        "test": {"tested_by": "lab", "date_tested": "2026-11"},
        "tuning": {"software": [{"parameter": "cache", "value": "on"}]},
    }
    over = {"test": {"tested_by": "me"}, "tuning": {"software": [{"parameter": "x"}]}}
    assert merged(base, over) == {
        "test": {"tested_by": "me", "date_tested": "2026-11"},  # mappings merge by key
        "tuning": {"software": [{"parameter": "x"}]},  # lists are replaced
    }


@pytest.mark.parametrize("note", ["", "  ", "x" * 5000, "bell\x07"])
def test_bad_notes_are_refused(note):
    with pytest.raises(UserError, match="--note"):
        check_notes([note])


def test_unfilled_fields_are_not_disclosed_and_differences_name_the_parameter():
    a = SutRecord({"tuning": {"software": [{"parameter": "cache", "value": "on"}]}}, ("n",))
    tables = {t.title: t for t in disclosure_tables(a)}
    assert tables["Bill of materials"].missing
    assert tables["Configuration and tuning: software"].rows == (
        (NOT_DISCLOSED, "cache", "on", NOT_DISCLOSED),
    )
    assert flat_description(a) == {"cache": "on", "note 1": "n"}


def test_tuning_that_was_given_is_never_listed_as_not_disclosed():
    # seen: tuning.software given, and the disclosure said "not disclosed:
    # Configuration and tuning" (its notes were not given)
    from iorig.report.tables.sut import sut_tables, undisclosed

    record = SutRecord(
        {"tuning": {"software": [{"component": "filer", "parameter": "cache", "value": "off"}]}}
    )
    missing = undisclosed(record)
    assert not [
        m
        for m in missing
        if m in ("Configuration and tuning", "Configuration and tuning: software")
    ], missing
    # what was left out of it is named
    assert "Configuration and tuning: hardware" in missing
    assert "Configuration and tuning: hardware notes, software notes" in missing
    titles = [t.title for t in sut_tables(record)]
    assert "Configuration and tuning: software" in titles
    assert not any(t.startswith("Configuration and tuning (") for t in titles), titles
    # a section given nothing at all is still named once, as a whole
    assert "Storage and filesystems" in missing
    assert not [m for m in missing if m.startswith("Storage and filesystems:")], missing


def test_plain_show_names_the_system_under_test_and_the_notes_briefly():
    # seen: --sut and --note showed only with --disclosure
    import numpy as np
    from tests import builders

    from iorig.analyze.analysis import analyse
    from iorig.report.exporters import render

    described = SutRecord(
        {
            "product": {"name": "Example Filer", "version": "4.1"},
            "tuning": {"software": [{"parameter": "cache", "value": "off"}]},
            "storage": {"stable_storage": "NVMe only"},
        },
        ("firmware 2.1", "write cache off"),
    )
    phases = [builders.phase("random-read", np.full(10, 1000.0))]
    text = render("text", analyse(builders.stored("a1", None, phases, sut=described)))
    lines = {line.split("  ")[0]: line.rstrip() for line in text.splitlines()}
    assert lines["system under test"].split(None, 3)[3] == (
        "Example Filer 4.1; described: product, tuning, storage (all: show --disclosure)"
    )
    assert lines["notes"].endswith("firmware 2.1; write cache off")
    # a run described by notes alone, and one not described: nothing made up
    notes_only = render(
        "text", analyse(builders.stored("a2", None, phases, sut=SutRecord({}, ("first try",))))
    )
    assert "system under test" not in notes_only and "first try" in notes_only
    bare = render("text", analyse(builders.stored("a3", None, phases)))
    assert "system under test" not in bare and "notes" not in bare


@pytest.mark.parametrize(
    ("data", "problem"),
    [
        ({"description": {"cach": 1}, "notes": []}, "cach"),
        ({"description": {"bill_of_materials": [{"quantity": "4"}]}, "notes": []}, "quantity"),
        ({"description": {}, "notes": [3]}, "note"),
        ({"description": {}}, "description, notes"),
        ({"description": {"notes": "x" * 20_000}, "notes": []}, "notes"),
    ],
)
def test_a_stored_description_is_decoded_strictly(data, problem):
    with pytest.raises(codecs.PayloadError, match="system under test") as caught:
        codecs.SUT.decode(json.dumps(data))
    assert problem in str(caught.value)


# ------------------------------------------------------------ before anything runs


@pytest.mark.system
@pytest.mark.parametrize(
    "args",
    [("--sut", "{bad}"), ("--note", ""), ("--sut", "{missing}")],
    ids=["bad-file", "empty-note", "missing-file"],
)
def test_a_bad_sut_fails_before_a_run_row_or_target_file_exists(tmp_path, args):
    bad = _write(tmp_path / "bad.yaml", "test:\n  tested_by: me\nprodcut: x\n")
    args = tuple(a.format(bad=bad, missing=tmp_path / "none.yaml") for a in args)
    db, data = tmp_path / "db.sqlite", tmp_path / "data"
    done = _cli(
        db,
        "run",
        "--rw",
        "randread",
        "--size",
        "16MiB",
        "--duration",
        "1s",
        "--target",
        f"{data}/",
        *args,
        check=False,
    )
    assert done.returncode == 2, done.stdout + done.stderr
    if args[1] == str(bad):
        assert f"{bad}:3: prodcut: unknown field" in done.stderr
    assert not data.exists()
    if db.exists():
        assert sqlite3.connect(db).execute("SELECT count(*) FROM runs").fetchone() == (0,)


# ------------------------------------------------------------ a real run's round trip


@pytest.fixture(scope="module")
def described_runs(tmp_path_factory) -> tuple[Path, Path]:
    """Two 1 s runs, described as the same system but for its cache."""
    base = tmp_path_factory.mktemp("sut")
    db = base / "results.sqlite"
    (REPO / ".test-scratch").mkdir(exist_ok=True)
    scratch = base / "data"
    sut = {
        "test": {"tested_by": EVIL, "date_tested": "2026-11"},
        "product": {"name": "Example Filer", "version": "4.1"},
        "bill_of_materials": [{"quantity": 4, "vendor": "Example", "model": "EF-1"}],
        "tuning": {"software": [{"component": "filer", "parameter": "cache", "value": "on"}]},
        "storage": {"stable_storage": "NVMe only; no volatile cache"},
    }
    first = _write(base / "a.yaml", json.dumps(sut))  # JSON is YAML
    sut["tuning"]["software"][0]["value"] = "off"
    second = _write(base / "b.yaml", json.dumps(sut))
    for path, note in ((first, "first try"), (second, "cache switched off")):
        _cli(
            db,
            "run",
            "--rw",
            "randread",
            "--size",
            "16MiB",
            "--duration",
            "1s",
            "--target",
            f"{scratch}/",
            "--sut",
            str(path),
            "--note",
            note,
        )
    return db, base


@pytest.mark.fio
def test_show_json_and_disclosure_carry_the_description(described_runs):
    db, _ = described_runs
    doc = json.loads(_cli(db, "show", "last~1", "--json").stdout)
    assert doc["sut"]["notes"] == ["first try"]
    assert doc["sut"]["description"]["tuning"]["software"][0]["value"] == "on"
    assert doc["sut"]["description"]["bill_of_materials"] == [
        {"quantity": 4, "vendor": "Example", "model": "EF-1"}
    ]
    disclosure = json.loads(_cli(db, "show", "last~1", "--disclosure", "--json").stdout)
    assert disclosure["sut"] == doc["sut"]
    text = _cli(db, "show", "last~1", "--disclosure").stdout
    for expected in (
        "System under test",
        "Example Filer",
        "first try",
        "cache",
        f"{NOT_DISCLOSED}: Component software",
    ):
        assert expected in text, expected


@pytest.mark.fio
def test_reports_include_the_description(described_runs):
    db, base = described_runs
    md = _cli(db, "report", "last", "--format", "md").stdout
    assert "**System under test**" in md and "| cache | off |" in md.replace("filer | ", "")
    assert f"- {NOT_DISCLOSED}: Component software" in md
    html_path = base / "report.html"
    _cli(db, "report", "last", "-o", str(html_path))
    html = html_path.read_text()
    assert "System under test, as described" in html and "Example Filer" in html
    assert "<script>window.pwned=1</script>" not in html


@pytest.mark.fio
def test_compare_lists_what_differs_in_the_description(described_runs):
    db, _ = described_runs
    out = _cli(db, "compare", "last~1", "last").stdout
    assert "system under test: filer/cache: on → off" in out
    assert "system under test: note 1: first try → cache switched off" in out
    doc = json.loads(_cli(db, "compare", "last~1", "last", "--format", "json").stdout)
    assert any("filer/cache: on → off" in d for d in doc["definition_differences"])


@pytest.mark.fio
def test_export_and_import_keep_the_description(described_runs, tmp_path):
    db, _ = described_runs
    bundle, other = tmp_path / "run.iorig", tmp_path / "other.sqlite"
    _cli(db, "export", "last", "-o", str(bundle))
    _cli(other, "import", str(bundle))
    before = json.loads(_cli(db, "show", "last", "--json").stdout)["sut"]
    after = json.loads(_cli(other, "show", "last", "--json").stdout)["sut"]
    assert after == before and after["notes"] == ["cache switched off"]


@pytest.mark.fio
def test_a_tampered_description_in_a_bundle_is_refused(described_runs, tmp_path):
    db, _ = described_runs
    bundle, other = tmp_path / "run.iorig", tmp_path / "other.sqlite"
    _cli(db, "export", "last", "-o", str(bundle))
    conn = sqlite3.connect(bundle)
    conn.execute(
        "UPDATE runs SET sut_json = ?",
        (json.dumps({"description": {"product": {"name": 7, "x": 1}}, "notes": []}),),
    )
    conn.commit()
    conn.close()
    done = _cli(other, "import", str(bundle), check=False)
    assert done.returncode != 0 and "system under test" in done.stderr, done.stderr


@pytest.mark.browser
def test_the_disclosure_page_in_headless_chromium(described_runs):
    db, base = described_runs
    browser = chromium_or_skip()
    page = base / "disclosure.html"
    _cli(db, "report", "last", "--disclosure", "-o", str(page))
    html = page.read_text()
    assert "<script" not in html  # no scripts at all: the CSP allows none
    order = [
        html.index(f'id="{s}"')
        for s in (
            "headline",
            "product",
            "bill-of-materials",
            "configuration",
            "load-generators",
            "audit",
            "job-files",
        )
    ]
    assert order == sorted(order), "sections out of seed 004's order"
    dom, console, _ = dump_dom(browser, page, base / "profile", budget_ms=5000)
    assert console == [], console  # no errors, no CSP violations
    for heading in (
        "Performance",
        "Product and test information",
        "Solution under test bill of materials",
        "Configuration and tuning",
        "Load generators, as iorig measured them",
        "Audit findings",
        "fio job files",
    ):
        assert f">{heading}</h2>" in dom, heading
    assert "Example Filer" in dom and "EF-1" in dom and "cache switched off" in dom
    assert "rw=randread" in dom  # the measure phase's job file
    assert dom.count(f">{NOT_DISCLOSED}<") >= 5  # what the tester left out
    assert "<script>window.pwned=1</script>" not in dom  # the tester's text stays text
    assert not re.search(r'<a [^>]*href="https://example.com/x"', dom)
    assert "&lt;script&gt;window.pwned=1&lt;/script&gt;" in dom
    shutil.rmtree(base / "profile", ignore_errors=True)
