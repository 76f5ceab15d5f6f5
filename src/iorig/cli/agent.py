"""``iorig agent`` (a fio server for iorig's multi-host runs, in the
foreground) and ``iorig hosts check`` (whether hosts can run one)."""

from __future__ import annotations

import json
import signal
import sys
import threading
from dataclasses import asdict
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from iorig.cli.common import FioOpt, HostsFileOpt, app, console, host_list
from iorig.errors import UserError
from iorig.fio import runner
from iorig.fio.control import control_port
from iorig.fio.hosts import DEFAULT_PORT, is_any_address, is_loopback, parse_host
from iorig.fio.server import FioServer, refuse_unauthenticated
from iorig.run.hostcheck import HostFacts, check_hosts
from iorig.targets import bind_host_targets
from iorig.units import format_bytes


def _warn_connection(peer: str) -> None:
    """An agent beyond loopback says who reached its control port, every time."""
    console.print(f"[yellow]warning: unauthenticated control connection from {escape(peer)}[/]")


@app.command()
def agent(
    bind: Annotated[
        str,
        typer.Option(
            help="address to listen on: loopback (reach it through an SSH tunnel); any "
            "other only with --insecure-no-auth (fio's server has no authentication)"
        ),
    ] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=1, max=65535, help="TCP port")] = DEFAULT_PORT,
    directory: Annotated[
        Path,
        typer.Option(
            "--dir", help="working directory: where relative targets (the default) are written"
        ),
    ] = Path("."),
    fio: FioOpt = None,
    insecure_no_auth: Annotated[
        bool,
        typer.Option(
            "--insecure-no-auth",
            help="listen beyond loopback without authentication: anyone who reaches the "
            "ports can run fio jobs, and commands, as this user (an isolated test network only)",
        ),
    ] = False,
) -> None:
    """Serve fio jobs for `iorig run --hosts` on this machine until stopped."""
    # every spelling of "all interfaces" (0, ::ffff:0.0.0.0, [::] …) is that,
    # named plainly
    if is_any_address(bind):
        bind = "::" if ":" in bind else "0.0.0.0"
    text = f"[{bind}]:{port}" if ":" in bind else f"{bind}:{port}"
    address = parse_host(text)
    refuse_unauthenticated(address, insecure_no_auth=insecure_no_auth)  # before fio runs
    fio_path = runner.find_fio(fio)
    version = runner.fio_version(fio_path)
    exposed = not is_loopback(address.host)  # allowed by --insecure-no-auth: warn
    watch = _warn_connection if exposed else None
    server = FioServer(fio_path, address, directory.resolve(), insecure_no_auth=insecure_no_auth,
                       on_control=watch)  # fmt: skip
    stop = threading.Event()
    previous = {s: signal.signal(s, lambda *_: stop.set()) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        server.start()
        console.print(
            f"iorig agent: {escape(version)} serving on {escape(address.label)}, working "
            f"directory {escape(str(directory.resolve()))}"
        )
        if server.control_problem:
            console.print(f"[yellow]{escape(server.control_problem)}[/]")
        if exposed:
            console.print(
                f"[yellow]warning: no authentication on {escape(address.label)} "
                "(--insecure-no-auth): anyone who reaches this port or its control port "
                f"{control_port(address.port)} can run fio jobs and commands here as this "
                "user, and freeze this host's fio; use it on an isolated test network only[/]"
            )
        console.print(f"use it with: iorig run … --hosts {escape(address.label)}; stop with Ctrl-C")
        while not stop.wait(0.5):
            if not server.running:
                raise UserError("the fio server exited unexpectedly")
    finally:
        server.stop()
        for s, handler in previous.items():
            signal.signal(s, handler)
    console.print("iorig agent: stopped")


hosts_app = typer.Typer(no_args_is_help=True)
app.add_typer(hosts_app, name="hosts", help="Check the hosts of a multi-host run.")


def _offset(facts: HostFacts) -> str:
    if facts.clock_offset_s is None:
        return "?"
    return f"{facts.clock_offset_s * 1000:+.0f} ms (±{(facts.clock_error_s or 0) * 1000:.0f})"


@hosts_app.command("check")
def hosts_check(
    hosts: Annotated[
        str | None,
        typer.Argument(help="ssh://[USER@]HOST[:PORT] or an agent's HOST[:PORT], comma-separated"),
    ] = None,
    hosts_file: HostsFileOpt = None,
    target: Annotated[
        list[str] | None,
        typer.Option(help="the target to check: PATH (every host) or HOST=PATH (repeatable)"),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="print JSON")] = False,
    fio: FioOpt = None,
) -> None:
    """Whether each host can run a multi-host run: reached, the same fio and
    engines as here, its clock, CPUs and target. Exits non-zero naming every
    host that would spoil a run."""
    found = host_list(hosts, hosts_file)
    if not found:
        raise UserError("no hosts to check", hint="iorig hosts check ssh://host1,ssh://host2")
    bound = bind_host_targets(["target"], target or [], found)
    paths = {host.label: roles["target"] for host, roles in bound.items() if "target" in roles}
    facts = check_hosts(found, runner.find_fio(fio), paths)
    if as_json:
        doc = {"format_version": 1, "hosts": [asdict(f) for f in facts]}
        sys.stdout.write(json.dumps(doc, indent=1) + "\n")
    else:
        table = Table("host", "way", "fio", "engines", "clock offset", "CPUs", "target",
                      "free", "problems")  # fmt: skip
        for f in facts:
            table.add_row(
                escape(f.host), f.way, escape(f.fio_version or "?"),
                escape(" ".join(f.engines)) if f.engines is not None else "?",
                _offset(f), str(f.cpus) if f.cpus is not None else "?",
                escape(f"{f.target or ('keeper dir' if f.way == 'ssh' else '?')} "
                       f"({f.target_kind or '?'})"),
                format_bytes(f.free_bytes) if f.free_bytes is not None else "?",
                escape("; ".join(f.problems)) or "[green]none[/]",
            )  # fmt: skip
        console.print(table)
    spoiled = [f for f in facts if f.problems]
    if spoiled:
        raise UserError(
            f"{len(spoiled)} of {len(facts)} hosts would spoil a run: "
            + "; ".join(f"{f.host}: {f.problems[0]}" for f in spoiled)
        )
