"""Rich renderables for the terminal. Pure: they build tables, the CLI prints."""

from __future__ import annotations

import datetime as dt
import math

from rich.console import Group
from rich.table import Table
from rich.text import Text

from iorig.analyze.summary import PhaseSummary, series_stats
from iorig.scenario import ResolvedScenario, ScenarioSource
from iorig.store import RunRecord
from iorig.units import format_bytes, format_duration, format_latency, format_rate, format_si

STATUS_STYLE = {"ok": "green", "running": "cyan", "failed": "red", "aborted": "yellow"}
METRIC_LABEL = {"iops": "IOPS", "bytes_per_s": "bytes/s"}


def format_metric(headline: str, value: float) -> str:
    return format_si(value) if headline == "iops" else format_rate(value)


def when(timestamp: float | None) -> str:
    if timestamp is None:
        return "-"
    return dt.datetime.fromtimestamp(timestamp).strftime("%Y-%m-%d %H:%M:%S")


def status_text(status: str) -> Text:
    return Text(status, style=STATUS_STYLE.get(status, ""))


def _percent(value: float) -> str:
    return "-" if value is None or math.isnan(value) else f"{value * 100:.1f}%"


def run_header(run: RunRecord, engines: list[str]) -> Table:
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="bold")
    grid.add_column()
    grid.add_row("run", f"{run.id}  {run.title}")
    grid.add_row("scenario", f"{run.scenario} v{run.scenario_version} ({run.scenario_origin})")
    grid.add_row("status", status_text(run.status))
    if run.error:
        grid.add_row("error", Text(run.error, style="red"))
    for t in run.targets:
        size = format_bytes(t["size_bytes"])
        grid.add_row(f"target {t['role']}", f"{t['path']} ({t['kind']}, {size})")
    grid.add_row("host", ", ".join(run.hosts))
    grid.add_row("fio", run.fio_version + (f", engine {', '.join(engines)}" if engines else ""))
    ended = run.ended_at or run.started_at
    grid.add_row("started", f"{when(run.started_at)} ({format_duration(ended - run.started_at)})")
    changed = [
        f"{name}={p['text']}" for name, p in run.params.items() if p.get("origin") != "default"
    ]
    if run.profile:
        grid.add_row(
            "profile",
            Text(
                f"{run.profile}: shortened for a fast look; not figures to decide on",
                style="yellow",
            ),
        )
    if changed:
        grid.add_row("parameters", ", ".join(changed))
    for w in run.warnings:
        grid.add_row("note", Text(w.get("message", ""), style="yellow"))
    return grid


def throughput_table(summaries: list[PhaseSummary]) -> Table:
    """Seed 000's three figures per phase: median, maximum and minimum per second."""
    table = Table(title="Throughput per second", title_justify="left", header_style="bold")
    table.add_column("phase", no_wrap=True)
    table.add_column("metric", no_wrap=True)
    for name in ("median", "maximum", "minimum"):
        table.add_column(name, justify="right", no_wrap=True)
    table.add_column("CoV", justify="right", no_wrap=True)
    for s in summaries:
        stats = s.per_second
        table.add_row(
            _phase_label(s),
            METRIC_LABEL[s.headline],
            format_metric(s.headline, stats.median),
            format_metric(s.headline, stats.maximum),
            format_metric(s.headline, stats.minimum),
            _percent(stats.cov),
        )
    return table


def latency_table(summaries: list[PhaseSummary]) -> Table:
    table = Table(
        title="Completion latency (percentiles from merged histograms)",
        title_justify="left",
        header_style="bold",
    )
    table.add_column("phase", no_wrap=True)
    for name in ("mean", "p50", "p99", "p99.9", "max"):
        table.add_column(name, justify="right", no_wrap=True)
    for s in summaries:
        pct = s.lat_percentiles_ns
        table.add_row(
            _phase_label(s),
            format_latency(s.lat_mean_ns),
            format_latency(pct.get(50.0)),
            format_latency(pct.get(99.0)),
            format_latency(pct.get(99.9)),
            format_latency(s.lat_max_ns),
        )
    return table


def _phase_label(s: PhaseSummary) -> Text:
    label = s.name if not s.repeat else f"{s.name} #{s.repeat + 1}"
    if s.status != "ok":
        return Text.assemble(label, " ", (f"({s.status})", STATUS_STYLE.get(s.status, "")))
    return Text(label)


def phase_notes(summaries: list[PhaseSummary]) -> list[Text]:
    notes = []
    for s in summaries:
        if s.per_second.n and s.per_second.n < 5:
            notes.append(
                Text(
                    f"{s.name}: only {s.per_second.n} whole seconds of samples; median, maximum "
                    "and minimum say little (use a longer duration)",
                    style="yellow",
                )
            )
        if s.error:
            notes.append(Text(f"{s.name}: {s.error}", style="red"))
    return notes


def run_report(run: RunRecord, summaries: list[PhaseSummary], engines: list[str]) -> Group:
    parts: list = [run_header(run, engines), Text("")]
    if summaries:
        parts += [throughput_table(summaries), latency_table(summaries)]
        parts += phase_notes(summaries)
    else:
        parts.append(Text("no measured phase finished", style="yellow"))
    return Group(*parts)


def runs_table(runs: list[RunRecord], headlines: dict[str, list[tuple[str, str, list]]]) -> Table:
    table = Table(header_style="bold")
    for col in ("id", "started", "scenario", "status"):
        table.add_column(col, no_wrap=True)
    table.add_column("target", overflow="fold")
    table.add_column("median per second", overflow="fold")
    for run in runs:
        parts = []
        for name, metric, values in headlines.get(run.id, []):
            median = series_stats(values).median
            parts.append(f"{name} {format_metric(metric, median)}")
        target = ", ".join(t["given"] for t in run.targets)
        scenario = run.scenario + (f" ({run.profile})" if run.profile else "")
        table.add_row(
            run.id,
            when(run.started_at),
            scenario,
            target,
            status_text(run.status),
            " · ".join(parts),
        )
    return table


def scenarios_table(sources: list[ScenarioSource]) -> Table:
    table = Table(header_style="bold")
    table.add_column("name")
    table.add_column("title")
    table.add_column("phases")
    for src in sources:
        data = src.doc.data
        phases = data.get("phases", [])
        measured = [p.get("name", "?") for p in phases if p.get("kind") == "measure"]
        table.add_row(src.name, str(data.get("title", "")), ", ".join(measured))
    return table


def scenario_detail(resolved: ResolvedScenario) -> Group:
    s = resolved.scenario
    head = Text.assemble(
        (f"{s.name} v{s.version}", "bold"), f" — {s.title}\n", s.description.strip()
    )
    params = Table(title="Parameters", title_justify="left", header_style="bold")
    for col in ("name", "type", "default", *s.profiles.keys(), "help"):
        params.add_column(col)
    for name, spec in s.parameters.items():
        profile_values = [str(s.profiles[p].get(name, "")) for p in s.profiles]
        params.add_row(name, spec.type, str(spec.default), *profile_values, spec.help)
    phases = Table(title="Phases (defaults)", title_justify="left", header_style="bold")
    for col in ("phase", "kind", "duration", "workloads"):
        phases.add_column(col)
    for p in s.phases:
        work = "; ".join(
            f"{w.rw} {format_bytes(w.bs)} QD{w.iodepth} x{w.jobs}"
            + (f" read {w.read_pct:g}%" if w.read_pct is not None else "")
            for w in p.workloads
        )
        duration = format_duration(p.duration) if p.duration is not None else "working set once"
        phases.add_row(p.name, p.kind, duration, work)
    return Group(head, Text(""), params, Text(""), phases)
