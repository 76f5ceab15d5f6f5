"""What a renderer may be asked besides the analysis itself."""

from __future__ import annotations

from dataclasses import dataclass

from iorig.model import Metric


@dataclass(frozen=True)
class Limit:
    """A figure to divide by: an interface's bandwidth or a device's rating."""

    value: float
    metric: Metric  # IOPS or bytes/s: the per-second series it divides
    source: str = ""  # where it came from, e.g. the device and link


@dataclass(frozen=True)
class RenderOptions:
    as_percent: bool = False  # comparisons: each run as % of the baseline
    limit: Limit | None = None  # throughput as % of this limit
    jobs: bool = False  # text: each phase's fio job file after the tables
    width: int | None = None  # text: the terminal's width
    color: bool = False  # text: ANSI colours
    # text: the output is no terminal (a pipe, a file, a CI log): tables at their
    # natural width and lines never wrapped, whatever the width says
    piped: bool = False
    # html: plotly from this address of the page's own site (iorig serve,
    # cached once) instead of inlined (a report file stands alone: 4.9 MB)
    plotly_src: str | None = None
