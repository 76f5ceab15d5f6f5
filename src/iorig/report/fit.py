"""Fitting a table to a terminal's width without breaking a word.

rich squeezes a table that is too wide by folding its cells anywhere, words
included ("transaction / al"), and a column it cannot shrink is cut off at the
edge. Here the columns are sized before rich sees them: the least important
columns are left out until every kept column is at least as wide as its longest
word, then the widest columns give up their spare room (their cells wrap
between words). Pure: widths in, a smaller model and its column widths out."""

from __future__ import annotations

from dataclasses import dataclass, replace

from rich.cells import cell_len

from iorig.report.tablemodel import TableModel

# rich's boxed table: "│ " before each cell, " " after it, and the closing "│"
PER_COLUMN = 3
EDGE = 1
# the last column of a one-line table (a list of figures) is cut, with an
# ellipsis, down to this before a column is left out for it
ELASTIC_MIN = 12


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


def minimum_widths(model: TableModel) -> list[int]:
    """The narrowest each column may be without breaking a word (one-line
    tables: without wrapping a cell, except the last column, which is cut)."""
    natural = natural_widths(model)
    out = []
    last = len(model.headers) - 1
    for index, (header, *cells) in enumerate(zip(model.headers, *model.rows, strict=True)):
        if not model.one_line:
            out.append(max(longest_word(t) for t in (header, *cells)))
        elif index == last:
            out.append(max(longest_word(header), min(natural[index], ELASTIC_MIN)))
        else:
            out.append(max(longest_word(header), natural[index]))
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
        fitted = replace(
            fitted,
            notes=(
                *fitted.notes,
                f"left out to fit {width} columns: {', '.join(left_out)} (a wider terminal, "
                "or the output in a pipe or a file, shows every column)",
            ),
        )
    widths = shrink(natural_widths(fitted), minimum_widths(fitted), width)
    return Fitted(fitted, tuple(widths))
