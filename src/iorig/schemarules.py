"""The scenario schema's shared types (the base model, sizes, durations,
percentages) and its measurement rules: pass/fail criteria and SPEC-style
load points."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationInfo,
    field_validator,
    model_validator,
)

from iorig.units import parse_duration, parse_latency, parse_percent, parse_rate, parse_size

Size = Annotated[int, BeforeValidator(parse_size)]
Duration = Annotated[float, BeforeValidator(parse_duration)]
Percent = Annotated[float, BeforeValidator(parse_percent)]


class _Model(BaseModel):
    # .inf and .nan are refused in every number field, naming the field
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


LATENCY_METRICS = ("lat_mean", "lat_max", "lat_mean_max", "p50", "p90", "p99", "p99.9", "p99.99")
CriterionMetric = Literal[
    "iops", "bytes_per_s", "lat_mean", "lat_max", "lat_mean_max", "p50", "p90", "p99", "p99.9",
    "p99.99",
]  # fmt: skip


class Criterion(_Model):
    """A pass/fail requirement on a measured phase (Jetstress's verdicts).

    ``metric`` over the named workloads (default: all) and direction:
    ``iops`` and ``bytes_per_s`` add up; ``lat_mean`` is the mean completion
    latency, ``lat_max`` the slowest single I/O, ``lat_mean_max`` the worst
    one-second mean (what a sampled performance counter's maximum shows),
    ``pNN`` a percentile of the merged histograms. One bound: ``min`` (e.g.
    IOPS) or ``max`` (latency, with a unit: ``20ms``); without either the
    figure is reported beside the verdicts but judges nothing (Jetstress
    reports database write latency that way).

    ``per``: ``run`` judges the figure over every host together; ``host``
    judges each host's own share against the limit, as Jetstress judges each
    server (a sizing "per host" must not be met by the hosts' sum), and the
    run passes only when every host does.
    """

    name: str
    metric: CriterionMetric
    per: Literal["run", "host"] = "run"
    phase: str | None = None  # a measured phase (default: every measured phase)
    workloads: list[str] | None = None
    ddir: Literal["read", "write", "trim", "all"] = "all"
    min: float | None = None
    max: float | None = None

    @field_validator("min", "max", mode="before")
    @classmethod
    def _limit(cls, value: Any, info: ValidationInfo) -> float | None:
        if value is None:
            return None
        metric = info.data.get("metric")
        if metric is None:
            return None  # the metric itself is wrong and reported on its own
        if metric in LATENCY_METRICS:
            if not isinstance(value, str):
                raise ValueError(f"a latency limit needs a unit, e.g. 20ms (got {value!r})")
            return parse_latency(value)
        if metric == "bytes_per_s" and isinstance(value, str):
            return parse_rate(value)
        try:
            return float(value)
        except (TypeError, ValueError):
            raise ValueError(f"expected a number, got {value!r}") from None

    @model_validator(mode="after")
    def _one_bound(self) -> Criterion:
        if self.min is not None and self.max is not None:
            raise ValueError("give one of 'min' or 'max' (or neither, to report the figure)")
        return self

    @property
    def bound(self) -> str:
        """ "min", "max", or "info" for a figure reported without a limit."""
        if self.min is not None:
            return "min"
        return "max" if self.max is not None else "info"

    @property
    def limit(self) -> float:
        value = self.min if self.min is not None else self.max
        return float("nan") if value is None else float(value)


class LoadPointSpec(_Model):
    """SPEC-style load points: the scenario runs at ``points`` equally spaced
    values of a business metric parameter up to ``max``, low to high."""

    parameter: str
    name: str = "load"  # how reports call the metric, e.g. AI_Jobs
    max: int = Field(ge=1, le=10**9)
    points: int = Field(default=10, ge=2, le=1000)
    tolerance: Percent = 5.0
    latency_cap: str | None = None  # e.g. "20ms"; empty or None for no cap

    @field_validator("latency_cap")
    @classmethod
    def _cap(cls, value: str | None) -> str | None:
        if value is None or not str(value).strip():
            return None
        parse_latency(str(value))
        return str(value).strip()

    @property
    def latency_cap_ns(self) -> float | None:
        return parse_latency(self.latency_cap) if self.latency_cap else None

    def loads(self) -> list[int]:
        """max × i / points for i = 1 … points, rounded; the first sits one
        spacing from zero (SPEC's rule)."""
        values = [max(1, round(self.max * i / self.points)) for i in range(1, self.points + 1)]
        return sorted(set(values))
