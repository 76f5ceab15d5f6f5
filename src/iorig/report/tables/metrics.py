"""How each headline metric is named, scaled and written: defined once for
every renderer (terminal, Markdown, JSON, CSV, HTML)."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from iorig.model import Metric
from iorig.units import format_rate, format_si


@dataclass(frozen=True)
class MetricFormat:
    label: str  # in table titles and columns: "IOPS", "bytes/s"
    unit: str  # of charts and plain numbers: "IOPS", "MB/s"
    scale: float  # value × scale is in ``unit``
    _format: Callable[[float], str]

    def format(self, value: float | None) -> str:
        """For people: "12.3K", "1.25 GB/s" ("-" when unknown)."""
        if value is None or math.isnan(value):
            return "-"
        return self._format(value)

    def with_unit(self, value: float | None) -> str:
        """ "12.3K IOPS", "1.25 GB/s": unambiguous on its own."""
        text = self.format(value)
        return f"{text} IOPS" if self.label == "IOPS" and text != "-" else text

    def number(self, value: float | None) -> str:
        """In ``unit`` without the unit, for a column headed with it."""
        if value is None or math.isnan(value):
            return "-"
        return format_si(value) if self.label == "IOPS" else f"{value * self.scale:,.1f}"


METRICS: dict[Metric, MetricFormat] = {
    Metric.IOPS: MetricFormat("IOPS", "IOPS", 1.0, format_si),
    Metric.BYTES_PER_S: MetricFormat("bytes/s", "MB/s", 1e-6, format_rate),
}


def metric(m: Metric | str) -> MetricFormat:
    return METRICS[Metric(m)]
