"""What a renderer may be asked besides the analysis itself."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class RenderOptions:
    as_percent: bool = False  # comparisons: each run as % of the baseline
    limit_bytes_per_s: float | None = None  # comparisons: throughput as % of this limit
    jobs: bool = False  # text: each phase's fio job file after the tables
    width: int | None = None  # text: the terminal's width
    color: bool = False  # text: ANSI colours
