"""``iorig agent`` (a fio server for iorig's multi-host runs, in the
foreground) and ``iorig hosts check`` (whether hosts can run one)."""

from __future__ import annotations

import contextlib
import shutil
import signal
import sys
import threading
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape

from iorig.cli.common import app, console
from iorig.cli.options import FioOpt, HostsFileOpt
from iorig.errors import UserError
from iorig.fio.hosts import (
    DEFAULT_PORT,
    HostAddress,
    SocketEndpoint,
    is_any_address,
    is_loopback,
    parse_host,
)
from iorig.units import format_bytes

if TYPE_CHECKING:
    from iorig.fio import agentauth, tlsrelay
    from iorig.fio.server import FioServer
    from iorig.machine import locks
    from iorig.run.hostcheck import HostFacts


def _warn_connection(peer: str) -> None:
    """An agent beyond loopback without authentication names every peer."""
    console.print(f"[yellow]warning: unauthenticated connection from {escape(peer)}[/]")


def _refused(peer: str, why: str) -> None:
    """An authenticated agent names every connection it turned away."""
    console.print(f"[yellow]refused a connection from {escape(peer)}: {escape(why)}[/]")


agent_app = typer.Typer(invoke_without_command=True)
app.add_typer(
    agent_app,
    name="agent",
    help="Serve fio jobs for `iorig run --hosts` on this machine (`iorig agent token`: "
    "make the token agents and drivers share).",
)

_TOKEN_HELP = (
    "the shared token (`iorig agent token`, mode 0600): drivers reach this agent as "
    "tls://HOST[:PORT] with the same token"
)


def server_auth(
    token_file: Path | None, cert: Path | None, key: Path | None, client_ca: Path | None
) -> agentauth.Auth | None:
    from iorig.fio import agentauth  # ssl: agents and servers only

    if token_file is not None and (cert or key or client_ca):
        raise UserError(
            "choose one way to authenticate: --token-file, or --cert, --key and --client-ca"
        )
    if token_file is not None:
        return agentauth.read_token(token_file)
    if cert or key or client_ca:
        return agentauth.cert_auth(cert, key, client_ca, what="pass --cert, --key and --client-ca")
    return None


@agent_app.callback()
def agent(
    ctx: typer.Context,
    bind: Annotated[
        str,
        typer.Option(
            help="address to listen on: any with --token-file or certificates; without them "
            "loopback only (reach it through an SSH tunnel), or any with --insecure-no-auth"
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
    token_file: Annotated[Path | None, typer.Option(help=_TOKEN_HELP)] = None,
    cert: Annotated[
        Path | None, typer.Option(help="mutual TLS: this agent's certificate (PEM)")
    ] = None,
    key: Annotated[Path | None, typer.Option(help="mutual TLS: its key (PEM)")] = None,
    client_ca: Annotated[
        Path | None,
        typer.Option(help="mutual TLS: the authority whose certificates drivers must show"),
    ] = None,
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
    if ctx.invoked_subcommand is not None:
        return
    from iorig.fio import agentauth, runner
    from iorig.fio.server import refuse_unauthenticated

    # every spelling of "all interfaces" (0, ::ffff:0.0.0.0, [::] …) is that,
    # named plainly
    if is_any_address(bind):
        bind = "::" if ":" in bind else "0.0.0.0"
    text = f"[{bind}]:{port}" if ":" in bind else f"{bind}:{port}"
    address = parse_host(text)
    auth = server_auth(token_file, cert, key, client_ca)
    if auth is not None and insecure_no_auth:
        raise UserError("--insecure-no-auth and authentication exclude each other")
    if auth is None:
        refuse_unauthenticated(address, insecure_no_auth=insecure_no_auth)  # before fio runs
    fio_path = runner.find_fio(fio)
    version = runner.fio_version(fio_path)
    workdir = directory.resolve()
    stop = threading.Event()
    previous = {s: signal.signal(s, lambda *_: stop.set()) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        with contextlib.ExitStack() as stack:
            if auth is None:
                server = _serve_unauthenticated(stack, fio_path, address, workdir)
                how = "no authentication"
            else:
                server = _serve_authenticated(stack, fio_path, address, workdir, auth)
                how = "a token over TLS" if isinstance(auth, agentauth.TokenAuth) else "mutual TLS"
            console.print(
                f"iorig agent: {escape(version)} serving on {escape(address.label)} with "
                f"{how}, working directory {escape(str(workdir))}"
            )
            scheme = "" if auth is None else "tls://"
            console.print(
                f"use it with: iorig run … --hosts {scheme}{escape(address.label)}; "
                "stop with Ctrl-C"
            )
            while not stop.wait(0.5):
                if not server.running:
                    raise UserError("the fio server exited unexpectedly")
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
    console.print("iorig agent: stopped")


def _private_dir(stack: contextlib.ExitStack) -> Path:
    """The directory of fio's server socket, only this user's; removed when
    the agent stops (stamped: a killed agent's is removed by the next run)."""
    from iorig.fio.sockdir import socket_dir
    from iorig.machine.leftovers import stamp

    private = socket_dir("iorig-agent-", "fio.sock")
    stack.callback(shutil.rmtree, private, ignore_errors=True)
    stamp(private)
    return private


def _locker(workdir: Path) -> Callable[[list[str]], locks.Claim]:
    """Locks on this host's targets for a driver's LOCK request, as this
    machine's own runs take them (machine/locks.py), each driver's apart:
    a run here and a run through the agent on one target exclude each other."""
    from iorig.fio import hostlock
    from iorig.machine import locks

    def lock(paths: list[str]) -> locks.Claim:
        claim = locks.Claim(shared=False, via="agent")
        try:
            for index, text in enumerate(paths):
                path = Path(text) if text.startswith("/") else workdir / text
                try:
                    claim.take(text, locks.path_keys(path))
                except locks.Busy as busy:
                    raise hostlock.LockBusy(index, busy.holder) from None
        except hostlock.LockBusy:
            claim.release()
            raise
        except (UserError, OSError) as exc:
            claim.release()
            raise hostlock.LockRefused(str(exc)) from None
        return claim

    return lock


def _serve_unauthenticated(
    stack: contextlib.ExitStack, fio: str, address: HostAddress, workdir: Path
) -> FioServer:
    """fio's server behind a plain listener on ``address`` (loopback, or
    --insecure-no-auth: then every connection is named) and the control port
    next to it."""
    from iorig.fio.control import ControlServer, control_port, no_control_port
    from iorig.fio.server import FioServer

    exposed = not is_loopback(address.host)  # allowed by --insecure-no-auth: warn
    watch = _warn_connection if exposed else None
    private = _private_dir(stack)
    server = FioServer(fio, SocketEndpoint(str(private / "fio.sock")), workdir, watchdog=True)
    stack.callback(server.stop)
    control = ControlServer(
        address, server.processes, watch, jobs=server.jobs_age_s, locker=_locker(workdir)
    )
    from iorig.fio.tlsrelay import AgentListener  # asyncio and ssl: agents only

    listener = AgentListener(
        address, None, str(private / "fio.sock"), control, _refused, on_connection=watch
    )
    server.start()
    _listen(listener, address)
    stack.callback(listener.close)
    try:
        control.start()
        stack.callback(control.close)
    except OSError as exc:
        console.print(f"[yellow]{escape(no_control_port(address.port, exc))}[/]")
    if exposed:
        console.print(
            f"[yellow]warning: no authentication on {escape(address.label)} "
            "(--insecure-no-auth): anyone who reaches this port or its control port "
            f"{control_port(address.port)} can run fio jobs and commands here as this "
            "user, and freeze this host's fio; use it on an isolated test network only[/]"
        )
    return server


def _listen(listener: tlsrelay.AgentListener, address: HostAddress) -> None:
    try:
        listener.start()
    except OSError as exc:
        raise UserError(
            f"cannot listen on {address.label}: {exc.strerror or exc}",
            hint="another program listens there (choose another --port), or the address "
            "is not one of this machine's",
        ) from None


def _serve_authenticated(
    stack: contextlib.ExitStack,
    fio: str,
    address: HostAddress,
    workdir: Path,
    auth: agentauth.Auth,
) -> FioServer:
    """fio's server on a Unix socket in a private directory, reached only
    through the TLS listener on ``address`` (fio.tlsrelay)."""
    from iorig.fio.control import ControlServer
    from iorig.fio.server import FioServer

    private = _private_dir(stack)
    server = FioServer(fio, SocketEndpoint(str(private / "fio.sock")), workdir, watchdog=True)
    stack.callback(server.stop)
    from iorig.fio.tlsrelay import AgentListener  # asyncio and ssl: agents only

    listener = AgentListener(
        address,
        auth,
        str(private / "fio.sock"),
        ControlServer(None, server.processes, jobs=server.jobs_age_s, locker=_locker(workdir)),
        _refused,
    )
    server.start()
    _listen(listener, address)
    stack.callback(listener.close)
    return server


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
        typer.Argument(
            help="ssh://[USER@]HOST[:PORT], tls://HOST[:PORT] or a loopback agent's "
            "HOST[:PORT], comma-separated"
        ),
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
    from rich.table import Table

    from iorig.fio import runner
    from iorig.report.writers.jsoncsv import to_json
    from iorig.run.hostcheck import check_hosts
    from iorig.run.request import host_list
    from iorig.targets import bind_host_targets

    found = host_list(hosts, hosts_file)
    if not found:
        raise UserError("no hosts to check", hint="iorig hosts check ssh://host1,ssh://host2")
    bound = bind_host_targets(["target"], target or [], found)
    paths = {host.label: roles["target"] for host, roles in bound.items() if "target" in roles}
    facts = check_hosts(found, runner.find_fio(fio), paths)
    if as_json:
        doc = {"format_version": 1, "hosts": [asdict(f) for f in facts]}
        sys.stdout.write(to_json(doc))
    else:
        table = Table(
            "host", "way", "fio", "engines", "clock offset", "CPUs", "target", "free", "problems"
        )
        for f in facts:
            table.add_row(
                escape(f.host),
                f.way,
                escape(f.fio_version or "?"),
                escape(" ".join(f.engines)) if f.engines is not None else "?",
                _offset(f),
                str(f.cpus) if f.cpus is not None else "?",
                escape(
                    f"{f.target or ('keeper dir' if f.way == 'ssh' else '?')} "
                    f"({f.target_kind or '?'})"
                ),
                format_bytes(f.free_bytes) if f.free_bytes is not None else "?",
                escape("; ".join(f.problems)) or "[green]none[/]",
            )
        console.print(table)
    spoiled = [f for f in facts if f.problems]
    if spoiled:
        raise UserError(
            f"{len(spoiled)} of {len(facts)} hosts would spoil a run: "
            + "; ".join(f"{f.host}: {f.problems[0]}" for f in spoiled)
        )


@agent_app.command("token")
def agent_token(
    out: Annotated[
        Path | None,
        typer.Option(help="where to write it (default ~/.config/iorig/agent.token)"),
    ] = None,
    force: Annotated[
        bool, typer.Option("--force", help="replace a token file that exists")
    ] = False,
) -> None:
    """Make a new token for authenticated agents: a file only its owner can
    read. Give the same file to every agent (`iorig agent --token-file`);
    this machine's runs read it to reach them as tls://HOST."""
    from iorig.fio import agentauth

    path = (out or agentauth.default_token_path()).expanduser()
    agentauth.write_token(path, force=force)
    console.print(f"iorig agent token: wrote {escape(str(path))} (mode 0600)")
    console.print(
        "copy it to each host (e.g. scp -p) and run there: iorig agent --bind ADDRESS "
        "--token-file FILE; then: iorig run … --hosts tls://HOST1,tls://HOST2"
        + ("" if out is None else f" with {agentauth.TOKEN_ENV}={escape(str(path))}")
    )
