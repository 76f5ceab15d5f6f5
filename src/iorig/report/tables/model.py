"""A table as every output format receives it: title, headers, text rows."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class TableModel:
    title: str
    headers: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    align: tuple[str, ...]  # "l", "c" or "r" per column
    notes: tuple[str, ...] = ()
    # per column, lower is kept longer when a narrow terminal cannot show them
    # all (empty: left to right); see report.fit
    priority: tuple[int, ...] = ()
    one_line: bool = False  # each row on one line: cells never wrap (the last one is cut)
