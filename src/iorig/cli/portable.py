"""Runs moving between databases: `import` with its progress and Ctrl-C."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

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
