"""Load-point tables for `iorig ort`: a CSV, or the Performance table of a
SPECstorage Solution 2020 full disclosure report as SPEC prints it.

SPEC's text report prints the table under a header spread over three lines::

         Business      Average
          Metric       Latency       AI_Jobs       AI_Jobs
        (AI_Jobs)       (msec)       Ops/Sec        MB/Sec
     ------------  ------------  ------------  ------------
               30           0.7         13051          2935

Copied from a web page the line breaks are often lost and the whole report is
one line (seed 004). Both read the same: the header is matched word by word,
whatever the whitespace between the words, and the rows follow the four
dashed rules — one per line when the table has line breaks, else every four
numbers.
"""

from __future__ import annotations

import math
import re
from bisect import bisect_right
from dataclasses import dataclass

from iorig.analyze.loadpoints import LoadRow, parse_table_csv
from iorig.errors import UserError

# the header's words in reading order; NAME is the business metric (AI_Jobs, Builds …)
_HEADER = (
    r"business",
    r"average",
    r"metric",
    r"latency",
    r"\S+",
    r"\S+",
    r"\(\S+\)",
    r"\(msec\)",
    r"ops/sec",
    r"mb/sec",
)
_RULE = re.compile(r"-{3,}")
_NUMBER = re.compile(r"[0-9]+(?:\.[0-9]*)?|\.[0-9]+")
_ORT = re.compile(r"Overall\s+Response\s+Time\s*=\s*([0-9]+(?:\.[0-9]+)?)\s*msec", re.I)
_COLUMNS = ("load", "latency ms", "ops/s", "MB/s")
_SPEC_HINT = (
    "copy SPEC's Performance table from 'Business Metric' down to its last row, or give a "
    "CSV with columns load, latency_ms and ops_per_s"
)


@dataclass(frozen=True)
class LoadTable:
    rows: list[LoadRow]
    published_ort_ms: float | None  # "Overall Response Time = 1.94 msec" when the text has it


@dataclass(frozen=True)
class _Token:
    text: str
    line: int


def is_spec_text(text: str) -> bool:
    """A SPEC report (its Performance table's header), not a CSV: in either
    layout the header reads Business, Average, Metric, Latency word by word."""
    return re.search(r"\bBusiness\s+Average\s+Metric\s+Latency\b", text, re.I) is not None


def parse_load_table(text: str, source: str) -> LoadTable:
    """A load-point table in either form: SPEC's text or a CSV."""
    if is_spec_text(text):
        return parse_spec_text(text, source)
    return LoadTable(parse_table_csv(text, source), None)


def _tokens(text: str) -> list[_Token]:
    starts = [0] + [m.end() for m in re.finditer("\n", text)]
    return [_Token(m[0], bisect_right(starts, m.start())) for m in re.finditer(r"\S+", text)]


def _find_header(tokens: list[_Token], source: str) -> int:
    """Index of the first token after the header."""
    n = len(_HEADER)
    for i, token in enumerate(tokens):
        if token.text.lower() != "business":
            continue
        words = tokens[i : i + n]
        if len(words) == n and all(
            re.fullmatch(p, w.text, re.I) for p, w in zip(_HEADER, words, strict=True)
        ):
            return i + n
    business = next((t for t in tokens if t.text.lower() == "business"), None)
    where = f" line {business.line}" if business else ""
    raise UserError(
        f"{source}{where}: no SPEC Performance table header (Business Metric, Average "
        "Latency (msec), Ops/Sec, MB/Sec)",
        hint=_SPEC_HINT,
    )


def _value(token: _Token, column: str, row: int, source: str) -> float:
    if not _NUMBER.fullmatch(token.text):
        raise UserError(
            f"{source} line {token.line}: load point {row}: {column} {token.text!r} "
            "is not a number",
            hint="each row is four plain numbers: load, latency ms, ops/s, MB/s",
        )
    value = float(token.text)
    if not math.isfinite(value):
        raise UserError(f"{source} line {token.line}: load point {row}: {column} is too large")
    return value


def _row(cells: list[_Token], row: int, source: str) -> LoadRow:
    load, lat, ops, _mb = (_value(t, c, row, source) for t, c in zip(cells, _COLUMNS, strict=True))
    return LoadRow(cells[0].line, load, lat, ops)


def _rows_by_line(tokens: list[_Token], source: str) -> list[LoadRow]:
    """One row per line; the table ends at the first line that does not start
    with a number (the ===== rule, the next heading)."""
    lines: dict[int, list[_Token]] = {}
    for token in tokens:
        lines.setdefault(token.line, []).append(token)
    rows: list[LoadRow] = []
    for line, cells in lines.items():
        if not _NUMBER.fullmatch(cells[0].text):
            break
        if len(cells) != len(_COLUMNS):
            raise UserError(
                f"{source} line {line}: load point {len(rows) + 1} has {len(cells)} values "
                f"where the table has {len(_COLUMNS)} (load, latency ms, ops/s, MB/s)",
                hint="copy the table whole, one load point per line",
            )
        rows.append(_row(cells, len(rows) + 1, source))
    return rows


def _rows_in_one_line(tokens: list[_Token], source: str) -> list[LoadRow]:
    """Line breaks lost: every four numbers are a row, until a word."""
    rows: list[LoadRow] = []
    i = 0
    while i < len(tokens) and _NUMBER.fullmatch(tokens[i].text):
        cells = tokens[i : i + len(_COLUMNS)]
        if len(cells) < len(_COLUMNS):
            raise UserError(
                f"{source} line {tokens[i].line}: load point {len(rows) + 1} has only "
                f"{len(cells)} values where the table has {len(_COLUMNS)}",
                hint=_SPEC_HINT,
            )
        rows.append(_row(cells, len(rows) + 1, source))
        i += len(_COLUMNS)
    return rows


def parse_spec_text(text: str, source: str) -> LoadTable:
    """The Performance table of a SPECstorage 2020 report, in run order."""
    tokens = _tokens(text)
    start = _find_header(tokens, source)
    rules = tokens[start : start + len(_COLUMNS)]
    if len(rules) < len(_COLUMNS) or not all(_RULE.fullmatch(t.text) for t in rules):
        line = rules[0].line if rules else tokens[start - 1].line
        raise UserError(
            f"{source} line {line}: the header is not followed by its four dashed rules",
            hint=_SPEC_HINT,
        )
    body = tokens[start + len(_COLUMNS) :]
    one_line = bool(body) and body[0].line == rules[-1].line
    rows = _rows_in_one_line(body, source) if one_line else _rows_by_line(body, source)
    if not rows:
        raise UserError(
            f"{source} line {rules[-1].line}: no load points under the table's header",
            hint=_SPEC_HINT,
        )
    published = _ORT.search(text)
    return LoadTable(rows, float(published[1]) if published else None)
