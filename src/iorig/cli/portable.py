"""Runs moving between databases: ``iorig export`` and ``iorig import``,
with its progress and Ctrl-C."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape

from iorig.cli.common import app, console, err_console, open_reaped
from iorig.cli.refs import resolve_run_id

if TYPE_CHECKING:
    from iorig.store import Store

EXIT_INTERRUPTED = 130


def import_bundle(store: Store, bundle: Path) -> list[tuple[str, bool]]:
    """``import_runs`` with a progress bar on a terminal; Ctrl-C ends it
    (exit 130) with nothing imported."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    from iorig.store import import_runs

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


@app.command("export")
def export_cmd(
    ctx: typer.Context,
    run_ref: Annotated[str, typer.Argument(metavar="RUN", help="run id, prefix, label or last")],
    output: Annotated[Path, typer.Option("-o", "--output", help="bundle file to create")],
) -> None:
    """Write one run with all its data to a portable file (an iorig results database)."""
    from iorig.store import export_run

    with open_reaped(ctx.obj) as store:
        run_id = resolve_run_id(store, run_ref)
        export_run(store, run_id, output)
    console.print(
        f"exported run {run_id} to {escape(str(output))}; load it elsewhere with `iorig import`"
    )


@app.command("import")
def import_cmd(
    ctx: typer.Context,
    bundle: Annotated[
        Path, typer.Argument(help="file written by `iorig export` (or any results db)")
    ],
) -> None:
    """Add the runs of an exported file to the database; runs already present are skipped."""
    from iorig.store import Store

    with Store(ctx.obj) as store:
        results = import_bundle(store, bundle)
    for run_id, imported in results:
        console.print(f"{run_id}: {'imported' if imported else 'already present, skipped'}")
    if not results:
        console.print(f"{escape(str(bundle))} holds no runs")
