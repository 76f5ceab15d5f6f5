"""The system under test as tables, for every output: what the user
described (``--sut``, a scenario's ``sut:``, ``--note``) in the order of a
SPECstorage full disclosure, with what was left out marked "not disclosed"
so a reader sees what is missing."""

from __future__ import annotations

from rich.console import Group
from rich.text import Text

from iorig.model import RunRecord, SutRecord
from iorig.model.sut import NOT_DISCLOSED, SutTable, disclosure_tables
from iorig.report.tables.model import TableModel, to_rich
from iorig.report.tables.run import md_text, to_markdown


def _model(table: SutTable) -> TableModel:
    title = f"{table.title} ({NOT_DISCLOSED})" if table.missing else table.title
    if table.headers:  # a list of items
        rows = table.rows or ((NOT_DISCLOSED, *[""] * (len(table.headers) - 1)),)
        return TableModel(title, table.headers, rows, ("l",) * len(table.headers))
    if all(not label for label, _ in table.rows):  # one text
        return TableModel(title, ("text",), tuple((v,) for _, v in table.rows), ("l",))
    return TableModel(title, ("field", "value"), table.rows, ("l", "l"))


def sut_tables(record: SutRecord, *, all_sections: bool = True) -> list[TableModel]:
    """Every section (``all_sections``), or only those the user filled."""
    return [_model(t) for t in disclosure_tables(record) if all_sections or not t.missing]


def undisclosed(record: SutRecord) -> list[str]:
    """Titles of the sections the user left out entirely (a part of a
    section left out is not named again when the whole section is)."""
    missing = [t.title for t in disclosure_tables(record) if t.missing]
    return [m for m in missing if m.split(":")[0] == m or m.split(":")[0] not in missing]


def sut_markdown(run: RunRecord) -> str:
    """The Markdown report's section: filled tables, then what is missing."""
    parts = ["**System under test** (as described with --sut / the scenario's sut: section)", ""]
    if not run.sut:
        parts += [f"- {NOT_DISCLOSED}: no description given (see `iorig sut template`)", ""]
        return "\n".join(parts) + "\n"
    parts += [to_markdown(t) for t in sut_tables(run.sut, all_sections=False)]
    missing = undisclosed(run.sut)
    if missing:
        parts += [md_text(f"- {NOT_DISCLOSED}: {'; '.join(missing)}"), ""]
    return "\n".join(parts) + "\n"


def sut_view(run: RunRecord) -> Group:
    """`show --disclosure`: the user's description after what iorig read."""
    parts: list = [
        Text("System under test, as described (--sut, scenario sut:, --note)", style="bold")
    ]
    if not run.sut:
        parts.append(Text(f"{NOT_DISCLOSED}: no description given (see `iorig sut template`)"))
        return Group(*parts)
    for table in sut_tables(run.sut, all_sections=False):
        parts += [to_rich(table), Text("")]
    if missing := undisclosed(run.sut):
        parts.append(Text(f"{NOT_DISCLOSED}: {'; '.join(missing)}"))
    return Group(*parts)
