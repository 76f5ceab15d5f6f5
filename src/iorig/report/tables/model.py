"""A table as every output format receives it: title, headers, text rows;
and as rich shows it (``to_rich``), apart from the tables built from an
analysis (``run``), so that ``iorig runs`` prints one without them."""

from __future__ import annotations

from dataclasses import dataclass, replace

from rich.table import Table
from rich.text import Text

from iorig.untrusted import visible


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


def visible_model(model: TableModel) -> TableModel:
    """The table's text as a terminal shows it (``untrusted.visible``): each
    cell is measured and fitted on what is shown, and a newline in a label
    cannot start a row of its own."""
    return replace(
        model,
        title=visible(model.title),
        headers=tuple(visible(h) for h in model.headers),
        rows=tuple(tuple(visible(c) for c in row) for row in model.rows),
        notes=tuple(visible(n) for n in model.notes),
    )


def to_rich(
    model: TableModel,
    widths: tuple[int, ...] | None = None,
    styles: dict[str, dict[str, str]] | None = None,
) -> Table:
    """The table for rich, each column at ``widths`` when given (``fit`` chose
    them so that no word is broken) or as wide as its cells. A cell too long
    for its column wraps between words; a word that still does not fit is cut
    with an ellipsis, never folded. ``styles``: per header, a style per cell
    text (a run's status in its colour)."""
    model = visible_model(model)
    # as wide as its title, so that a narrow table does not fold it
    title_width = min(len(model.title), 300)
    if widths is not None:
        title_width = min(title_width, sum(widths) + 3 * len(widths) + 1)
    table = Table(
        title=Text(model.title[:300]),
        title_justify="left",
        header_style="bold",
        min_width=title_width,
    )
    justify = {"l": "left", "c": "center", "r": "right"}
    for index, (header, align) in enumerate(zip(model.headers, model.align, strict=True)):
        table.add_column(
            Text(header),
            justify=justify[align],  # type: ignore[arg-type]
            overflow="ellipsis",
            no_wrap=model.one_line,
            width=None if widths is None else widths[index],
        )
    for row in model.rows:
        # labels are user text: not markup, and clipped (rich wraps long text slowly)
        table.add_row(
            *(
                Text(
                    cell if len(cell) <= 300 else cell[:299] + "…",
                    style=(styles or {}).get(header, {}).get(cell, ""),
                )
                for header, cell in zip(model.headers, row, strict=True)
            )
        )
    return table
