"""The impact of an event (a host stopped, a device throttled, a failover) on
a phase's per-second series, as availability tests report it (Nutanix
X-Ray's scenarios): the level before, how deep it fell, how long until it was
back for good, and the I/O it cost.

A second is the one-second window ending at ``t_s``; it is *before* the event
when it ends at or before the event's time and *after* it otherwise (so the
second the event falls in counts after). Pure functions: no I/O, no printing.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, fields
from typing import Any

import numpy as np

from iorig.model import (
    ALL,
    EventRecord,
    Metric,
    PhaseResult,
    Series,
    errors_by_type,
    histogram,
)

MIN_BASELINE_S = 3  # fewer seconds make a median that one odd second decides
_EPS = 1e-6  # float slack when comparing times made of wall-clock differences


@dataclass(frozen=True)
class ImpactSettings:
    baseline_s: float = 10.0  # the baseline is the median of this many seconds before the event
    tolerance_pct: float = 10.0  # recovered: within ± this % of the baseline ...
    settle_s: float = 10.0  # ... for this many seconds in a row

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if not (isinstance(value, int | float) and value > 0 and math.isfinite(value)):
                raise ValueError(f"{f.name} must be a positive number, not {value!r}")
        if self.baseline_s < MIN_BASELINE_S:  # else every baseline would be refused
            raise ValueError(f"baseline_s must be at least {MIN_BASELINE_S} s")


@dataclass(frozen=True)
class Impact:
    """One event's impact; None where it cannot be told (``note`` says why)."""

    baseline: float | None  # median per-second headline (IOPS or bytes/s) before the event
    baseline_p99_ns: float | None  # p99 of the baseline seconds' merged histograms
    dip_pct: float | None  # lowest second after the event, % of baseline
    dip_at_s: float | None  # when that second ends, seconds after the event
    worst_p99_ns: float | None  # worst per-second p99 from the event to recovery
    recovery_s: float | None  # event -> back in the band for good (0.1 s); None if never
    recovered: bool
    observed_s: float  # seconds of series after the event
    lost_ios: float | None  # I/Os short of the IOPS baseline, event to recovery
    lost_bytes: float | None  # bytes short of the bytes/s baseline, likewise
    errors: int  # I/O errors fio reported in the event's phase (the whole phase)
    metric: Metric
    note: str = ""
    # those errors per type, "read: Input/output error" -> count, most first
    errors_by_type: dict[str, int] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready: floats rounded to what they can tell, None kept."""
        out: dict[str, Any] = {f.name: getattr(self, f.name) for f in fields(self)}
        out["errors_by_type"] = dict(self.errors_by_type)
        for name, digits in _DIGITS.items():
            if out[name] is not None:
                out[name] = round(float(out[name]), digits or None)  # 0 digits: an int
        return out | {"metric": str(self.metric)}


_DIGITS = {
    "baseline": 1,
    "baseline_p99_ns": 0,
    "dip_pct": 1,
    "dip_at_s": 1,
    "worst_p99_ns": 0,
    "recovery_s": 1,
    "observed_s": 1,
    "lost_ios": 0,
    "lost_bytes": 0,
}


def per_second_p99_ns(series: Series) -> np.ndarray:
    """The p99 of each second's histogram row; NaN for a second without
    completions, and for every second when fio logged no histograms."""
    if len(series.hist) != len(series):
        return np.full(len(series), np.nan)
    return series.hist.percentile_each(99.0)


def _merged_p99_ns(series: Series, rows: np.ndarray) -> float | None:
    # Percentiles never average: the seconds' counts are added, then read.
    if len(series.hist) != len(series):
        return None
    p99 = histogram.percentiles(series.hist.merged(rows), (99.0,))[99.0]
    return None if math.isnan(p99) else p99


def _settled_at(t: np.ndarray, inside: np.ndarray, settle_s: float) -> int | None:
    """First index from which ``settle_s`` consecutive seconds are all inside."""
    n = max(1, math.ceil(settle_s - _EPS))
    for k in range(inside.size - n + 1):
        # consecutive seconds only: a cut in the series proves nothing
        if inside[k : k + n].all() and t[k + n - 1] - t[k] <= n - 1 + _EPS:
            return k
    return None


def impact_of(
    series: Series,
    metric: Metric,
    event_t_s: float,
    settings: ImpactSettings = ImpactSettings(),
    errors: int = 0,
    by_type: dict[str, int] | None = None,
) -> Impact:
    """The impact of an event at ``event_t_s`` (seconds on the series' own
    axis, since fio's jobs started) on ``series``, judged on ``metric``."""
    t = np.asarray(series.t_s, dtype=float)
    level = np.asarray(series.values(metric), dtype=float)
    notes: list[str] = []
    by_type = dict(by_type or {})

    # Baseline: the last whole seconds before the event, at most baseline_s of them.
    ended = t <= event_t_s + _EPS
    last = t[ended].max() if ended.any() else 0.0
    before = ended & (t - 1 >= last - settings.baseline_s - _EPS)
    baseline = base_iops = base_bytes = base_p99 = None
    if (n_before := int(before.sum())) < MIN_BASELINE_S:
        notes.append(f"only {n_before} s before the event; baseline needs {MIN_BASELINE_S}")
    else:
        baseline = float(np.median(level[before]))
        base_iops = float(np.median(series.iops[before]))
        base_bytes = float(np.median(series.bytes_per_s[before]))
        base_p99 = _merged_p99_ns(series, before)
        if baseline <= 0:
            notes.append("baseline is zero: no dip or recovery to measure")

    after = np.flatnonzero(~ended)
    if after.size == 0:
        notes.append("no seconds after the event")
        return Impact(
            baseline,
            base_p99,
            None,
            None,
            None,
            None,
            False,
            0.0,
            None,
            None,
            errors,
            metric,
            "; ".join(notes),
            by_type,
        )
    ta, va = t[after], level[after]
    observed_s = float(ta[-1] - max(event_t_s, ta[0] - 1))
    low = int(np.argmin(va))
    dip_at_s = round(float(ta[low]) - event_t_s, 1)
    dip_pct = float(va[low] / baseline * 100) if baseline else None

    settled = None
    if baseline:
        inside = np.abs(va - baseline) <= baseline * settings.tolerance_pct / 100 + _EPS
        settled = _settled_at(ta, inside, settings.settle_s)
        if settled is None:
            notes.append(
                f"not within ±{settings.tolerance_pct:g} % of the baseline for "
                f"{settings.settle_s:g} s in the {observed_s:.1f} s observed"
            )
    recovery_s = None if settled is None else round(max(0.0, float(ta[settled]) - 1 - event_t_s), 1)

    # Losses up to the recovering second (or the end); latency at least over the
    # event's own second, so a recovery at 0 s still says what the event cost.
    span = after[: len(after) if settled is None else settled]
    p99 = per_second_p99_ns(series)[after[: max(1, span.size)]]
    worst_p99 = None if np.isnan(p99).all() else float(np.nanmax(p99))

    def lost(values: np.ndarray, base: float | None) -> float | None:
        return None if base is None else float(np.maximum(0.0, base - values[span]).sum())

    return Impact(
        baseline=baseline,
        baseline_p99_ns=base_p99,
        dip_pct=dip_pct,
        dip_at_s=dip_at_s,
        worst_p99_ns=worst_p99,
        recovery_s=recovery_s,
        recovered=settled is not None,
        observed_s=round(observed_s, 1),
        lost_ios=lost(np.asarray(series.iops, dtype=float), base_iops),
        lost_bytes=lost(np.asarray(series.bytes_per_s, dtype=float), base_bytes),
        errors=errors,
        metric=metric,
        note="; ".join(notes),
        errors_by_type=by_type,
    )


def phase_impacts(
    phase: PhaseResult, settings: ImpactSettings = ImpactSettings()
) -> list[tuple[EventRecord, Impact | None]]:
    """Each event of the phase, in order, with its impact on the aggregate
    ``all`` series; None for an event that ends a disturbance (start-host,
    unthrottle), one that never happened, or a phase without that series.

    The event is placed at ``event.started_at - phase.origin``: exact where
    fio's logs carry wall-clock times (fio servers); on this machine the
    origin is when fio's live status said its jobs began (runs stored
    before it: when iorig launched fio, up to fio's start-up early).

    Errors are the phase's (fio reports them per phase, not per second):
    every I/O error fio reported, or for runs stored before iorig counted
    them, the fio jobs that ended with an error.
    """
    agg = phase.aggregate
    series = agg.series.get(ALL) if agg is not None else None
    out: list[tuple[EventRecord, Impact | None]] = []
    for event in phase.events:
        at_s = phase.event_at_s(event)
        if agg is None or series is None or not event.action.disturbs or at_s is None:
            out.append((event, None))
            continue
        errors = phase.io_error_total if phase.io_errors else agg.errors
        by_type = errors_by_type(phase.io_errors)
        out.append((event, impact_of(series, phase.headline, at_s, settings, errors, by_type)))
    return out


@dataclass(frozen=True)
class EventImpact:
    """An event of a run with the phase it happened in and its impact."""

    phase: str
    repeat: int
    event: EventRecord
    impact: Impact | None
    at_s: float | None = None  # where it fell on its phase's axis (PhaseResult.event_at_s)


def settings_of(resolved: dict[str, Any]) -> ImpactSettings:
    """The scenario's ``impact:`` rule (runs stored before it: the defaults)."""
    rule = resolved.get("impact")
    if not isinstance(rule, dict):
        return ImpactSettings()
    try:
        return ImpactSettings(
            float(rule["baseline"]), float(rule["tolerance"]), float(rule["settle"])
        )
    except (KeyError, TypeError, ValueError):
        return ImpactSettings()


def run_impacts(phases: Sequence[PhaseResult], resolved: dict[str, Any]) -> list[EventImpact]:
    """Every event of a run, in phase order, with its impact."""
    settings = settings_of(resolved)
    return [
        EventImpact(p.name, p.repeat, event, impact, p.event_at_s(event))
        for p in phases
        for event, impact in phase_impacts(p, settings)
    ]
