"""Fitting a table to a terminal's width without breaking a word.

rich squeezes a table that is too wide by folding its cells anywhere, words
included ("transaction / al"), and a column it cannot shrink is cut off at the
edge. Here the columns are sized before rich sees them: the least important
columns are left out until every kept column is at least as wide as its longest
word, then the widest columns give up their spare room (their cells wrap
between words). Pure: widths in, a smaller model and its column widths out."""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from rich.cells import cell_len

from iorig.report.tables.model import TableModel

# rich's boxed table: "│ " before each cell, " " after it, and the closing "│"
PER_COLUMN = 3
EDGE = 1
# the last column of a one-line table (a list of figures) is cut, with an
# ellipsis, down to this before a column is left out for it
ELASTIC_MIN = 12
# a number with its unit or sign: wrapped, "1.00 / ms" reads as two figures
FIGURE = re.compile(r"[-+≥≤~]?\s?\d")


@dataclass(frozen=True)
class Fitted:
    model: TableModel  # the kept columns, with a note naming those left out
    widths: tuple[int, ...] | None  # each kept column's width; None: its natural width


def longest_word(text: str) -> int:
    return max((cell_len(word) for word in text.split()), default=0)


def natural_widths(model: TableModel) -> list[int]:
    """Each column as wide as its widest cell or header line: nothing wraps."""
    return [
        max(
            (cell_len(line) for text in (header, *cells) for line in text.splitlines()),
            default=0,
        )
        for header, *cells in zip(model.headers, *model.rows, strict=True)
    ]


def cell_widths(model: TableModel) -> list[int]:
    """Each column as wide as its widest cell, its header wrapped."""
    return natural_widths(replace(model, headers=("",) * len(model.headers)))


def minimum_widths(model: TableModel) -> list[int]:
    """The narrowest each column may be: a header wraps between words, a cell
    too, except a figure ("1.00 ms", "+4.01%", "2.65 GB/s"), which stays whole;
    in a one-line table no cell wraps, and the last column is cut instead."""
    out = []
    last = len(model.headers) - 1
    for index, (header, *cells) in enumerate(zip(model.headers, *model.rows, strict=True)):
        whole = max((cell_len(line) for text in cells for line in text.splitlines()), default=0)
        if model.one_line and index == last:
            cells_min = min(whole, ELASTIC_MIN)
        elif model.one_line:
            cells_min = whole
        else:
            cells_min = max(
                (cell_len(t) if FIGURE.match(t) else longest_word(t) for t in cells), default=0
            )
        out.append(max(longest_word(header), cells_min))
    return out


def table_width(widths: list[int]) -> int:
    return sum(widths) + PER_COLUMN * len(widths) + EDGE


def keep_order(model: TableModel) -> list[int]:
    """Column indexes, most important first (by default left to right)."""
    priority = model.priority or tuple(range(len(model.headers)))
    return sorted(range(len(model.headers)), key=lambda i: (priority[i], i))


def select(model: TableModel, kept: list[int]) -> TableModel:
    def pick(items: tuple) -> tuple:
        return tuple(items[i] for i in kept)

    return replace(
        model,
        headers=pick(model.headers),
        rows=tuple(pick(row) for row in model.rows),
        align=pick(model.align),
        priority=pick(model.priority) if model.priority else (),
    )


def shrink(widths: list[int], minimum: list[int], room: int) -> list[int]:
    """Take the excess from the widest columns first, none below its minimum."""
    widths = list(widths)
    excess = table_width(widths) - room
    while excess > 0:
        spare = [i for i, w in enumerate(widths) if w > minimum[i]]
        if not spare:
            break
        widest = max(spare, key=lambda i: widths[i])
        widths[widest] -= 1
        excess -= 1
    return widths


def left_out_note(headers: list[str], width: int) -> str:
    named = ", ".join(headers[:4]) + (f" and {len(headers) - 4} more" if len(headers) > 4 else "")
    return (
        f"left out to fit {width} columns: {named} (a wider terminal, or the output in a "
        "pipe or a file, shows every column)"
    )


def fit(model: TableModel, width: int | None) -> Fitted:
    """The table at ``width`` columns (None: as wide as it needs, for a pipe)."""
    if width is None or not model.headers:
        return Fitted(model, None)
    natural = natural_widths(model)
    if table_width(natural) <= width:
        return Fitted(model, None)
    order = keep_order(model)
    kept = sorted(order)
    while len(kept) > 1 and table_width(minimum_widths(select(model, kept))) > width:
        kept.remove(next(i for i in reversed(order) if i in kept))
    fitted = select(model, kept)
    left_out = [model.headers[i] for i in range(len(model.headers)) if i not in kept]
    if left_out:
        fitted = replace(fitted, notes=(*fitted.notes, left_out_note(left_out, width)))
    minimum = minimum_widths(fitted)
    # headers wrap first (a line or two once), then cells (lines on every row)
    cells = [max(m, c) for m, c in zip(minimum, cell_widths(fitted), strict=True)]
    widths = shrink(shrink(natural_widths(fitted), cells, width), minimum, width)
    return Fitted(fitted, tuple(widths))
