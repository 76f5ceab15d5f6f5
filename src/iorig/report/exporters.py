"""One renderer interface and one registry, used by `show`, `compare` and
`report` alike: a format renders a run's analysis or a comparison to text."""

from __future__ import annotations

from typing import Protocol

from iorig.analyze.analysis import Comparison, RunAnalysis
from iorig.report.options import RenderOptions
from iorig.report.writers.jsoncsv import CsvExporter, JsonExporter
from iorig.report.writers.markdown import MarkdownExporter
from iorig.report.writers.seconds import SecondsExporter
from iorig.report.writers.text import TextExporter


class Exporter(Protocol):
    def run(self, analysis: RunAnalysis, options: RenderOptions) -> str: ...

    def comparison(self, cmp: Comparison, options: RenderOptions) -> str: ...


class _Html:
    """The HTML exporter, imported when a report is asked for: jinja2 and
    the report's module are a tenth of what every ``iorig`` start imports."""

    def run(self, analysis: RunAnalysis, options: RenderOptions) -> str:
        from iorig.report.writers.html import HtmlExporter

        return HtmlExporter().run(analysis, options)

    def comparison(self, cmp: Comparison, options: RenderOptions) -> str:
        from iorig.report.writers.html import HtmlExporter

        return HtmlExporter().comparison(cmp, options)


EXPORTERS: dict[str, Exporter] = {
    "text": TextExporter(),
    "md": MarkdownExporter(),
    "json": JsonExporter(),
    "csv": CsvExporter(),
    "seconds": SecondsExporter(),
    "html": _Html(),
}


def render(
    fmt: str, subject: RunAnalysis | Comparison, options: RenderOptions | None = None
) -> str:
    exporter = EXPORTERS[fmt]
    options = options or RenderOptions()
    if isinstance(subject, Comparison):
        return exporter.comparison(subject, options)
    return exporter.run(subject, options)
