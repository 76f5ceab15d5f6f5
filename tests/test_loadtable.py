"""`iorig ort` on SPEC's Performance table as SPEC prints it: seed 004's text
as copied (one line, line breaks lost; tests/data/spec-004-performance.txt),
the same table with SPEC's line layout, and CSV; bad tables refused naming
the line."""

from __future__ import annotations

import io
import sys
from pathlib import Path

import pytest
from tests.test_cli_outputs import iorig
from tests.test_loadpoints import SEED, SEED_ORT

from iorig.analyze.loadpoints import ort_of
from iorig.analyze.loadtable import is_spec_text, parse_load_table, parse_spec_text
from iorig.errors import UserError

SEED_TEXT = Path(__file__).resolve().parent / "data" / "spec-004-performance.txt"

# SPEC's own text layout of the same table (the .txt report, line breaks kept)
LINES = "\n".join(
    [
        "Performance",
        "===========",
        "",
        "     Business      Average",
        "      Metric       Latency       AI_Jobs       AI_Jobs",
        "    (AI_Jobs)       (msec)       Ops/Sec        MB/Sec",
        " ------------  ------------  ------------  ------------",
        *(f"{job:>13}{lat:>14}{ops:>14}{mb:>14}" for job, lat, ops, mb in SEED),
        "",
        "=" * 79,
        "",
        "Product and Test Information",
        "============================",
    ]
)


def _figures(rows) -> list[tuple[float, float, float]]:
    return [(r.load, r.lat_mean_ms, r.ops_per_s) for r in rows]


def test_seed_004_as_copied_gives_its_overall_response_time():
    text = SEED_TEXT.read_text()
    assert "\n" not in text.strip()  # the whole report on one line, as the seed has it
    table = parse_load_table(text, "seed")
    assert _figures(table.rows) == [(job, lat, ops) for job, lat, ops, _ in SEED]
    assert ort_of(table.rows) == pytest.approx(SEED_ORT)
    assert f"{ort_of(table.rows):.2f}" == "1.93"  # from the table's rounded latencies
    assert table.published_ort_ms == 1.94  # SPEC's, from unrounded figures


def test_spec_line_layout_reads_the_same_rows_with_their_lines():
    table = parse_load_table(LINES, "report.txt")
    assert _figures(table.rows) == [(job, lat, ops) for job, lat, ops, _ in SEED]
    assert [r.line for r in table.rows] == list(range(8, 18))
    assert table.published_ort_ms is None


def test_csv_is_still_a_csv():
    text = "AI_Jobs,latency ms,ops/s\n" + "\n".join(f"{j},{la},{o}" for j, la, o, _ in SEED)
    assert not is_spec_text(text)
    assert ort_of(parse_load_table(text, "t.csv").rows) == pytest.approx(SEED_ORT)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            LINES.replace("  2.1  ", "  2,1  "),
            "report.txt line 15: load point 8: latency ms '2,1' is not a number",
        ),
        (
            LINES.replace("        104413", ""),
            "report.txt line 15: load point 8 has 3 values where the table has 4",
        ),
        (
            LINES.replace(" ------------  ------------", " ------------  ==="),
            "report.txt line 7: the header is not followed by its four dashed rules",
        ),
        (LINES.replace("(msec)", "(usec)"), "report.txt line 4: no SPEC Performance table header"),
        (
            "\n".join(LINES.splitlines()[:7]) + "\n\nnothing\n",
            "report.txt line 7: no load points under the table's header",
        ),
        (
            SEED_TEXT.read_text().replace("300 10.6 130495 29339 ===", "300 10.6 ==="),
            "report.txt line 1: load point 10 has only 3 values where the table has 4",
        ),
        (
            SEED_TEXT.read_text().replace("300 10.6 130495", "300 10.6 130,495"),
            "report.txt line 1: load point 10: ops/s '130,495' is not a number",
        ),
    ],
)
def test_bad_tables_are_refused_naming_the_line(text, message):
    with pytest.raises(UserError) as err:
        parse_spec_text(text, "report.txt")
    assert err.value.message.startswith(message), err.value.message


def test_ort_command_on_the_seed_text_and_on_standard_input(tmp_path, monkeypatch, capsys):
    db = tmp_path / "r.sqlite"
    code, out, err = iorig(db, monkeypatch, capsys, "ort", str(SEED_TEXT))
    assert code == 0, err
    assert "overall response time: 1.93 ms over 10 points (published: 1.94 ms)" in out
    monkeypatch.setattr(sys, "stdin", io.StringIO(LINES))
    code, out, err = iorig(db, monkeypatch, capsys, "ort", "-")
    assert code == 0, err
    assert "overall response time: 1.93 ms over 10 points" in out
    assert "not a valid SPEC" not in out
    (tmp_path / "bin.txt").write_bytes(b"\xff\xfe load")
    code, _, err = iorig(db, monkeypatch, capsys, "ort", str(tmp_path / "bin.txt"))
    assert code == 2 and "is not UTF-8 text" in err


def test_ort_shows_rates_in_full_and_names_a_point_whose_rate_fell(tmp_path, monkeypatch, capsys):
    """Issue 49: ``ort`` printed "1.01212e+06 ops/s" and said nothing when a
    point achieved fewer ops/s than the one before (SPEC's rule adds the
    area of that fall too)."""
    table = tmp_path / "t.csv"
    table.write_text(
        "load,latency_ms,ops_per_s\n1,0.5,500000\n2,0.8,1012120\n3,1.9,1500000\n4,6.0,1400000\n"
    )
    code, out, err = iorig(tmp_path / "r.sqlite", monkeypatch, capsys, "ort", str(table))
    assert code == 0, err
    assert "1012120" in out.replace(",", "").replace(" ", "") and "e+06" not in out
    assert "1,012,120" in out
    flat = " ".join(out.split())
    assert "point 4 (load 4) achieved 1,400,000 ops/s, fewer than point 3's 1,500,000" in flat
    # the rate rising all the way: nothing to say
    table.write_text("load,latency_ms,ops_per_s\n1,0.5,500\n2,0.8,1000\n")
    code, out, err = iorig(tmp_path / "r.sqlite", monkeypatch, capsys, "ort", str(table))
    assert code == 0 and "fewer than" not in out, out
