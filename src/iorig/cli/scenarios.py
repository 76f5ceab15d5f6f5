"""``iorig scenarios`` and ``iorig scenarios show``: the built-in scenarios
and what a scenario holds."""

from __future__ import annotations

from typing import Annotated

import typer

from iorig.cli.common import (
    console,
    scenarios_app,
)


@scenarios_app.callback()
def scenarios_list(ctx: typer.Context) -> None:
    """List built-in scenarios."""
    if ctx.invoked_subcommand is None:
        from iorig.report.writers import terminal
        from iorig.scenario import loading as scenario_mod

        resolved = [scenario_mod.load(n) for n in scenario_mod.builtin_names()]
        console.print(terminal.scenarios_table(resolved))
        console.print("show one with `iorig scenarios show NAME`")


@scenarios_app.command("show")
def scenarios_show(
    name: Annotated[str, typer.Argument(help="built-in name or YAML path")],
) -> None:
    """Print a scenario with its parameters, profiles and phases."""
    from iorig.report.writers import terminal
    from iorig.scenario import loading as scenario_mod

    resolved = scenario_mod.load(name)
    console.print(terminal.scenario_detail(resolved))
