"""The full-disclosure page (``iorig report RUN --disclosure``): one run, or
one load-point curve, in the order of a SPECstorage full disclosure report
(seed 004) — headline and load points, product and test information, bill
of materials, configuration and tuning, what iorig measured about the load
generators, the audit's findings and every phase's fio job file. What the
user did not describe is listed as "not disclosed". No scripts: the page's
Content-Security-Policy allows none, and every string is escaped."""

from __future__ import annotations

import datetime as dt
from typing import Any

import jinja2

from iorig import __version__
from iorig.analyze.analysis import RunAnalysis
from iorig.model.records import flatten, target_name
from iorig.report.tables.model import TableModel
from iorig.report.tables.run import summary_tables
from iorig.report.tables.searches import search_tables
from iorig.report.tables.sut import sut_tables
from iorig.report.tables.training import checkpoint_tables, training_tables
from iorig.report.writers.terminal import limit_text
from iorig.units import format_bytes

_ENV = jinja2.Environment(
    loader=jinja2.PackageLoader("iorig.report", "templates"),
    autoescape=True,
    undefined=jinja2.StrictUndefined,
)

# The user's sections grouped as seed 004's report groups them.
_PRODUCT = ("Product and test information", "Product")
_BILL = ("Bill of materials", "Component software")


def _when(ts: float | None) -> str:
    return "-" if ts is None else dt.datetime.fromtimestamp(ts).strftime("%Y-%m-%d %H:%M:%S")


def _group(tables: list[TableModel], prefixes: tuple[str, ...]) -> list[TableModel]:
    return [t for t in tables if t.title.split(" (")[0].split(":")[0] in prefixes]


def disclosure_context(analysis: RunAnalysis) -> dict[str, Any]:
    """What the page shows, in its order (pure: tested without a browser)."""
    run = analysis.run
    given = run.job_file
    described = sut_tables(run.sut)
    product, bill = _group(described, _PRODUCT), _group(described, _BILL)
    configuration = [t for t in described if t not in product and t not in bill]
    return {
        "run": {
            "id": run.id,
            "label": run.name,
            "title": run.title,
            "scenario": f"{run.scenario} v{run.scenario_version} ({run.scenario_origin})",
            "status": str(run.status),
            "error": run.error,
            "started": _when(run.started_at),
            "ended": _when(run.ended_at),
            "command": run.command,
            "iorig": run.iorig_version,
            "fio": run.fio_version,
            "hosts": ", ".join(run.hosts),
            "params": [f"{name}={p['text']}" for name, p in run.params.items()],
            "targets": [
                f"{target_name(t)}: {t['path']} ({t['kind']}, {format_bytes(t['size_bytes'])})"
                for t in run.targets
            ],
        },
        # MLPerf Storage-like results first: what such a run is stated by
        "headline": training_tables(analysis)[:1]
        + checkpoint_tables(analysis)[:1]
        + summary_tables(analysis.measured)
        + search_tables(analysis.search),
        "product": product,
        "bill": bill,
        "configuration": configuration,
        "measured": [
            (section, list(flatten(content).items()))
            for section, content in run.disclosure.sections.items()
        ],
        "limit": limit_text(run.disclosure.interface_limit) if run.disclosure else None,
        "findings": sorted(run.warnings, key=lambda w: w.severity != "warning"),
        # the fio job file the run ran, as given, before each phase's as run
        "jobs": ([] if given is None else [(f"the fio job file as given: {given[0]}", given[1])])
        + list(analysis.job_texts.items()),
    }


def render_disclosure(analysis: RunAnalysis) -> str:
    return _ENV.get_template("disclosure.html.j2").render(
        version=__version__,
        generated=dt.datetime.now().strftime("%Y-%m-%d %H:%M:%S"),
        **disclosure_context(analysis),
    )
