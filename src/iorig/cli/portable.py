"""Runs moving between databases: `import` with its progress and Ctrl-C, and
the notes of `runs` and `show` on recovery files waiting to be imported."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn
from rich.text import Text

from iorig.cli.common import err_console
from iorig.store import Store, import_runs

EXIT_INTERRUPTED = 130


def import_bundle(store: Store, bundle: Path) -> list[tuple[str, bool]]:
    """``import_runs`` with a progress bar on a terminal; Ctrl-C ends it
    (exit 130) with nothing imported."""
    progress = Progress(
        TextColumn("importing"),
        BarColumn(bar_width=24),
        MofNCompleteColumn(),
        TextColumn("runs"),
        console=err_console,
        transient=True,
        disable=not err_console.is_terminal,
    )
    task = progress.add_task("import", total=None)
    try:
        with progress:
            return import_runs(
                store,
                bundle,
                lambda done, total: progress.update(task, completed=done, total=total),
            )
    except KeyboardInterrupt:
        err_console.print("import interrupted: nothing was imported")
        raise typer.Exit(EXIT_INTERRUPTED) from None


def waiting_notes(store: Store, run_ids: Iterable[str]) -> list[Text]:
    """One note per run of ``run_ids`` whose last results wait in a recovery
    file (the database could not take them): where, and the command that
    adds them."""
    notes = []
    for run_id, kept in sorted(store.waiting_recoveries(run_ids).items()):
        if kept.is_file():
            said = (
                f"its last results wait in {kept}: add them with "
                f"`iorig --db {store.path} import {kept}`"
            )
        else:
            said = f"its last results were kept in {kept}, which is no longer there"
        notes.append(Text.assemble(("note:", "yellow"), f" run {run_id}: {said}"))
    return notes
