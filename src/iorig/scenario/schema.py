"""The scenario schema: pydantic models of targets, workloads, phases,
parameters, pass/fail criteria and SPEC-style load points, each validating
what it can on its own, and the shared types (the base model, sizes,
durations, percentages); loading and templating are
``iorig.scenario.loading``'s."""

from __future__ import annotations

import math
import re
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationInfo,
    field_validator,
    model_validator,
)

from iorig.model import Metric, PhaseKind, SystemUnderTest
from iorig.scenario.events import EventSpec, ImpactRule, check_phase_events
from iorig.scenario.fiopolicy import passed_value
from iorig.units import (
    format_bytes,
    parse_duration,
    parse_latency,
    parse_percent,
    parse_rate,
    parse_size,
)

Size = Annotated[int, BeforeValidator(parse_size)]
Duration = Annotated[float, BeforeValidator(parse_duration)]
Percent = Annotated[float, BeforeValidator(parse_percent)]


class _Model(BaseModel):
    # .inf and .nan are refused in every number field, naming the field
    # a field's docstring says what it is (docs/reference/scenario.md shows it)
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False, defer_build=True)


LATENCY_METRICS = ("lat_mean", "lat_max", "lat_mean_max", "p50", "p90", "p99", "p99.9", "p99.99")
CriterionMetric = Literal[
    "iops",
    "bytes_per_s",
    "lat_mean",
    "lat_max",
    "lat_mean_max",
    "p50",
    "p90",
    "p99",
    "p99.9",
    "p99.99",
]


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
    """names the requirement in the verdict"""
    metric: CriterionMetric
    """the figure judged (see above)"""
    per: Literal["run", "host"] = "run"
    """`run`: the hosts together; `host`: each host on its own"""
    phase: str | None = None
    """a measured phase (default: every measured phase)"""
    workloads: list[str] | None = None
    """the workloads whose figures count (default: all)"""
    ddir: Literal["read", "write", "trim", "all"] = "all"
    """the direction whose figures count"""
    min: float | None = None
    """the figure must be at least this"""
    max: float | None = None
    """the figure must be at most this (latency with its unit, e.g. 20ms)"""

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
    """the business-metric parameter the points set, e.g. jobs"""
    name: str = "load"
    """how reports call the metric, e.g. AI_Jobs"""
    max: int = Field(ge=1, le=10**9)
    """the highest load point"""
    points: int = Field(default=10, ge=2, le=1000)
    """how many load points, equally spaced up to `max`"""
    tolerance: Percent = 5.0
    """a point is valid when it achieves at least (1 − tolerance) of what it asked for"""
    latency_cap: str | None = None
    """e.g. "20ms"; empty or None for no cap"""

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


FORMAT_VERSION = 1
# Below this a size-based phase counts as hung (``run --min-rate`` changes it):
# 1 MiB/s is slower than any disk, SD card or network share that still works.
MIN_BYTES_PER_S = float(1 << 20)
# What fio takes (its option table): block sizes as iorig renders them, IOPS
# rates in 32 bits; iorig's verify headers are checked per 512-byte sector.
MAX_BS = 2**30
MAX_RATE_IOPS = 2**32 - 1
_NAME_RE = r"^[a-z0-9][a-z0-9_-]{0,62}$"


def _strict_bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("true", "yes", "on", "1"):
        return True
    if text in ("false", "no", "off", "0"):
        return False
    raise ValueError(f"expected true or false, got {value!r}")


Bool = Annotated[bool, BeforeValidator(_strict_bool)]

RW = Literal[
    "read",
    "write",
    "randread",
    "randwrite",
    "randrw",
    "rw",
    "trim",
    "randtrim",
    "trimwrite",
    "randtrimwrite",
]
# fio's continue_on_error classes: io is read and write, all adds verify
ContinueOnError = Literal["none", "read", "write", "io", "verify", "all"]
SEQUENTIAL = frozenset({"read", "write", "rw", "trim", "trimwrite"})
READS = frozenset({"read", "randread", "randrw", "rw"})
WRITES = frozenset({"write", "randwrite", "randrw", "rw", "trimwrite", "randtrimwrite"})
# discards: where the target accepts them (iorig.targets.discard); trimwrite trims
# each block, then writes it
TRIMS = frozenset({"trim", "randtrim", "trimwrite", "randtrimwrite"})


_DISTRIBUTION_RE = re.compile(
    r"^(random|zipf:\d+(\.\d+)?|pareto:\d+(\.\d+)?|normal:\d+(\.\d+)?(,\d+(\.\d+)?)?"
    r"|zoned:\d+/\d+(:\d+/\d+)*|zoned_abs:\d+/\d+[kKmMgG]?(:\d+/\d+[kKmMgG]?)*)$"
)


class Workload(_Model):
    """One typed I/O stream; maps 1:1 to a fio job section."""

    name: str | None = Field(default=None, pattern=_NAME_RE)
    """names the workload in reports and criteria (default: its position)"""
    target: str = "data"
    """the role of the target it works on"""
    rw: RW
    """the I/O pattern, as fio's `rw` (`readwrite` is `rw`)"""
    bs: Size
    """block size, a multiple of 512 bytes"""
    read_pct: Percent | None = None
    """reads' share of a mixed (`randrw`, `rw`) pattern; default 50"""
    iodepth: int = Field(default=1, ge=1, le=65536)
    """outstanding I/Os per job"""
    jobs: int = Field(default=1, ge=1, le=1024)
    """fio jobs (processes) running this stream"""
    size: Size | None = None
    """working set; default: the whole target"""
    offset: Size = 0
    """where on the target the working set starts"""
    offset_increment: Size | None = None
    """with jobs > 1: job k works on [offset + k × offset_increment, … + size)"""
    rate_iops: int | None = Field(default=None, ge=1, le=MAX_RATE_IOPS)
    """pace each job to this many IOPS (Poisson arrivals); 0 is no limit"""
    direct: Bool = True
    """bypass the page cache (O_DIRECT)"""
    engine: Literal[
        "auto", "io_uring", "libaio", "psync", "null", "sync", "pvsync", "pvsync2", "posixaio"
    ] = "auto"
    """fio's engine; "null" touches no storage (the generator's own ceiling) and every
    report marks such a phase"""
    compress: Percent = 0.0
    """share of each buffer that compresses (fio buffer_compress_percentage)"""
    dedupe: Percent = 0.0
    """share of buffers that repeat earlier ones (fio dedupe_percentage)"""
    distribution: str = "random"
    """fio random_distribution: zipf:1.2, pareto:0.9, zoned:..."""
    bssplit: str | None = None
    """block-size mix, e.g. "4k/50:8k/50" (fio bssplit)"""
    rate: Size | None = None
    """bytes/s per job (fio rate), e.g. background maintenance"""
    flow: int | None = Field(default=None, ge=1, le=1000)
    """Keep each job's I/O count at flow:(sum of flows) of its flow group: job k of every
    workload with a flow in the phase (fio flow_id/flow), so those workloads need the same
    jobs. A log writer that writes as its database thread does."""
    verify: Literal["none", "crc32c"] = "none"
    """writes carry checksums a verify phase checks"""
    verify_interval: Size | None = None
    """checksum granularity (default: bs)"""
    verify_state: Bool = False
    """a writer saves what it had acknowledged; a verify phase's workload of the same name
    and shape checks exactly that (see iorig.run.plan.check_replays)"""
    continue_on_error: ContinueOnError | None = None
    """Keep going past I/O errors of these classes (fio continue_on_error; unset: the first
    error ends the job); iorig then counts every error by type."""
    enabled: Bool = True
    """false leaves the workload out (a template can turn it off)"""
    data_rules: Bool = True
    """iorig's data rules: fresh random data in every write (fio refill_buffers, compress
    chunks of 4 KiB) and, for random offsets, no random map and a new sequence each run
    (norandommap, randrepeat=0); false leaves fio's own defaults, as a fio job file has them"""
    fio_options: dict[str, str | int | bool] = Field(default_factory=dict, max_length=64)
    """fio options passed as given (from a fio job file: iorig.scenario.fiojobs), only those
    iorig.scenario.fiopolicy passes, each value read as fio reads it"""
    fileset: str | None = Field(default=None, pattern=_NAME_RE)
    """File sets (a fileset target): each job works on ``files`` files of ``file_size`` in
    the set ``fileset``, spread over ``dirs`` directories; workloads naming the same set
    share its files. ``op: stat`` stats them (fio's filestat engine) instead of reading or
    writing."""
    files: int = Field(default=1, ge=1, le=1_000_000)
    """with `fileset`: files per job"""
    file_size: Size | None = None
    """with `fileset`: the size of each file"""
    dirs: int = Field(default=1, ge=1, le=10_000)
    """with `fileset`: directories the files are spread over"""
    op: Literal["io", "stat"] = "io"
    """`stat` stats the file set's files instead of reading or writing them"""
    whole_files: Bool = False
    """with `fileset`: go through each file whole, in a random order, before the next (a
    data loader's samples); otherwise every I/O picks a file at random"""
    loops: int = Field(default=1, ge=1, le=1000)
    """passes over the working set (fio loops): a training phase's epochs"""
    completions: Bool = False
    """log every completion instead of one-second figures (a training phase's readers:
    when each batch arrived)"""
    fsync_at_end: Bool = False
    """fsync each file before the job ends, within its time (fio end_fsync: a checkpoint)"""

    @field_validator("rw", mode="before")
    @classmethod
    def _alias_readwrite(cls, value: Any) -> Any:
        return "rw" if value == "readwrite" else value

    @field_validator("rate_iops", "rate", mode="before")
    @classmethod
    def _unlimited(cls, value: Any) -> Any:
        # 0 is no limit, so a template can turn pacing off (rate_iops: ${write_iops})
        return None if isinstance(value, int | str) and str(value).strip() == "0" else value

    @field_validator("fio_options")
    @classmethod
    def _passed(cls, value: dict[str, str | int | bool]) -> dict[str, str | int | bool]:
        return {name: passed_value(name, v) for name, v in value.items()}

    @field_validator("bs")
    @classmethod
    def _aligned(cls, bs: int) -> int:
        if bs <= 0:
            raise ValueError("block size must be positive")
        if bs > MAX_BS:
            raise ValueError(
                f"block size {format_bytes(bs)} is larger than fio takes ({format_bytes(MAX_BS)})"
            )
        if bs % 512:
            raise ValueError(
                f"block size {bs} bytes is not a multiple of 512; note that KB/MB are SI "
                f"units (4KB = 4000 bytes): write 4KiB or 4k for 4096"
            )
        return bs

    @field_validator("bssplit")
    @classmethod
    def _bssplit(cls, value: str | None) -> str | None:
        if value is None:
            return None
        parts = []
        total = 0.0
        for item in str(value).split(":"):
            size, sep, pct = item.partition("/")
            try:
                block = parse_size(size)
                share = float(pct) if sep else float("nan")
            except ValueError:
                block, share = 0, float("nan")
            if block <= 0 or block % 512 or not 0 <= share <= 100:
                raise ValueError(
                    f"{value!r} is not a block-size mix: use size/percent pairs joined by ':', "
                    "e.g. 4k/50:8k/50 (sizes multiples of 512)"
                )
            total += share
            parts.append(f"{block}/{share:g}")
        if abs(total - 100) > 1e-6:
            raise ValueError(f"the shares in {value!r} add up to {total:g}%, not 100%")
        return ":".join(parts)

    @field_validator("distribution")
    @classmethod
    def _distribution(cls, value: str) -> str:
        if not _DISTRIBUTION_RE.match(value):
            raise ValueError(
                f"{value!r} is not an access distribution: use random, zipf:1.2, pareto:0.9, "
                "normal:10, zoned:60/10:30/20:10/70 (percent of accesses / percent of the range)"
            )
        return value

    @field_validator("compress", "dedupe")
    @classmethod
    def _whole_percent(cls, value: float) -> float:
        if not float(value).is_integer():
            raise ValueError("use a whole percentage (fio takes integers)")
        return value

    @model_validator(mode="after")
    def _fileset(self) -> Workload:
        if self.fileset is None:
            if self.op == "stat" or self.file_size is not None or self.whole_files:
                raise ValueError(
                    "op: stat, file_size and whole_files apply to file-set workloads (fileset:)"
                )
            return self
        if self.file_size is None:
            raise ValueError("a file-set workload needs file_size")
        if self.op == "io" and self.bs > self.file_size:
            raise ValueError("the block size is larger than the files")
        return self

    @property
    def block_sizes(self) -> tuple[int, ...]:
        """Every size its I/Os may have: ``bs`` and the sizes of ``bssplit``."""
        split = [int(i.split("/")[0]) for i in (self.bssplit or "").split(":") if i]
        return (self.bs, *split)

    @model_validator(mode="after")
    def _keeps_state(self) -> Workload:
        if self.verify_state and (problem := verify_state_problem(self)) is not None:
            raise ValueError(problem)
        return self

    @model_validator(mode="after")
    def _verify_interval(self) -> Workload:
        interval = self.verify_interval
        if interval is None:
            return self
        sizes = list(self.block_sizes)
        if interval < 512 or interval % 512 or any(size % interval for size in sizes):
            raise ValueError(
                f"verify_interval {interval} must be a multiple of 512 bytes that divides the "
                f"block size{'s' if len(sizes) > 1 else ''} ({', '.join(map(str, sizes))}); "
                "fio would silently change it"
            )
        return self

    @model_validator(mode="after")
    def _mix(self) -> Workload:
        if self.read_pct is not None:
            if self.rw not in ("randrw", "rw"):
                raise ValueError(f"read_pct applies to rw: randrw or rw, not {self.rw}")
            if not float(self.read_pct).is_integer():
                raise ValueError("read_pct must be a whole percentage (fio's rwmixread)")
        return self

    @property
    def label(self) -> str:
        return self.name or self.rw

    @property
    def sequential(self) -> bool:
        return self.rw in SEQUENTIAL


DEFAULT_PRECISION_PCT = 2.0  # until: precise without precision:
DEFAULT_PRECISE_MIN_S = 10.0  # until: precise never stops before this
PRECISE_MIN_S = 8  # the fewest seconds an interval is built on (precision.MIN_INTERVAL_BATCHES)


# what a verify_state writer's check replays it as
REPLAYS = {"randwrite": "randread", "write": "read"}


def verify_state_problem(w: Workload) -> str | None:
    """Why a ``verify_state`` workload cannot keep or check a write state.

    On a writer (write or randwrite, verify: crc32c) fio saves its state when
    it ends (or on its trigger file); a verify phase's workload of the same
    name and shape (read or randread) replays that writer and checks each
    write it had acknowledged, and nothing it never wrote. The writer keeps
    fio's random map (no block written twice in a pass) and a fixed sequence.
    """
    if w.rw in ("randrw", "rw"):
        return (
            "verify_state is for a writer (rw: write or randwrite) or its check in a verify "
            "phase (read or randread): fio cannot replay a job that mixes reads and writes, "
            "so give the reads a workload of their own"
        )
    if w.rw in REPLAYS and w.verify != "crc32c":
        return "a verify_state writer needs verify: crc32c"
    if w.bssplit or w.distribution != "random" or w.fileset is not None:
        return (
            "verify_state needs one block size, distribution: random and one file "
            "(fio replays one sequence of writes over one working set)"
        )
    if w.jobs > 1 and not w.offset_increment:
        return (
            "verify_state with jobs > 1 needs offset_increment (each job its own slice: "
            "jobs writing each other's blocks cannot be checked against one generation)"
        )
    return None


class SteadyRule(_Model):
    """SNIA PTS steady state: the last ``window`` rounds of the tracking
    variable stay within ``max_range`` of their mean, and the least-squares
    line across them moves less than ``max_slope`` of the mean."""

    metric: Literal["iops", "bytes_per_s"] = "iops"
    """the tracking variable"""
    round: Duration = 10.0
    """the length of one round"""
    window: int = Field(default=5, ge=2, le=100)
    """how many last rounds are judged"""
    max_range: Percent = 20.0
    """the rounds' largest excursion from their mean, as a share of it"""
    max_slope: Percent = 10.0
    """the least-squares line's change across the window, as a share of the mean"""

    @field_validator("round")
    @classmethod
    def _round(cls, value: float) -> float:
        if value < 1:
            raise ValueError("a round lasts at least 1 s (fio reports once per second)")
        return value


MAX_FLOW_GROUPS = 1000  # fio's flow_id: the k-th job of each workload with a flow is group k


class Phase(_Model):
    name: str = Field(pattern=_NAME_RE)
    """the phase's name, unique in the scenario"""
    kind: PhaseKind
    """what the phase is for: only `measure` phases are scored; `prefill` and `precondition`
    write the working set first, `warmup` runs before measuring, `idle` waits, `verify`
    checks data"""
    enabled: Bool = True
    """false skips the phase (a template can turn it off)"""
    duration: Duration | None = None
    """how long the phase runs (the maximum, with `until: steady` or `precise`); prefill,
    precondition and verify phases take none: they pass over their working set (a
    precondition twice)"""
    ramp: Duration | None = None
    """run the phase's jobs this long just before the measurement starts, as a fio run of
    their own (a warm-up that belongs to each measurement, e.g. each load point; not
    fio's ramp_time, which fio skips when it is longer than the runtime)"""
    until: Literal["duration", "steady", "precise", "done"] = "duration"
    """when the phase ends: after `duration`; once `steady` (SNIA PTS rule); once `precise`
    (the median known to ±`precision`); once `done`, its workloads through their working
    sets `loops` times (duration is then the limit)"""
    steady: SteadyRule | None = None
    """the steady-state rule, with `until: steady`"""
    precision: Percent | None = None
    """until: precise — stop once the per-second median's 95 % interval is within ±precision
    of it (duration is then the maximum), never before min"""
    min: Duration | None = None
    """with `until: precise`: never stop before this"""
    description: str = ""
    """shown with the phase in reports"""
    workloads: list[Workload] = Field(default_factory=list)
    """the I/O streams that run together in this phase"""
    events: list[EventSpec] = Field(default_factory=list, max_length=100)
    """done to the system at set times of the phase (a host stopped, a throttle)"""
    headline_workloads: list[str] | None = Field(default=None, min_length=1)
    """the workloads the phase's headline counts (its IOPS or bytes/s, per-second figures
    and latency in summaries, the run list and comparisons); every workload by default.
    Exchange names its database threads, as Jetstress reports transactional IOPS, not the
    log or maintenance streams beside them"""

    @model_validator(mode="after")
    def _shape(self) -> Phase:  # noqa: C901, PLR0912
        if self.events:
            if self.kind not in (PhaseKind.WARMUP, PhaseKind.MEASURE):
                raise ValueError("events apply to warmup and measure phases (they run for a time)")
            check_phase_events(self.events, self.duration)
        labels = [w.label for w in self.workloads]
        if unknown := [n for n in self.headline_workloads or () if n not in labels]:
            raise ValueError(
                f"headline_workloads names {', '.join(unknown)}, not a workload of this phase "
                f"(its workloads: {', '.join(labels) or 'none'})"
            )
        if self.ramp is not None and self.kind not in (PhaseKind.MEASURE, PhaseKind.WARMUP):
            raise ValueError("ramp applies to measure and warmup phases")
        if self.until == "steady" and self.kind is not PhaseKind.WARMUP:
            raise ValueError("until: steady applies to warmup phases")
        if self.until == "done" and (self.kind is not PhaseKind.MEASURE or self.events):
            raise ValueError("until: done applies to measure phases without events")
        if self.steady is not None and self.until != "steady":
            raise ValueError("'steady' settings need until: steady")
        self._check_precise()
        if self.kind is PhaseKind.PRECONDITION:
            if self.duration is not None:
                raise ValueError("a precondition phase writes the target twice; remove 'duration'")
            for w in self.workloads:
                if w.rw not in ("write", "randwrite"):
                    raise ValueError(f"a precondition phase only writes; rw: {w.rw} is not allowed")
            return self
        if self.kind is PhaseKind.IDLE:
            if self.workloads:
                raise ValueError("an idle phase has no workloads")
            if self.duration is None:
                raise ValueError("an idle phase needs a duration")
            return self
        if not self.workloads:
            raise ValueError(f"a {self.kind} phase needs at least one workload")
        if self.kind is PhaseKind.VERIFY:
            if self.duration is not None:
                raise ValueError("a verify phase reads its working set once; remove 'duration'")
            for w in self.workloads:
                if w.rw not in ("read", "randread"):
                    raise ValueError(f"a verify phase only reads; rw: {w.rw} is not allowed")
        elif self.kind.writes_once:
            if self.duration is not None:
                raise ValueError("a prefill phase writes its working set once; remove 'duration'")
            for w in self.workloads:
                if w.rw not in ("write", "randwrite"):
                    raise ValueError(f"a {self.kind} phase only writes; rw: {w.rw} is not allowed")
        elif self.duration is None or self.duration <= 0:
            raise ValueError(f"a {self.kind} phase needs a duration greater than zero")
        flows = {w.label: w.jobs for w in self.workloads if w.flow is not None}
        if flows and max(flows.values()) > MAX_FLOW_GROUPS:
            raise ValueError(
                f"workloads with a flow take at most {MAX_FLOW_GROUPS} jobs (fio's flow_id)"
            )
        if len(set(flows.values())) > 1:
            said = ", ".join(f"{name} {jobs}" for name, jobs in flows.items())
            raise ValueError(
                "workloads with a flow pair up job by job (the k-th job of each is one fio "
                f"flow group), so they need the same jobs; here {said}"
            )
        if len(set(labels)) != len(labels):
            raise ValueError(
                "workloads in one phase need distinct names; add 'name:' to each workload"
            )
        return self

    @property
    def headline_of(self) -> list[Workload]:
        """The workloads its headline counts (``headline_workloads``, else all)."""
        named = self.headline_workloads
        return [w for w in self.workloads if named is None or w.label in named]

    @property
    def headline(self) -> Metric:
        """IOPS for random work, bytes/s when every workload is sequential."""
        if self.kind in (PhaseKind.PRECONDITION, PhaseKind.VERIFY) or (
            self.workloads and all(w.sequential for w in self.headline_of)
        ):
            return Metric.BYTES_PER_S
        return Metric.IOPS

    def _check_precise(self) -> None:
        if self.until != "precise":
            if self.precision is not None or self.min is not None:
                raise ValueError("'precision' and 'min' need until: precise")
            return
        if self.kind is not PhaseKind.MEASURE:
            raise ValueError(
                "until: precise applies to measure phases (a warm-up runs until: steady)"
            )
        if self.events:
            raise ValueError(
                "events happen at set times, and a phase that stops once precise may end "
                "before them; use until: duration for a phase with events"
            )
        if self.precision is not None and not 0 < self.precision <= 50:
            raise ValueError(
                f"precision must be above 0 % and at most 50 %, not {self.precision:g} %"
            )
        least = self.min_s
        if least < PRECISE_MIN_S:
            raise ValueError(
                f"min must be at least {PRECISE_MIN_S} s: the interval needs "
                f"{PRECISE_MIN_S} independent seconds at the very least"
            )
        if self.duration is not None and self.duration < least:
            raise ValueError(
                f"duration ({self.duration:g} s) is the longest a precise phase runs; it "
                f"cannot be shorter than min ({least:g} s)"
            )

    @property
    def steady_rule(self) -> SteadyRule | None:
        return (self.steady or SteadyRule()) if self.until == "steady" else None

    @property
    def precision_pct(self) -> float | None:
        """The asked half-width (% of the median) of an ``until: precise`` phase."""
        if self.until != "precise":
            return None
        return self.precision if self.precision is not None else DEFAULT_PRECISION_PCT

    @property
    def min_s(self) -> float:
        return self.min if self.min is not None else DEFAULT_PRECISE_MIN_S


TRANSFER_ALIGN = 4096  # direct I/O reads whole 4 KiB blocks


def round_up(value: int, unit: int) -> int:
    """``value`` up to a whole number of ``unit`` (a size in whole blocks or reads)."""
    return -(-value // unit) * unit


def _transfer_aligned(value: int) -> int:
    if value % TRANSFER_ALIGN:
        raise ValueError(f"the transfer size must be a multiple of {TRANSFER_ALIGN} bytes")
    return value


# a read or write size of the MLPerf Storage-like sections (0: the workload's)
Transfer = Annotated[int, BeforeValidator(parse_size), AfterValidator(_transfer_aligned)]


class TrainingSpec(_Model):
    """A training run as MLPerf Storage's closed division sets it up; every
    number not given is the workload's."""

    workload: Literal["unet3d", "resnet50", "cosmoflow"]
    """the MLPerf Storage workload"""
    accelerator: Literal["h100", "a100"] = "h100"
    """the simulated accelerator, which sets the compute time per batch"""
    accelerators: int = Field(default=1, ge=1, le=1024)
    """simulated accelerators per host"""
    epochs: int = Field(default=5, ge=1, le=100)
    """passes over the data set (MLPerf: 5)"""
    scale: float = Field(default=1.0, gt=0, le=1)
    """shrink samples and data set by this factor (small tests; 1 is MLPerf's sizes)"""
    dataset: Size = 0
    """the data set per host; 0: MLPerf's rule, max(500 steps × batch × accelerators,
    5 × this machine's memory), times scale"""
    reader_threads: int = Field(default=0, ge=0, le=256)
    """data-loader readers per accelerator; 0: the workload's"""
    transfer: Transfer = 0
    """the size of each read; 0: the workload's (4 MiB for unet3d, 256 KiB for the others)"""
    direct: Bool = True
    """read with direct I/O (no page cache: the data set need not exceed memory)"""
    au_floor: Percent | None = None
    """the AU a run must keep; default the workload's (MLPerf: 90 %, cosmoflow 70 %)"""
    target: str = "data"
    """the role of the data set's target"""


class CheckpointSpec(_Model):
    """Checkpointing as MLPerf Storage runs it: every process writes its shard
    of a llama3 checkpoint (an fsync at the end), then reads it back."""

    model: Literal["llama3-8b", "llama3-70b", "llama3-405b", "llama3-1t"]
    """the checkpoint's model (MLPerf Storage's sizes)"""
    processes: int = Field(default=0, ge=0, le=4096)
    """processes per host, each writing one shard of checkpoint ÷ MLPerf's process count;
    0: MLPerf's count (8, 64, 512, 1024) on one host"""
    repetitions: int = Field(default=10, ge=1, le=100)
    """checkpoints written, each to a directory of its own, then read back (MLPerf: 10)"""
    scale: float = Field(default=1.0, gt=0, le=1)
    """shrink every shard by this factor (small tests; 1 is MLPerf's sizes)"""
    transfer: Transfer = 0
    """the size of each write and read; 0: 4 MiB"""
    direct: Bool = False
    """direct I/O (MLPerf writes through the page cache and fsyncs)"""
    fsync: Bool = True
    """fsync each shard before its process ends, within its time (MLPerf's rule)"""
    target: str = "data"
    """the role of the checkpoints' target"""


class TargetSpec(_Model):
    size: Size
    """the working set on this target (the default of `--size`)"""
    description: str = ""
    """what the target stands for, e.g. the database volume"""
    fileset: Bool = False
    """many files in a directory (file-set workloads), not one file"""

    @field_validator("size")
    @classmethod
    def _holds_something(cls, value: int) -> int:
        if value <= 0:
            raise ValueError("a target's working set must be larger than 0 bytes, e.g. 1GiB")
        return value


ParamType = Literal["size", "duration", "int", "float", "bool", "percent", "str", "choice"]


class Parameter(_Model):
    type: ParamType = "str"
    """how a value is read and checked"""
    choices: list[str] | None = None
    """the values a `choice` parameter takes"""
    default: Any
    """the value when the user gives none; may derive from earlier parameters (`${...}`)"""
    help: str = ""
    """one line for `iorig scenarios show` and `iorig run --help`-style listings"""

    @field_validator("default")
    @classmethod
    def _default_valid(cls, value: Any, info: ValidationInfo) -> Any:
        if isinstance(value, str) and "${" in value:
            return value  # derived from earlier parameters: checked when resolved
        if "type" in info.data:  # a bad type is reported on its own
            spec = cls.model_construct(type=info.data["type"], choices=info.data.get("choices"))
            if spec.type == "choice" and not spec.choices:
                raise ValueError("a choice parameter needs 'choices'")
            coerce_parameter(spec, value)
        return value


class Scenario(_Model):
    iorig: int = Field(default=FORMAT_VERSION, ge=1)
    """the scenario format version this file is written for"""
    name: str = Field(pattern=_NAME_RE)
    """the scenario's name, as runs and reports show it"""
    version: int = Field(default=1, ge=0, le=2**31 - 1)
    """the scenario's own version: runs of different versions are marked when compared"""
    title: str
    """one line saying what the scenario is"""
    description: str = ""
    """what the scenario measures and how, shown by `iorig scenarios show`"""
    parameters: dict[str, Parameter] = Field(default_factory=dict)
    """the values a user may change (`--set NAME=VALUE`, `--NAME VALUE`); the rest of the file
    refers to them as `${NAME}`"""
    profiles: dict[str, dict[str, Any]] = Field(default_factory=dict)
    """named sets of parameter values (`--profile NAME`; `quick` is `--quick`)"""
    targets: dict[str, TargetSpec] = Field(default_factory=dict)
    """the storage the workloads use, by role (`--target ROLE=PATH`); without it one target
    `data`"""
    phases: list[Phase] = Field(min_length=1)
    """what runs, in order"""
    sweep: dict[str, list[str | int | float | bool]] = Field(default_factory=dict)
    """A grid over parameters: the measured stretch runs once per combination
    (iorig.scenario.sweep)"""
    criteria: list[Criterion] = Field(default_factory=list)
    """pass/fail requirements on the measured phases (an application verdict)"""
    loadpoints: LoadPointSpec | None = None
    """run the measured phases at load points, low to high (SPEC style)"""
    impact: ImpactRule = Field(default_factory=ImpactRule)
    """how events' impact is measured"""
    sut: SystemUnderTest | None = None
    """the system under test, as --sut describes it"""
    training: TrainingSpec | None = None
    """AI training as MLPerf Storage runs it: its phases are made from this section
    (iorig.scenario.training) and scored by accelerator utilisation"""
    checkpoint: CheckpointSpec | None = None
    """checkpointing as MLPerf Storage runs it: its phases are made from this section
    (iorig.scenario.checkpoint)"""

    @field_validator("iorig")
    @classmethod
    def _format(cls, value: int) -> int:
        if value > FORMAT_VERSION:
            raise ValueError(
                f"scenario format {value} is newer than this iorig understands "
                f"({FORMAT_VERSION}); upgrade iorig"
            )
        return value

    @field_validator("sweep")
    @classmethod
    def _sweep(cls, sweep: dict[str, list], info: ValidationInfo) -> dict[str, list]:
        parameters = info.data.get("parameters", {})
        for name, values in sweep.items():
            if name not in parameters:
                raise ValueError(
                    f"sweep over {name!r}, which is not a parameter "
                    f"(parameters: {', '.join(parameters) or 'none'})"
                )
            if not values:
                raise ValueError(f"sweep over {name!r} lists no values")
        return sweep

    @model_validator(mode="after")
    def _references(self) -> Scenario:
        names = [p.name for p in self.phases]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"phase names must be unique: {', '.join(dupes)}")
        if not self.targets:
            raise ValueError("the scenario declares no targets")
        if self.training is not None and self.checkpoint is not None:
            raise ValueError("a scenario trains or checkpoints, not both: keep one section")
        for phase in self.phases:
            for w in phase.workloads:
                if w.target not in self.targets:
                    raise ValueError(
                        f"phase {phase.name!r} uses target {w.target!r}, which is not under "
                        f"'targets' ({', '.join(self.targets)})"
                    )
                if (w.fileset is not None) != self.targets[w.target].fileset:
                    raise ValueError(
                        f"phase {phase.name!r}, workload {w.label!r}: "
                        + (
                            f"a file-set workload needs a target with fileset: true "
                            f"({w.target!r} is one file)"
                            if w.fileset
                            else f"target {w.target!r} is a file set: give the workload "
                            "fileset:, files: and file_size:"
                        )
                    )
        if self.loadpoints is not None:
            lp = self.loadpoints
            if lp.parameter not in self.parameters or self.parameters[lp.parameter].type != "int":
                raise ValueError(
                    f"loadpoints: {lp.parameter!r} must be an int parameter (the business metric)"
                )
        measured = {p.name: p for p in self.phases if p.kind is PhaseKind.MEASURE}
        for c in self.criteria:
            if c.phase is not None and c.phase not in measured:
                raise ValueError(
                    f"criterion {c.name!r} names phase {c.phase!r}, which is not a measured "
                    f"phase ({', '.join(measured) or 'none'})"
                )
            labels = {
                w.label
                for p in measured.values()
                for w in p.workloads
                if c.phase is None or p.name == c.phase
            }
            unknown = sorted(set(c.workloads or ()) - labels)
            if unknown:
                raise ValueError(
                    f"criterion {c.name!r} names workloads {', '.join(unknown)}, which no "
                    f"measured phase has ({', '.join(sorted(labels)) or 'none'})"
                )
        for profile, values in self.profiles.items():
            unknown = sorted(set(values) - set(self.parameters))
            if unknown:
                raise ValueError(
                    f"profile {profile!r} sets unknown parameters: {', '.join(unknown)}"
                )
        return self

    @property
    def measured(self) -> list[Phase]:
        return [p for p in self.phases if p.kind is PhaseKind.MEASURE]


def coerce_parameter(spec: Parameter, value: Any) -> Any:
    """The typed value of a parameter; raises ValueError naming the problem."""
    kind = spec.type
    if kind == "size":
        return parse_size(value)
    if kind == "duration":
        return parse_duration(value)
    if kind == "percent":
        return parse_percent(value)
    if kind == "bool":
        return _strict_bool(value)
    if kind == "int":
        if isinstance(value, bool):
            raise ValueError(f"expected a whole number, got {value!r}")
        try:
            number = int(str(value).strip())
        except ValueError:
            raise ValueError(f"expected a whole number, got {value!r}") from None
        if abs(number) > 2**63 - 1:
            raise ValueError(f"{value!r} is too large a number")
        return number
    if kind == "float":
        try:
            number = float(str(value).strip())
        except ValueError:
            raise ValueError(f"expected a number, got {value!r}") from None
        if not math.isfinite(number):
            raise ValueError(f"expected a finite number, got {value!r}")
        return number
    if kind == "choice":
        if str(value) not in (spec.choices or []):
            raise ValueError(f"expected one of {', '.join(spec.choices or [])}, got {value!r}")
        return str(value)
    return str(value)


def value_text(spec: Parameter, value: Any) -> str:
    """A typed parameter value written the way iorig writes it (4KiB, 30s)."""
    if spec.type == "size":
        return format_bytes(value)
    if spec.type == "duration":
        return f"{value:g}s"
    if spec.type == "bool":
        return "true" if value else "false"
    return str(value)
