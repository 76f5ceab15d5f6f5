"""The options every run command shares (``run``, ``sweep``, ``knee``,
``curve``, ``ab``), declared once, and ``run_options``: the decorator that
adds a chosen set of them to a typer command and hands the command one
frozen ``RunRequest`` (``run/request.py``) built from them."""

from __future__ import annotations

import functools
import inspect
import types
import typing
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import typer

from iorig.untrusted import check_text

if TYPE_CHECKING:
    from iorig.run.request import RunRequest


class Rw(StrEnum):
    read = "read"
    write = "write"
    randread = "randread"
    randwrite = "randwrite"
    randrw = "randrw"
    rw = "rw"
    trim = "trim"  # discards: where the target takes them (docs/guide/scenario-files.md, Trims)
    randtrim = "randtrim"
    trimwrite = "trimwrite"
    randtrimwrite = "randtrimwrite"


# Options shared by the run commands (run, sweep, knee, curve).

TargetOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--target",
        metavar="PATH",
        help="file, directory (ends with /) or block device; ROLE=PATH for a scenario with "
        "several targets (repeatable)",
    ),
]
SizeOpt = Annotated[str | None, typer.Option(metavar="SIZE", help="working set, e.g. 64MiB, 16GiB")]
SetOpt = Annotated[
    list[str] | None,
    typer.Option("--set", metavar="NAME=VALUE", help="parameter override name=value (repeatable)"),
]
QuickOpt = Annotated[
    bool, typer.Option("--quick", help="use the scenario's quick profile (a fast look)")
]
ProfileOpt = Annotated[
    str | None, typer.Option(metavar="NAME", help="use a named profile of the scenario")
]
AllowDestroyOpt = Annotated[
    bool, typer.Option("--allow-destroy", help="allow overwriting a device or file that holds data")
]
KeepFilesOpt = Annotated[
    bool,
    typer.Option("--keep-files", help="keep the data file iorig creates in a directory target"),
]
BsOpt = Annotated[str | None, typer.Option(metavar="SIZE", help="ad-hoc: block size")]
IodepthOpt = Annotated[
    int | None, typer.Option(metavar="N", help="ad-hoc: outstanding I/Os per job")
]
JobsOpt = Annotated[int | None, typer.Option(metavar="N", help="ad-hoc: fio jobs")]
DurationOpt = Annotated[
    str | None, typer.Option(metavar="DURATION", help="ad-hoc: measured time, e.g. 30s")
]
ReadPctOpt = Annotated[
    int | None, typer.Option(metavar="PCT", help="ad-hoc randrw/rw: read percentage")
]
EngineOpt = Annotated[
    str | None,
    typer.Option(
        metavar="ENGINE",
        help="ad-hoc: io_uring, libaio, psync, auto, or null (fio's ceiling, no storage)",
    ),
]
RepeatOpt = Annotated[
    int, typer.Option(metavar="N", min=1, help="run the measured phases N times (for significance)")
]
PrecisionOpt = Annotated[
    str | None,
    typer.Option(
        metavar="PCT",
        help="measure each measured phase until its median is known to ±N % (e.g. 2%; its "
        "duration becomes the maximum) and warm up until steady",
    ),
]


def check_label(param: typer.CallbackParam, value: str | None) -> str | None:
    """``--label`` (and ``ab``'s side labels): one line of plain text."""
    return None if value is None else check_text(value, param.opts[0] if param.opts else "label")


LabelOpt = Annotated[
    str | None,
    typer.Option(
        metavar="TEXT",
        help="a name for this run in comparisons, e.g. 'with passthrough'",
        callback=check_label,
    ),
]
FioOpt = Annotated[
    str | None, typer.Option(metavar="PATH", help="fio binary (default: $IORIG_FIO or PATH)")
]
HostsOpt = Annotated[
    str | None,
    typer.Option(
        metavar="HOSTS",
        help="run on these hosts: ssh://[USER@]HOST[:PORT] (reached over SSH) or an `iorig "
        "agent`'s HOST[:PORT], comma-separated (default: this machine)",
    ),
]
SutOpt = Annotated[
    Path | None,
    typer.Option(
        "--sut",
        metavar="FILE",
        help="a YAML file describing the system under test (see `iorig sut template`); "
        "merged over the scenario's sut: section",
    ),
]
NoteOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--note",
        metavar="TEXT",
        help="free text stored with the run, e.g. 'cache off' (repeatable)",
    ),
]


HostsFileOpt = Annotated[
    Path | None,
    typer.Option(
        metavar="FILE",
        help="a file listing the hosts, one per line: ssh://[USER@]HOST[:PORT] or an "
        "`iorig agent`'s HOST[:PORT]",
    ),
]


EventOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--event",
        metavar="PHASE@TIME=ACTION",
        help="add an event to a phase: PHASE@TIME=ACTION, e.g. measure@20s='stop-host 2' "
        "(repeatable; see docs/guide/availability-integrity.md)",
    ),
]
EventCommandOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--event-command",
        metavar="NAME=COMMAND",
        help="allow the event command NAME to run COMMAND: NAME='COMMAND' (repeatable)",
    ),
]
AllowCommandsOpt = Annotated[
    list[Path] | None,
    typer.Option(
        "--allow-commands", metavar="FILE", help="a YAML file of event commands, NAME: COMMAND"
    ),
]


MetricsOpt = Annotated[
    str | None,
    typer.Option(
        "--metrics",
        help="serve the live figures to Prometheus at ADDRESS (loopback: PORT or "
        "127.0.0.1:PORT; 0 picks a free port) while the run goes",
        metavar="ADDRESS",
    ),
]

MetricsLingerOpt = Annotated[
    str,
    typer.Option(
        "--metrics-linger",
        help="after the run, keep serving its final figures until every scraper has "
        "them, at most this long (0: stop with the run)",
        metavar="DURATION",
    ),
]


DataRulesOpt = Annotated[
    bool,
    typer.Option(
        "--iorig-data-rules",
        help="a fio job file with iorig's data rules where it does not say otherwise: fresh "
        "random data in every write (refill_buffers), no random map (norandommap) and a new "
        "random sequence each run (randrepeat=0); without it fio's own defaults (the run's "
        "findings list every option iorig changed)",
    ),
]


MinRateOpt = Annotated[
    str | None,
    typer.Option(
        metavar="RATE",
        help="below this rate a prefill, creation or checksum counts as hung and is stopped "
        "(default 1MiB/s)",
    ),
]


@dataclass(frozen=True)
class _Option:
    name: str  # the parameter's name in the command function
    annotation: Any
    default: Any = None


# The shared options in groups; a command takes the groups that mean
# something for it, in this order after its own options.
GROUPS: dict[str, tuple[_Option, ...]] = {
    "scenario": (
        _Option("size", SizeOpt),
        _Option("set_", SetOpt),
        _Option("quick", QuickOpt, False),
    ),
    "profile": (_Option("profile", ProfileOpt),),
    "adhoc": (
        _Option("bs", BsOpt),
        _Option("iodepth", IodepthOpt),
        _Option("jobs", JobsOpt),
        _Option("duration", DurationOpt),
        _Option("read_pct", ReadPctOpt),
        _Option("engine", EngineOpt),
    ),
    "target": (
        _Option("target", TargetOpt),
        _Option("allow_destroy", AllowDestroyOpt, False),
        _Option("keep_files", KeepFilesOpt, False),
    ),
    "repeat": (_Option("repeat", RepeatOpt, 1),),
    "hosts": (_Option("hosts", HostsOpt), _Option("hosts_file", HostsFileOpt)),
    "min_rate": (_Option("min_rate", MinRateOpt),),
    "jobfile": (_Option("iorig_data_rules", DataRulesOpt, False),),
    "events": (
        _Option("event", EventOpt),
        _Option("event_command", EventCommandOpt),
        _Option("allow_commands", AllowCommandsOpt),
    ),
    "record": (_Option("label", LabelOpt), _Option("sut", SutOpt), _Option("note", NoteOpt)),
    "fio": (_Option("fio", FioOpt),),
    "metrics": (
        _Option("metrics", MetricsOpt),
        _Option("metrics_linger", MetricsLingerOpt, "30s"),
    ),
}
ADHOC = tuple(o.name for o in GROUPS["adhoc"])


def build_request(given: dict[str, Any]) -> RunRequest:
    """The request from the shared options' values (absent ones: defaults)."""
    from iorig.run.request import RunRequest, host_list, parse_min_rate

    workload = {name: given[name] for name in ADHOC if given.get(name) is not None}
    quick, profile = given.get("quick", False), given.get("profile")
    return RunRequest(
        sets=tuple(given.get("set_") or ()),
        size=given.get("size"),
        profile="quick" if quick else profile,
        workload=workload,
        targets=tuple(given.get("target") or ()),
        hosts=tuple(host_list(given.get("hosts"), given.get("hosts_file"))),
        allow_destroy=given.get("allow_destroy", False),
        keep_files=given.get("keep_files", False),
        fio=given.get("fio"),
        repeats=given.get("repeat", 1),
        data_rules=given.get("iorig_data_rules", False),
        min_bytes_per_s=parse_min_rate(given.get("min_rate")),
        events=tuple(given.get("event") or ()),
        event_commands=tuple(given.get("event_command") or ()),
        command_files=tuple(given.get("allow_commands") or ()),
        label=given.get("label"),
        sut_file=given.get("sut"),
        notes=tuple(given.get("note") or ()),
        metrics=_metrics_address(given.get("metrics")),
        metrics_linger_s=linger_duration(given.get("metrics_linger")),
        database=given.get("database"),
    )


def linger_duration(text: str | None) -> float:
    """--metrics-linger, whose default is two 15 s scrape intervals (a
    scraper at Prometheus's default interval gets the last figures)."""
    from iorig.errors import UserError
    from iorig.units import parse_duration

    if text is None:
        return 30.0
    try:
        return parse_duration(text)
    except ValueError as exc:
        raise UserError(
            f"--metrics-linger: {exc}", hint="e.g. --metrics-linger 30s, or 0"
        ) from None


def _metrics_address(text: str | None) -> str | None:
    """--metrics checked before anything runs (loopback, a port)."""
    from iorig.serve.address import parse_address

    return None if text is None else str(parse_address(text))


F = TypeVar("F", bound=Callable[..., None])


def run_options(*groups: str) -> Callable[[F], F]:
    """Add the shared options of ``groups`` to a typer command, after its
    own; the command receives them as one ``request: RunRequest``."""
    shared = [option for group in groups for option in GROUPS[group]]

    def decorate(command: F) -> F:
        # the command's own annotations only: ``request``'s type is imported
        # by the command's module when it runs, not when the parser is built
        own_annotations = {k: v for k, v in command.__annotations__.items() if k != "request"}
        hints = typing.get_type_hints(
            types.SimpleNamespace(__annotations__=own_annotations),
            command.__globals__,
            include_extras=True,
        )
        own = [
            p.replace(annotation=hints.get(p.name, p.annotation))
            for p in inspect.signature(command).parameters.values()
            if p.name != "request"
        ]
        added = [
            inspect.Parameter(
                o.name, inspect.Parameter.KEYWORD_ONLY, annotation=o.annotation, default=o.default
            )
            for o in shared
        ]

        @functools.wraps(command)
        def with_request(**given: Any) -> None:
            values = {o.name: given.pop(o.name) for o in shared}
            # the database the run goes into (--db): the context's object
            database = getattr(given.get("ctx"), "obj", None)
            values["database"] = database if isinstance(database, Path) else None
            command(request=build_request(values), **given)

        parameters = [*own, *added]
        with_request.__signature__ = inspect.Signature(parameters)  # type: ignore[attr-defined]
        with_request.__annotations__ = {p.name: p.annotation for p in parameters}
        return with_request  # type: ignore[return-value]

    return decorate
