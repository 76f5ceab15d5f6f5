"""The command line on hand-built runs (no fio): runs named by label wherever
a run is named, the guide's comparison examples as written, and the machine
formats — every JSON output's format_version, `show --json` holding what
`show` prints, and csv rows of one shape in show, report and compare."""

from __future__ import annotations

import csv
import io
import json
import shlex
import sys
from pathlib import Path

import numpy as np
import pytest
from tests import builders

from iorig import cli
from iorig.analyze.analysis import analyse
from iorig.cli import common
from iorig.model import Finding, Scope
from iorig.report.writers.jsoncsv import CSV_COLUMNS, FORMAT_VERSION, run_records
from iorig.store import Store

# the guide page whose examples of `iorig compare` are run as written
GUIDE = Path(__file__).resolve().parent.parent / "docs" / "guide" / "comparing.md"


def _level(level: float, seed: int) -> np.ndarray:
    return level + np.random.default_rng(seed).normal(0, level * 0.01, 20)


@pytest.fixture
def db(tmp_path) -> Path:
    """Two runs labelled host and vm (vm about 93 % of host), and an unlabelled third."""
    path = tmp_path / "results.sqlite"
    with Store(path) as store:
        store.add_runs(
            [
                builders.stored(
                    "aaaa00000001",
                    "host",
                    [builders.phase("random-read", _level(1000.0, 1))],
                    started_at=1.0,
                ),
                builders.stored(
                    "bbbb00000002",
                    "vm",
                    [builders.phase("random-read", _level(930.0, 2))],
                    started_at=2.0,
                ),
                builders.stored(
                    "cccc00000003",
                    "last-week",
                    [builders.phase("random-read", _level(500.0, 3))],
                    started_at=3.0,
                ),
            ]
        )
    return path


def iorig(db: Path, monkeypatch, capsys, *args: str) -> tuple[int, str, str]:
    """Run the command line in-process: (exit code, stdout, stderr)."""
    for console in (common.console, common.err_console):
        monkeypatch.setattr(console, "width", 10_000)
    monkeypatch.setattr(sys, "argv", ["iorig", "--db", str(db), *args])
    code: int | str | None = 0
    try:
        cli.main()
    except SystemExit as exc:
        code = exc.code
    out, err = capsys.readouterr()
    return int(code or 0), out, err


def _guide_command(prefix: str) -> list[str]:
    """The guide's example command that starts with ``prefix``, as a shell would split it."""
    for line in GUIDE.read_text().splitlines():
        if line.startswith(prefix):
            return shlex.split(line, comments=True)[1:]  # without `iorig`
    raise AssertionError(f"{GUIDE.name} has no example starting {prefix!r}")


def test_guide_compare_example_runs_as_written(db, monkeypatch, capsys):
    args = _guide_command("iorig compare host vm --as-percent-of host")
    assert args == ["compare", "host", "vm", "--as-percent-of", "host"]
    code, out, err = iorig(db, monkeypatch, capsys, *args)
    assert code == 0, err
    assert "vm as % of host" in out and "baseline: host (run aaaa00000001)" in out


@pytest.mark.parametrize("fmt", ["text", "md", "html"])
def test_guide_one_run_against_a_rating_runs_as_written(db, monkeypatch, capsys, fmt):
    args = _guide_command("iorig compare vm --limit 500kIOPS")
    assert args == ["compare", "vm", "--limit", "500kIOPS"]
    out_file = db.parent / f"one.{fmt}"
    extra = () if fmt == "text" else ("--format", fmt)
    if fmt == "html":  # compare prints; report writes the page
        args, extra = ["report", "vm", "--limit", "500kIOPS"], ("-o", str(out_file))
    code, out, err = iorig(db, monkeypatch, capsys, *args, *extra)
    assert code == 0, err
    text = out_file.read_text() if fmt == "html" else out
    # the phase mean of vm's seconds as built, over the rating
    share = float(np.mean(_level(930.0, 2))) / 500_000 * 100
    assert "Percent of the interface limit" in text and f"{share:.1f}%" in text, text[-2000:]


def test_one_run_without_a_limit_is_still_not_a_comparison(db, monkeypatch, capsys):
    code, _, err = iorig(db, monkeypatch, capsys, "compare", "vm")
    assert code == 2 and "one run and --limit" in err


@pytest.mark.parametrize(
    "args",
    [
        ("compare", "aaaa", "vm", "--as-percent-of", "host"),  # the same run by id and label
        ("compare", "last~2", "last~1", "--as-percent-of", "host"),
        ("compare", "vm", "--as-percent-of", "host"),  # the baseline need not be listed
        ("compare", "vm", "host", "--as-percent-of", "aaaa00000001"),
    ],
)
def test_the_baseline_is_matched_by_run_not_by_spelling(db, monkeypatch, capsys, args):
    code, out, err = iorig(db, monkeypatch, capsys, *args)
    assert code == 0, err
    assert "vm as % of host" in out


def test_a_label_names_a_run_in_every_command(db, monkeypatch, capsys, tmp_path):
    code, out, err = iorig(db, monkeypatch, capsys, "show", "vm", "--json")
    assert code == 0, err
    assert json.loads(out)["run"]["id"] == "bbbb00000002"
    code, out, err = iorig(
        db,
        monkeypatch,
        capsys,
        "report",
        "host",
        "vm",
        "--as-percent-of",
        "host",
        "--format",
        "csv",
    )
    assert code == 0, err
    assert [r["label"] for r in csv.DictReader(io.StringIO(out))] == ["host", "vm"]
    code, out, err = iorig(db, monkeypatch, capsys, "export", "host", "-o", str(tmp_path / "b"))
    assert code == 0 and "aaaa00000001" in out, err
    # a label that starts like `last~N` is still a label
    code, out, err = iorig(db, monkeypatch, capsys, "show", "last-week", "--json")
    assert code == 0 and json.loads(out)["run"]["id"] == "cccc00000003", err


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("compare", "host", "aaaa"), "the same run is given twice (host, aaaa)"),
        (("compare", "host", "--as-percent-of", "aaaa"), "no other run to show"),
        (("compare", "vm", "--as-percent-of", "nobody"), "'nobody' is neither a run id nor"),
        (("show", "lastly"), "'lastly' is not a run reference"),
    ],
)
def test_bad_run_names_are_refused_naming_them(db, monkeypatch, capsys, args, message):
    code, _, err = iorig(db, monkeypatch, capsys, *args)
    assert code == 2 and message in err


# --- machine formats -----------------------------------------------------------


@pytest.fixture
def two_hosts(tmp_path) -> Path:
    """A run on two hosts (h2 at half h1's rate) with an audit finding."""
    h1, h2 = _level(1000.0, 4), _level(500.0, 5)
    scopes = (
        builders.scope(h1 + h2),
        builders.scope(h1, where=Scope(host="h1")),
        builders.scope(h2, where=Scope(host="h2"), lat_ns=2e6),
    )
    finding = Finding("unstable", "random-read varies", "run longer", phase="random-read")
    run = builders.stored(
        "dddd00000004",
        "pair",
        [builders.phase("random-read", h1 + h2, scopes=scopes)],
        hosts=["h1", "h2"],
        warnings=(finding,),
    )
    path = tmp_path / "hosts.sqlite"
    with Store(path) as store:
        store.add_runs([run])
    return path


def test_show_json_has_the_per_host_table_and_the_findings(two_hosts, monkeypatch, capsys):
    code, text, err = iorig(two_hosts, monkeypatch, capsys, "show", "pair")
    assert code == 0, err
    assert "Per host" in text and "average per host" in text and "slowest h2" in text
    code, out, err = iorig(two_hosts, monkeypatch, capsys, "show", "pair", "--json")
    assert code == 0, err
    doc = json.loads(out)
    (phase,) = doc["per_host"]
    assert (phase["phase"], phase["repeat"], phase["metric"]) == ("random-read", 0, "iops")
    hosts = {h["host"]: h for h in phase["hosts"]}
    assert hosts["h1"]["level"] == pytest.approx(1000.0, rel=0.02)
    assert hosts["h2"]["level"] == pytest.approx(500.0, rel=0.02)
    assert hosts["h2"]["lat_mean_ns"] == 2e6 and hosts["h2"]["status"] == "ok"
    assert phase["average_per_host"] == pytest.approx(750.0, rel=0.02)
    assert (phase["spread"]["slowest"], phase["spread"]["fastest"]) == ("h2", "h1")
    assert doc["run"]["warnings"] == [
        {
            "code": "unstable",
            "message": "random-read varies",
            "advice": "run longer",
            "phase": "random-read",
            "severity": "warning",
        }
    ]
    assert "random-read varies" in text  # what show prints as the audit's finding
    assert doc["run"]["label"] == "pair"


def test_every_json_output_has_a_format_version(db, monkeypatch, capsys):
    for args in (
        ("show", "host", "--json"),
        ("show", "host", "--format", "json"),
        ("show", "host", "--disclosure", "--json"),
        ("runs", "--json"),
        ("compare", "host", "vm", "--format", "json"),
        ("report", "host", "--format", "json"),
        ("report", "host", "vm", "--format", "json"),
    ):
        code, out, err = iorig(db, monkeypatch, capsys, *args)
        assert code == 0, (args, err)
        assert json.loads(out)["format_version"] == FORMAT_VERSION, args


def _strict(text: str):
    def refuse(constant: str):
        raise AssertionError(f"{constant} is not JSON")

    return json.loads(text, parse_constant=refuse)


def test_json_outputs_are_strict_and_judge_a_per_host_requirement_per_host(
    tmp_path, monkeypatch, capsys
):
    # issue 26: `"limit": NaN` on a reported-only criterion made show --json
    # unreadable to strict parsers; and a per-host requirement is judged per host
    h1, h2 = _level(1000.0, 4), _level(500.0, 5)
    scopes = (
        builders.scope(h1 + h2),
        builders.scope(h1, where=Scope(host="h1")),
        builders.scope(h2, where=Scope(host="h2")),
    )
    criteria = [
        {"name": "IOPS per host", "metric": "iops", "min": 800.0, "per": "host"},
        {"name": "latency, reported", "metric": "lat_mean"},
    ]
    runs = [
        builders.stored(
            run_id,
            label,
            [builders.phase("random-read", h1 + h2, scopes=scopes)],
            hosts=["h1", "h2"],
            resolved={"criteria": criteria},
        )
        for run_id, label in (("eeee00000005", "first"), ("ffff00000006", "second"))
    ]
    db = tmp_path / "strict.sqlite"
    with Store(db) as store:
        store.add_runs(runs)
    for args in (
        ("show", "first", "--json"),
        ("show", "first", "--disclosure", "--json"),
        ("runs", "--json"),
        ("compare", "first", "second", "--format", "json"),
        ("report", "first", "--format", "json"),
    ):
        code, out, err = iorig(db, monkeypatch, capsys, *args)
        assert code == 0, (args, err)
        _strict(out)
    code, out, _ = iorig(db, monkeypatch, capsys, "show", "first", "--json")
    doc = _strict(out)
    rows = [(v["name"], v["host"], v["passed"]) for v in doc["verdicts"]]
    assert rows == [
        ("IOPS per host", "h1", True),
        ("IOPS per host", "h2", False),
        ("latency, reported", None, True),
    ]
    assert doc["verdicts"][2]["limit"] is None
    assert doc["verdict"] == "FAIL on h2"
    code, out, _ = iorig(db, monkeypatch, capsys, "show", "first")
    assert "Verdict: FAIL on h2" in out and "each host judged on its own share" in out


def test_csv_rows_have_one_shape_in_show_report_and_compare(db, monkeypatch, capsys):
    tables = {}
    for args in (
        ("show", "host", "--format", "csv"),
        ("report", "host", "--format", "csv"),
        ("report", "host", "vm", "--format", "csv"),
        ("compare", "host", "vm", "--format", "csv"),
    ):
        code, out, err = iorig(db, monkeypatch, capsys, *args)
        assert code == 0, (args, err)
        reader = csv.DictReader(io.StringIO(out))
        assert tuple(reader.fieldnames or ()) == CSV_COLUMNS, args
        tables[args] = list(reader)
    alone = tables[("report", "host", "--format", "csv")]
    assert alone == tables[("show", "host", "--format", "csv")]
    (row,) = alone
    assert (row["phase"], row["metric"], row["label"], row["baseline"]) == (
        "random-read",
        "iops",
        "host",
        "True",
    )
    assert row["verdict"] == "" and float(row["median"]) == pytest.approx(1000.0, rel=0.02)
    compared = tables[("compare", "host", "vm", "--format", "csv")]
    assert compared == tables[("report", "host", "vm", "--format", "csv")]
    # the run on its own is the comparison's baseline row, figure for figure
    assert compared[0] == row and compared[1]["verdict"] == "worse"


def test_csv_columns_are_the_record_keys():
    analysis = analyse(builders.stored("a1", None, [builders.phase("p", _level(10.0, 6))]))
    assert tuple(run_records(analysis)[0]) == CSV_COLUMNS
