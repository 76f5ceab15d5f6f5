"""Tables for search runs (sweep, knee, load-point curve) as plain
TableModels, rendered by the terminal, Markdown and HTML front ends."""

from __future__ import annotations

from iorig.analyze.search import Sweep, search_kind, sweep_of
from iorig.report.tables import TableModel
from iorig.store import StoredRun
from iorig.units import format_latency, format_rate, format_si


def sweep_table(sweep: Sweep, title: str = "Sweep") -> TableModel:
    """One row per point: its coordinates, throughput both ways, latency."""
    with_test = any(p.test for p in sweep.points)
    repeats = any(len(p.phase.repeat_levels) > 1 for p in sweep.points)
    headers = [*(("test",) if with_test else ()), *sweep.axes, "IOPS", "MB/s", "mean lat", "p99"]
    if repeats:
        headers.append("repeats")
    headers.append("status")
    rows = []
    for p in sweep.points:
        ph = p.phase
        row = [*((p.test,) if with_test else ()), *(p.coords.get(a, "") for a in sweep.axes)]
        row += [format_si(ph.iops), format_rate(ph.bytes_per_s)]
        row += [format_latency(ph.lat_mean_ns), format_latency(ph.lat_p99_ns)]
        if repeats:
            row.append(str(len(ph.repeat_levels)))
        row.append(ph.status)
        rows.append(tuple(row))
    n_lead = len(headers) - 4 - (1 if repeats else 0) - 1
    align = ("l",) * n_lead + ("r",) * (len(headers) - n_lead - 1) + ("l",)
    return TableModel(
        title,
        tuple(headers),
        tuple(rows),
        align,
        (
            "IOPS and MB/s are whole-phase means (over all repeats); latency is fio's completion "
            "latency, p99 from the merged histograms",
        ),
    )


def search_tables(stored: StoredRun) -> list[TableModel]:
    """The tables that say what a search run found (empty for other runs)."""
    kind = search_kind(stored)
    if kind == "sweep":
        sweep = sweep_of(stored)
        return [sweep_table(sweep)] if sweep and sweep.points else []
    return []
