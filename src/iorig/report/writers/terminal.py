"""Rich renderables for the terminal. Pure: they build tables, the CLI prints."""

from __future__ import annotations

import datetime as dt
from typing import TYPE_CHECKING, Any

from rich.console import Group
from rich.table import Table
from rich.text import Text

from iorig.model import (
    Finding,
    InterfaceLimit,
    Metric,
    PhaseKind,
    PhaseResult,
    RunRecord,
    series_stats,
)
from iorig.model.records import flatten, target_name
from iorig.model.sut import brief
from iorig.report.tables.metrics import metric
from iorig.report.tables.model import TableModel
from iorig.units import format_bytes, format_duration, format_rate, format_si
from iorig.untrusted import visible

if TYPE_CHECKING:  # types only: `iorig runs` needs no scenario loading
    from iorig.scenario.loading import ResolvedScenario

# User text (titles, labels, paths, descriptions) is shown as rich Text, never
# parsed for markup or highlighted, made visible (a control or text-direction
# character as an escape: report/writers/console.py) and clipped where a table or a
# heading shows it: rich's wrapping of a megabyte title takes seconds.
CELL_CHARS = 300
TITLE_CHARS = 200
DESCRIPTION_CHARS = 2000


def clip(text: str, limit: int = CELL_CHARS, *, lines: bool = False) -> str:
    """User text for where it is shown: every character a terminal would
    act on as an escape — a newline too unless ``lines`` (a description of
    several lines), so that it cannot start a line of its own —, cut to
    ``limit`` characters, an ellipsis marking the cut."""
    text = visible(text, lines=lines)
    return text if len(text) <= limit else text[: limit - 1] + "…"


STATUS_STYLE = {"ok": "green", "running": "cyan", "failed": "red", "aborted": "yellow"}


def add_row(table: Table, *cells: object) -> None:
    """Add a row whose strings are shown as they are (paths, labels and sysfs
    values may contain [brackets] that rich would take for markup)."""
    table.add_row(*(Text(clip(c)) if isinstance(c, str) else c for c in cells))  # type: ignore[arg-type]


def when(timestamp: float | None) -> str:
    if timestamp is None:
        return "-"
    return dt.datetime.fromtimestamp(timestamp).strftime("%Y-%m-%d %H:%M:%S")


def status_text(status: str) -> Text:
    return Text(status, style=STATUS_STYLE.get(status, ""))


def target_size(size_bytes: int, search_kind: str | None) -> str:
    """A target's size as a run's header says it: an accelerators search
    writes a data set per count, and the plan's is its first count's (the
    search's table has each)."""
    return "a data set per count" if search_kind == "accelerators" else format_bytes(size_bytes)


def run_header(run: RunRecord, engines: list[str]) -> Table:
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="bold")
    grid.add_column()
    add_row(grid, "run", f"{run.id}  {clip(run.title, TITLE_CHARS)}")
    add_row(grid, "scenario", f"{run.scenario} v{run.scenario_version} ({run.scenario_origin})")
    add_row(grid, "status", status_text(run.status))
    if run.error:
        add_row(grid, "error", Text(clip(run.error, DESCRIPTION_CHARS), style="red"))
    for t in run.targets:
        size = target_size(t["size_bytes"], (run.search or {}).get("kind"))
        add_row(grid, f"target {target_name(t)}", f"{t['path']} ({t['kind']}, {size})")
    add_row(grid, "host", ", ".join(run.hosts))
    add_row(grid, "fio", run.fio_version + (f", engine {', '.join(engines)}" if engines else ""))
    ended = run.ended_at or run.started_at
    add_row(grid, "started", f"{when(run.started_at)} ({format_duration(ended - run.started_at)})")
    changed = [
        f"{name}={p['text']}" for name, p in run.params.items() if p.get("origin") != "default"
    ]
    if run.profile:
        add_row(
            grid,
            "profile",
            Text(
                f"{run.profile}: shortened for a fast look; not figures to decide on",
                style="yellow",
            ),
        )
    if changed:
        add_row(grid, "parameters", ", ".join(changed))
    if described := brief(run.sut):
        add_row(grid, "system under test", clip(described, TITLE_CHARS))
    if run.sut.notes:
        add_row(grid, "notes", clip("; ".join(run.sut.notes), TITLE_CHARS))
    if run.disclosure:
        add_row(grid, "interface limit", limit_text(run.disclosure.interface_limit))
    return grid


def limit_text(limit: InterfaceLimit | None) -> str:
    if limit is None:
        return "unknown (no device on the path reports a link speed)"
    return f"{format_rate(limit.bytes_per_s)} ({limit.source})"


def findings_block(findings: tuple[Finding, ...] | list[Finding]) -> list[Text]:
    """The audit's findings, warnings first, each with its advice."""
    out = []
    for f in sorted(findings, key=lambda f: f.severity != "warning"):
        mark = ("warning: ", "bold yellow") if f.severity == "warning" else ("note: ", "cyan")
        out.append(Text.assemble(mark, clip(f.message, DESCRIPTION_CHARS)))
        if f.advice:
            out.append(Text(f"    advice: {clip(f.advice, DESCRIPTION_CHARS)}", style="dim"))
    return out


def disclosure_view(run: RunRecord) -> Group:
    """`show --disclosure`: every collected fact, grouped by section."""
    parts: list = []
    for section, content in run.disclosure.sections.items():
        table = Table(title=section, title_justify="left", show_header=False, box=None)
        table.add_column("key", style="bold")
        table.add_column("value", overflow="fold")
        for key, value in flatten(content).items():
            add_row(table, key or section, value)
        parts += [table, Text("")]
    if not parts:
        parts.append(Text("this run has no disclosure (recorded by an older iorig)"))
    return Group(*parts)


def steady_lines(phases: tuple[PhaseResult, ...]) -> list[Text]:
    out = []
    for p in phases:
        st = p.steady
        if st is None:
            continue
        rounds = ", ".join(format_si(v) for v in st.rounds[-st.window :])
        if st.converged:
            out.append(
                Text(
                    f"{clip(p.name)}: steady after {len(st.rounds)} rounds of {st.round_s:g} s "
                    f"(window rounds {st.window_start + 1}-{len(st.rounds)}: {rounds})",
                    style="green",
                )
            )
        else:
            out.append(
                Text(
                    f"{clip(p.name)}: did NOT reach steady state in {len(st.rounds)} rounds of "
                    f"{st.round_s:g} s (last rounds: {rounds or 'none'})",
                    style="bold red",
                )
            )
    return out


def runs_table(
    runs: list[RunRecord], headlines: dict[str, list[tuple[str, Metric, list]]]
) -> TableModel:
    """One line per run: a narrow terminal leaves columns out (the target
    first) and cuts the figures, a long list for a sweep, with an ellipsis."""
    labelled = any(run.label for run in runs)
    rows = []
    for run in runs:
        parts = [
            f"{name} {metric(unit).format(series_stats(values).median)}"
            for name, unit, values in headlines.get(run.id, [])
        ]
        scenario = run.scenario + (f" ({run.profile})" if run.profile else "")
        rows.append(
            (
                run.id,
                when(run.started_at)[5:16],  # MM-DD HH:MM
                scenario,
                str(run.status),
                *([clip(run.label or "-")] if labelled else []),
                clip(", ".join(t["given"] for t in run.targets)),
                ", ".join(parts) or "-",
            )
        )
    headers = (
        "id",
        "started",
        "scenario",
        "status",
        *(["label"] if labelled else []),
        "target",
        "median per second",
    )
    # kept longest: the id (what other commands take), the status, the figures
    priority = (0, 3, 4, 1, *([5] if labelled else []), 6, 2)
    return TableModel(
        "", headers, tuple(rows), ("l",) * len(headers), priority=priority, one_line=True
    )


def scenarios_table(scenarios: list[ResolvedScenario]) -> Table:
    """Each scenario by name, with its measured phases as its defaults make
    them (a training or checkpoint scenario's come from its own section)."""
    table = Table(header_style="bold")
    table.add_column("name")
    table.add_column("title")
    table.add_column("phases")
    for resolved in scenarios:
        s = resolved.scenario
        measured = [p.name for p in s.phases if p.kind == PhaseKind.MEASURE]
        add_row(table, s.name, clip(s.title, TITLE_CHARS), ", ".join(_runs_of_names(measured)))
    return table


def _runs_of_names(names: list[str]) -> list[str]:
    """Names, a run of three or more numbered alike as its ends
    ("write-1 … write-10")."""
    out: list[str] = []
    run: list[str] = []

    def stem(name: str) -> str | None:
        head, _, number = name.rpartition("-")
        return head if head and number.isdigit() else None

    for name in [*names, ""]:
        if run and stem(name) is not None and stem(name) == stem(run[0]):
            run.append(name)
            continue
        out += [f"{run[0]} … {run[-1]}"] if len(run) >= 3 else run
        run = [name]
    return [n for n in out if n]


def _block_sizes(w: Any) -> str:
    """A workload's block size, or its mix of sizes (bssplit: size/percent)."""
    if not w.bssplit:
        return format_bytes(w.bs)
    mix = [item.split("/") for item in str(w.bssplit).split(":") if "/" in item]
    return "mix " + " ".join(f"{format_bytes(int(b))} {p}%" for b, p in mix if b.isdigit())


def scenario_detail(resolved: ResolvedScenario) -> Group:
    s = resolved.scenario
    head = Text.assemble(
        (f"{s.name} v{s.version}", "bold"),
        f" — {clip(s.title, TITLE_CHARS)}\n",
        clip(s.description.strip(), DESCRIPTION_CHARS, lines=True),
    )
    params = Table(title="Parameters", title_justify="left", header_style="bold")
    for col in ("name", "type", "default", *s.profiles.keys(), "help"):
        params.add_column(col)
    for name, spec in s.parameters.items():
        profile_values = [str(s.profiles[p].get(name, "")) for p in s.profiles]
        add_row(params, name, spec.type, str(spec.default), *profile_values, spec.help)
    phases = Table(title="Phases (defaults)", title_justify="left", header_style="bold")
    for col in ("phase", "kind", "duration", "workloads"):
        phases.add_column(col)
    for p in s.phases:
        work = "; ".join(
            f"{w.rw} {_block_sizes(w)} QD{w.iodepth} x{w.jobs}"
            + (f" read {w.read_pct:g}%" if w.read_pct is not None else "")
            for w in p.workloads
        )
        duration = format_duration(p.duration) if p.duration is not None else "working set once"
        add_row(phases, p.name, p.kind, duration, work)
    return Group(head, Text(""), params, Text(""), phases)


def doctor_view(report: Any) -> Group:
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="bold")
    grid.add_column()
    d = report.disclosure
    add_row(grid, "target", f"{report.path} ({report.kind})")
    for t in d.targets:
        fs = t.get("filesystem") or {}
        if fs:
            add_row(
                grid, "filesystem", f"{fs.get('type')} on {fs.get('source')} ({fs.get('options')})"
            )
        for dev in t.get("backing_devices", []):
            loop = dev.get("loop") or {}
            over = (
                f", over {loop.get('backing_file')} on {loop.get('backing_filesystem')} "
                f"(direct I/O {'on' if loop.get('direct_io') else 'off'})"
                if loop
                else ""
            )
            add_row(
                grid,
                f"device {dev.get('name')}",
                f"{dev.get('model') or dev.get('vendor') or '?'}, {dev.get('transport')}{over}, "
                f"{'rotational' if dev.get('rotational') else 'non-rotational'}, "
                f"scheduler {dev.get('scheduler')}, write cache {dev.get('write_cache')}",
            )
    add_row(grid, "interface limit", limit_text(report.limit))
    add_row(grid, "direct I/O engine", report.engine or "none works here")
    cpu, mem = d.section("cpu") or {}, d.section("memory") or {}
    add_row(
        grid,
        "cpu",
        f"{cpu.get('model')} x{cpu.get('logical_cpus')}, governor {cpu.get('governor')}",
    )
    if mem.get("total_bytes"):
        add_row(grid, "memory", format_bytes(mem["total_bytes"]))
    parts: list = [grid, Text("")]
    parts += findings_block(report.findings) or [Text("no problems found", style="green")]
    return Group(*parts)


def generator_view(g: Any) -> Group:
    shape = g.ceiling.shape
    return Group(
        Text(
            f"{g.fio_version} on this machine ({g.usable_cpus:g} usable "
            f"CPU{'s' if g.usable_cpus != 1 else ''}: {g.affinity}) "
            f"generates {format_si(g.ceiling.iops)} IOPS with {shape.jobs} job"
            f"{'s' if shape.jobs != 1 else ''} × QD {shape.iodepth}, {shape.rw} "
            f"{format_bytes(shape.bs)}, on its null engine ({g.seconds:g} s; no storage touched)"
        ),
        Text(
            f"  a phase above {format_si(g.measurable_iops)} IOPS with these jobs measures fio "
            "as much as the storage: use more jobs on more CPUs, a deeper queue or a cheaper "
            "engine"
        ),
    )


def data_pattern_view(p: Any) -> Group:
    claimed = f"compress {p.compress_pct:g}%, dedupe {p.dedupe_pct:g}%"
    return Group(
        Text(f"data pattern ({claimed}), {format_bytes(p.sample_bytes)} sample written by fio:"),
        Text(
            f"  zlib (level 6) compresses it to {p.zlib_ratio * 100:.1f}% of its size "
            f"(saves {p.saved_by_compression * 100:.1f}%)"
        ),
        Text(f"  {p.duplicate_fraction * 100:.1f}% of its 4 KiB blocks are duplicates"),
    )
