"""iorig's result model: plain, frozen data and pure operations on it.

The bottom layer: it imports nothing else of iorig, and everything else may
import it. Parsing, storing, analysing and rendering all speak these types.
"""

from iorig.model.events import EventAction, EventRecord, EventStatus
from iorig.model.kinds import (
    ALL,
    DDIRS,
    Change,
    Metric,
    Outcome,
    PhaseKind,
    PhaseStatus,
    RunStatus,
)
from iorig.model.precision import AB_SIDES, AbLink, PrecisionState
from iorig.model.records import Disclosure, Finding, InterfaceLimit, RunRecord, StoredRun
from iorig.model.results import (
    AGGREGATE,
    ERROR_KINDS,
    GeneratorCpu,
    HeadlineOf,
    IoErrorCount,
    PhaseResult,
    Scope,
    ScopeKind,
    ScopeResult,
    Series,
    Totals,
    errors_by_type,
)
from iorig.model.secondhists import SecondHists
from iorig.model.stats import SeriesStats, Spread, series_stats, spread
from iorig.model.steady import SteadyState, WindowCheck, check_window
from iorig.model.sut import SutRecord, SystemUnderTest

__all__ = [
    "AB_SIDES",
    "AGGREGATE",
    "ALL",
    "DDIRS",
    "ERROR_KINDS",
    "AbLink",
    "Change",
    "Disclosure",
    "EventAction",
    "EventRecord",
    "EventStatus",
    "Finding",
    "GeneratorCpu",
    "HeadlineOf",
    "InterfaceLimit",
    "IoErrorCount",
    "Metric",
    "Outcome",
    "PhaseKind",
    "PhaseResult",
    "PhaseStatus",
    "PrecisionState",
    "RunRecord",
    "RunStatus",
    "Scope",
    "ScopeKind",
    "ScopeResult",
    "SecondHists",
    "Series",
    "SeriesStats",
    "Spread",
    "SteadyState",
    "StoredRun",
    "SutRecord",
    "SystemUnderTest",
    "Totals",
    "WindowCheck",
    "check_window",
    "errors_by_type",
    "series_stats",
    "spread",
]
