"""Load-point curves and SPEC's overall response time (docs/methodology.md §5 and §7).

ORT follows the SPECstorage Solution 2020 Run and Reporting Rules ("Overall
response time calculation"): the area under the latency-versus-throughput
curve divided by the throughput range, with no assumed origin point, only
measured points. Exactly as SPEC's reporting tool computes it, over
(achieved ops/s, average latency ms) pairs in run order:

    ORT = Σ_i |x_{i+1} − x_i| · (y_i + y_{i+1}) / 2  /  (max x − min x)

Load-point rules (same document): at least 10 points, in one run from lowest
to highest load, uniformly spaced: with spacing = max load / number of points,
point i (0-based) must be within 30 % of its nominal value (i + 1) × spacing,
which also puts the first point one spacing from zero.

At a fixed requested rate fio measures latency from issue, not from when the
I/O was due, so a point that fell behind hides its queueing (coordinated
omission): achieved and requested rates are compared for every point, and the
kit's global threshold (Global_oprate_threshold) is 95 % of the requested rate.
"""

from __future__ import annotations

import csv
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import pairwise

from iorig.errors import UserError

SPEC_MIN_POINTS = 10
SPEC_SPACING_TOLERANCE = 0.30


def overall_response_time_ms(points: Sequence[tuple[float, float]]) -> float:
    """SPEC's ORT over (ops_per_s, latency_ms) pairs in run order (lowest load first).

    Widths are absolute, so a last point whose achieved rate fell still adds
    area, as in SPEC's tool.
    """
    if len(points) < 2:
        raise UserError(
            f"overall response time needs at least 2 load points, got {len(points)}",
            hint="measure the curve at several load points (SPEC uses 10)",
        )
    for i, (x, y) in enumerate(points, start=1):
        if not (math.isfinite(x) and math.isfinite(y)) or x < 0 or y < 0:
            raise UserError(
                f"load point {i}: ops/s {x} and latency {y} ms must be non-negative numbers"
            )
    xs = [x for x, _ in points]
    span = max(xs) - min(xs)
    if span <= 0:
        raise UserError(
            "overall response time is undefined: every load point has the same ops/s",
            hint="the load points must cover a range of throughput",
        )
    area = sum(abs(x2 - x1) * (y1 + y2) / 2.0 for (x1, y1), (x2, y2) in pairwise(points))
    return area / span


def rate_falls(rates: Sequence[tuple[float | None, float]]) -> list[str]:
    """Each point (its load, or None, and its achieved ops/s, in run order)
    that achieved fewer ops/s than the one before: the curve turns back, and
    SPEC's overall response time adds the area of that fall as well."""
    out = []
    for i, ((_, before), (load, now)) in enumerate(pairwise(rates), start=2):
        if now < before:
            at = f" (load {load:g})" if load is not None else ""
            out.append(
                f"point {i}{at} achieved {now:,.0f} ops/s, fewer than point {i - 1}'s "
                f"{before:,.0f}: the curve turns back, and the overall response time adds "
                "the area of that fall too (SPEC's rule)"
            )
    return out


@dataclass(frozen=True)
class LoadPoint:
    """One measured load point."""

    load: float  # the nominal business metric (e.g. AI_Jobs) or the requested rate
    requested_ops_per_s: float | None  # None when unknown (uncontrolled maximum)
    achieved_ops_per_s: float
    lat_mean_ns: float
    lat_p99_ns: float | None = None

    @property
    def lat_mean_ms(self) -> float:
        return self.lat_mean_ns / 1e6


@dataclass(frozen=True)
class LoadRow:
    """One row of a published or hand-made load-point table (``iorig ort``)."""

    line: int  # in the source, for messages
    load: float | None  # None when the table has no load column
    lat_mean_ms: float
    ops_per_s: float


def ort_of(points: Sequence[LoadPoint | LoadRow]) -> float:
    """ORT (ms) of measured points or table rows, in the order given."""
    pairs = [
        (p.achieved_ops_per_s, p.lat_mean_ms)
        if isinstance(p, LoadPoint)
        else (p.ops_per_s, p.lat_mean_ms)
        for p in points
    ]
    return overall_response_time_ms(pairs)


# --- validity of one point ----------------------------------------------------


@dataclass(frozen=True)
class Validity:
    valid: bool
    achieved_fraction: float  # achieved / requested
    message: str


def _rate(value: float) -> str:
    if abs(value) >= 100:
        return f"{value:,.0f}".replace(",", " ")
    return f"{value:.3g}"


def point_validity(
    requested: float,
    achieved: float,
    tolerance: float = 0.05,
    unit: str = "IOPS",
) -> Validity:
    """Valid when achieved ≥ (1 − tolerance) × requested.

    The shown percentage is truncated, not rounded, so an invalid point never
    reads as exactly the threshold.
    """
    if requested <= 0:
        raise ValueError(f"requested rate must be positive, got {requested}")
    fraction = achieved / requested
    valid = fraction >= (1.0 - tolerance) * (1.0 - 1e-12)
    shown = math.floor(fraction * 1000 + 1e-9) / 10
    text = f"achieved {shown:.1f} % of the requested {_rate(requested)} {unit}"
    if not valid:
        text += ": the storage fell behind; fio's latency hides the queueing (coordinated omission)"
    return Validity(valid, fraction, text)


# --- SPEC load-point rules ----------------------------------------------------


def spec_rules(loads: Sequence[float]) -> list[str]:
    """Problems with a list of loads under SPEC's load-point rules; empty when fine."""
    if not loads:
        return ["no load points"]
    problems: list[str] = []
    n = len(loads)
    if n < SPEC_MIN_POINTS:
        problems.append(f"only {n} load points: SPEC requires at least {SPEC_MIN_POINTS}")
    for i, (a, b) in enumerate(pairwise(loads), start=2):
        if b <= a:
            problems.append(
                f"point {i} (load {b:g}) does not follow point {i - 1} (load {a:g}) upwards: "
                "points must run from lowest to highest load"
            )
    if any(load <= 0 for load in loads):
        problems.append("loads must be positive")
        return problems
    top = max(loads)
    spacing = top / n
    for i, load in enumerate(loads):
        nominal = (i + 1) * spacing
        off = abs(load - nominal) / nominal
        if off > SPEC_SPACING_TOLERANCE + 1e-9:
            problems.append(
                f"point {i + 1} (load {load:g}) is {off * 100:.0f} % off its nominal {nominal:g} "
                f"(spacing {spacing:g} = max load {top:g} / {n} points); "
                f"each must be within {SPEC_SPACING_TOLERANCE * 100:g} %"
            )
    return problems


def default_fractions() -> tuple[float, ...]:
    """10 %, 20 % … 100 %: ten equally spaced points, SPEC's shape."""
    return tuple(i / 10 for i in range(1, 11))


# --- the table CSV for `iorig ort` --------------------------------------------

_COLUMNS: dict[str, frozenset[str]] = {  # normalised spellings, see _normalise
    "load": frozenset(
        [
            "load",
            "load_point",
            "business_metric",
            "requested_load",
            "jobs",
            "ai_jobs",
            "builds",
            "streams",
            "job_sets",
        ]
    ),
    "latency_ms": frozenset(
        [
            "latency_ms",
            "lat_ms",
            "avg_latency_ms",
            "average_latency_ms",
            "mean_latency_ms",
            "latency_msec",
            "response_time_ms",
        ]
    ),
    "ops_per_s": frozenset(
        [
            "ops_per_s",
            "ops_per_sec",
            "ops_per_second",
            "op_per_s",
            "ops_s",
            "iops",
            "achieved_ops_per_s",
        ]
    ),
}
_REQUIRED = ("latency_ms", "ops_per_s")
_ACCEPTED_HINT = (
    "name the columns load, latency_ms and ops_per_s in a header row (also accepted, in any "
    "case: 'latency ms', 'latency (ms)', 'ops/s', 'ops per s'; load may be called e.g. "
    "AI_Jobs); other columns are ignored"
)


def _normalise(header: str) -> str:
    text = header.strip().lower().replace("/", " per ")
    return re.sub(r"[^a-z0-9]+", "_", text).strip("_")


def _delimiter(line: str) -> str:
    for candidate in (",", "\t", ";"):
        if candidate in line:
            return candidate
    return ","


def parse_table_csv(text: str, source: str) -> list[LoadRow]:
    """Rows of a load-point table: a header row, then one row per load point in run order.

    Blank lines and lines starting with ``#`` are skipped; the delimiter
    (comma, tab or semicolon) is taken from the header line. The load column
    is optional (ORT does not need it; the SPEC rules do).
    """
    lines = [
        (number, line)
        for number, line in enumerate(text.splitlines(), start=1)
        if line.strip() and not line.lstrip().startswith("#")
    ]
    if not lines:
        raise UserError(f"{source}: no header row and no data", hint=_ACCEPTED_HINT)
    header_line, header_text = lines[0]
    delimiter = _delimiter(header_text)
    header = next(csv.reader([header_text], delimiter=delimiter))
    where: dict[str, int] = {}
    for index, name in enumerate(header):
        key = _normalise(name)
        for column, spellings in _COLUMNS.items():
            if key in spellings:
                if column in where:
                    raise UserError(
                        f"{source} line {header_line}: columns {header[where[column]]!r} and "
                        f"{name!r} both give {column}",
                        hint="keep one of them or rename the other",
                    )
                where[column] = index
    missing = [c for c in _REQUIRED if c not in where]
    if missing:
        found = ", ".join(repr(h.strip()) for h in header)
        raise UserError(
            f"{source} line {header_line}: no {' and no '.join(missing)} column "
            f"(found {found}; expected load, latency_ms, ops_per_s)",
            hint=_ACCEPTED_HINT,
        )
    rows: list[LoadRow] = []
    for number, line in lines[1:]:
        fields = next(csv.reader([line], delimiter=delimiter))
        if len(fields) < len(header):
            raise UserError(
                f"{source} line {number}: {len(fields)} fields where the header has {len(header)}",
                hint=f"give every column a value, separated by {delimiter!r}",
            )
        values: dict[str, float] = {}
        for column, index in where.items():
            raw = fields[index].strip()
            try:
                value = float(raw)
            except ValueError:
                raise UserError(
                    f"{source} line {number}: {column} {raw!r} is not a number",
                    hint="write a plain number such as 0.7 or 13051: no units, no thousands "
                    "separators, a dot for decimals",
                ) from None
            if not math.isfinite(value) or value < 0:
                raise UserError(
                    f"{source} line {number}: {column} {raw!r} must be a non-negative number",
                    hint="fix or remove this row",
                )
            values[column] = value
        rows.append(LoadRow(number, values.get("load"), values["latency_ms"], values["ops_per_s"]))
    if not rows:
        raise UserError(f"{source}: a header but no data rows", hint="add one row per load point")
    return rows
