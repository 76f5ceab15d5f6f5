"""Fitting a table to a terminal: columns left out by priority, no word broken."""

from __future__ import annotations

from iorig.report.tables.model import TableModel
from iorig.report.writers.fit import fit, minimum_widths, table_width

MODEL = TableModel(
    "t",
    ("scenario", "median", "status", "note"),
    (("transactional", "1.00 ms", "ok", "a long note that may wrap between its words"),),
    ("l", "r", "l", "l"),
    priority=(0, 1, 3, 2),
)


def test_a_table_that_fits_keeps_its_natural_width():
    fitted = fit(MODEL, 200)
    assert fitted.model == MODEL and fitted.widths is None
    assert fit(MODEL, None).widths is None  # a pipe: never fitted


def test_words_and_figures_set_the_minimum():
    # "transactional" whole, "1.00 ms" whole (a figure), the note's longest word
    assert minimum_widths(MODEL) == [13, 7, 6, 7]


def test_the_least_important_column_goes_first_and_is_named():
    width = table_width([13, 7, 7]) + 1  # room for scenario, median and note only
    fitted = fit(MODEL, width)
    assert fitted.model.headers == ("scenario", "median", "note")
    assert fitted.widths is not None and table_width(list(fitted.widths)) <= width
    assert fitted.model.notes[-1].startswith(f"left out to fit {width} columns: status")


def test_a_one_line_table_cuts_its_last_column_instead_of_wrapping():
    model = TableModel(
        "", ("id", "figures"), (("abc", "x 1, y 2, z 3, w 4, v 5, u 6"),), ("l", "l"), one_line=True
    )
    fitted = fit(model, 24)
    assert fitted.model.headers == ("id", "figures")
    assert fitted.widths == (3, 14)  # the figures cut (an ellipsis), the id whole
