"""`iorig show RUN --timeline`: the run's phases one line each, in order,
with a sparkline of the throughput of each second. Pure: it returns rich
Text lines (user text never parsed as markup); the CLI prints them, and
rich drops the colours when stdout is not a terminal.

Every sparkline is scaled to the run's highest second, so a line's height
compares with every other line's. A phase longer than the room on its line
is shown in slices of equal length, each the mean throughput of its
seconds (throughput averages; percentiles would not, and are not shown
per slice: the line gives the range of the per-second p99 instead).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence

import numpy as np
from rich.text import Text

from iorig.model import EventStatus, PhaseKind, series_stats
from iorig.report.tables.metrics import metric
from iorig.report.tables.timeline import PhaseSpan, Timeline
from iorig.report.writers.terminal import CELL_CHARS, STATUS_STYLE, clip
from iorig.units import format_latency

BLOCKS = "▁▂▃▄▅▆▇█"
ASCII = "_.-:=+*#"  # where the output cannot encode the blocks (nor µ, – or ↳)
NAME_CHARS = 24
_ASCII = str.maketrans({"↳": "-", "–": "-", "µ": "u"})  # iorig's own characters in the lines
MIN_SPARK = 8


def downsample(values: Sequence[float], width: int) -> list[float]:
    """``values`` in at most ``width`` slices of (nearly) equal length, each
    the mean of its values; unchanged when they fit."""
    if width < 1:
        return []
    if len(values) <= width:
        return list(values)
    edges = np.linspace(0, len(values), width + 1).round().astype(int)
    array = np.asarray(values, dtype=float)
    return [float(array[a:b].mean()) for a, b in itertools.pairwise(edges)]


def sparkline(values: Sequence[float], top: float, width: int, chars: str = BLOCKS) -> str:
    """One character per value (after ``downsample`` to ``width``): the
    lowest for 0 up to the highest for ``top`` and above."""
    levels = len(chars)
    out = []
    for v in downsample(values, width):
        level = 0 if top <= 0 or math.isnan(v) else int(v / top * levels)
        out.append(chars[max(0, min(levels - 1, level))])
    return "".join(out)


def clock(seconds: float) -> str:
    """``4.2s``, ``3:05``, ``1:02:03``: an offset or a duration on the axis."""
    if seconds < 60:
        return f"{seconds:.1f}s"
    minutes, secs = divmod(round(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


def _one_line(text: str, limit: int = CELL_CHARS) -> str:
    """User text on one line (no newline to break the layout), clipped."""
    return clip(" ".join(text.split()), limit)


def _latency(ns: float) -> str:
    return format_latency(ns).replace(" ", "")


def _columns(phase: PhaseSpan, name: str, timeline: Timeline) -> list[str]:
    """Name, kind, status, start, duration, median and p99 range (of the
    aggregate's seconds)."""
    cells = [name, phase.kind, phase.status, f"+{clock(phase.start_s)}", clock(phase.duration_s)]
    samples = phase.samples.get(None)
    if samples is None:
        return [*cells, "", ""]
    median = metric(timeline.metric).with_unit(series_stats(samples.throughput).median)
    p99 = [v for v in samples.p99_ns if v is not None]
    low, high = (_latency(min(p99)), _latency(max(p99))) if p99 else ("-", "-")
    return [*cells, median, f"p99 {low}" if low == high else f"p99 {low}–{high}"]


_RIGHT = (3, 4, 5)  # start, duration, median: right-aligned


def timeline_lines(timeline: Timeline, width: int = 100, *, unicode: bool = True) -> list[Text]:
    """A heading, then per phase: name, kind, status, start (since the
    first phase started), duration, median per second, p99 range and the
    sparkline (within ``width``, or on a line of its own when the figures
    leave it no room); its events under it. ``unicode=False``: ASCII only."""
    unit = metric(timeline.metric)
    top = timeline.max_throughput
    chars = BLOCKS if unicode else ASCII
    lines = [
        Text(
            "start: since the first phase started; p99: the range of each second's p99", style="dim"
        ),
        Text(
            f"{unit.unit} per second: median; sparklines scaled to the run's highest second "
            f"({unit.with_unit(top) if top else '-'})",
            style="dim",
        ),
    ]
    rows = [_columns(p, _one_line(p.label, NAME_CHARS), timeline) for p in timeline.phases]
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))] if rows else []
    for phase, row in zip(timeline.phases, rows, strict=True):
        line = Text()
        for i, cell in enumerate(row):
            text = cell.rjust(widths[i]) if i in _RIGHT else cell.ljust(widths[i])
            style = STATUS_STYLE.get(cell, "") if i == 2 else ""
            line.append(text + ("  " if i < len(row) - 1 else ""), style=style)
        samples = phase.samples.get(None)
        if samples is None:
            line.rstrip()
            line.append("  no I/O" if phase.kind is PhaseKind.IDLE else "  no per-second figures")
            lines.append(line)
            continue
        room = width - len(line) - 2
        if room < MIN_SPARK:  # a narrow terminal: the sparkline on a line of its own
            line.rstrip()
            lines.append(line)
            line, room = Text("    "), max(MIN_SPARK, width - 4)
        else:
            line.append("  ")
        line.append(sparkline(samples.throughput, top, room, chars), style="cyan")
        lines.append(line)
        for mark in phase.marks:
            status = "" if mark.status is EventStatus.DONE else f" ({mark.status})"
            lines.append(
                Text(
                    f"    ↳ {_one_line(mark.label)}{status} at +{clock(mark.offset_s)} "
                    f"into the phase (start +{clock(mark.x_s)})",
                )
            )
    if not unicode:
        for line in lines:  # same lengths: the styles stay where they were
            line.plain = line.plain.translate(_ASCII)
    return lines
