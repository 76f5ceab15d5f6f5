"""The JSON payloads of the database: for each, how a value is written and
the validating decoder that reads it back.

A payload's column holds its data alone; its shape is the schema's: a
change of shape is a schema migration (``store/schema.py``), which also
takes older files forward and reads bundles of older versions in place.
A payload that does not decode is refused by name, never guessed at.

Each decoder checks all of its payload (a bundle is untrusted input): the
model checker that reads an imported run (``store/checks.py``) checks the
fields that come from plain columns and leaves these to their decoder, so
every field of an imported run is checked once.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import asdict, dataclass
from dataclasses import fields as dataclass_fields
from typing import Any, Generic, TypeVar

import numpy as np

from iorig.model import (
    AB_SIDES,
    ERROR_KINDS,
    AbLink,
    Disclosure,
    EventAction,
    EventRecord,
    EventStatus,
    Finding,
    GeneratorCpu,
    HeadlineOf,
    InterfaceLimit,
    IoErrorCount,
    PrecisionState,
    SutRecord,
)
from iorig.model.checkpoint import CheckpointModel, CheckpointRecord, ProcessTime
from iorig.model.sut import NOTE_LIMIT, NOTES_LIMIT, describe, parse_description
from iorig.model.training import AcceleratorModel, AcceleratorTrace, TrainingRecord

T = TypeVar("T")


class PayloadError(ValueError):
    """A stored payload that cannot be read (malformed, or not iorig's)."""


def _identity(value: Any) -> Any:
    return value


@dataclass(frozen=True)
class Codec(Generic[T]):
    name: str
    to_data: Callable[[T], Any] = _identity
    from_data: Callable[[Any], T] = _identity

    def encode(self, value: T) -> str:
        return json.dumps(self.to_data(value))

    def decode(self, text: str) -> T:
        try:
            data = json.loads(text)
        except (TypeError, ValueError) as exc:
            raise PayloadError(f"{self.name}: not JSON ({exc})") from None
        try:
            return self.from_data(data)
        except (TypeError, ValueError, KeyError, AttributeError) as exc:
            raise PayloadError(f"{self.name}: unexpected content ({exc})") from None


# ------------------------------------------------------------ disclosure


def _disclosure_to_data(d: Disclosure) -> dict[str, Any]:
    limit = d.interface_limit
    return {
        "sections": dict(d.sections),
        "interface_limit": None
        if limit is None
        else {"bytes_per_s": limit.bytes_per_s, "source": limit.source},
    }


def _disclosure_from_data(data: dict[str, Any]) -> Disclosure:
    sections = data["sections"]
    if not isinstance(sections, dict):
        raise TypeError("sections is not an object")
    limit = data.get("interface_limit")
    return Disclosure(
        sections,
        None
        if limit is None
        else InterfaceLimit(
            _number(limit["bytes_per_s"], "interface limit") or 0.0, str(limit.get("source", ""))
        ),
    )


# ------------------------------------------------------------ warnings


def _findings_from_data(data: list[dict[str, Any]]) -> tuple[Finding, ...]:
    return tuple(
        Finding(
            code=str(w.get("code", "?")),
            message=str(w.get("message", "")),
            advice=str(w.get("advice", "")),
            phase=None if w.get("phase") is None else str(w["phase"]),
            severity=str(w.get("severity", "warning")),
        )
        for w in data
    )


def _findings_to_data(findings: tuple[Finding, ...]) -> list[dict[str, Any]]:
    return [f.as_dict() for f in findings]


def _typed(kind: type) -> Callable[[Any], Any]:
    def check(value: Any) -> Any:
        if not isinstance(value, kind):
            raise TypeError(f"expected {kind.__name__}, got {type(value).__name__}")
        return value

    return check


def _strings(value: Any) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise TypeError("expected a list of strings")
    return value


def _numbers(value: Any) -> tuple[float, ...]:
    if not isinstance(value, list):
        raise TypeError("expected a list of numbers")
    # NaN stands for "none", as in the plain columns
    return tuple(v if v != v else _number(v, "a value") or 0.0 for v in value)


def _objects(value: Any) -> list[dict[str, Any]]:
    if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
        raise TypeError("expected a list of objects")
    return value


# ------------------------------------------------------------ events

_EVENT_TEXT_LIMIT = 1 << 20  # a command's output is kept to 64 KiB; anything longer is not ours


def _event_from_data(item: Any) -> EventRecord:
    """One stored event, every field checked (bundles are untrusted input)."""
    if not isinstance(item, dict):
        raise TypeError("an event is not an object")
    names = {
        "at_s",
        "action",
        "argument",
        "status",
        "started_at",
        "ended_at",
        "detail",
        "exit_code",
        "command",
    }
    if set(item) != names:
        raise ValueError(f"event fields {sorted(item)} are not {sorted(names)}")
    times = [item[k] for k in ("at_s", "started_at", "ended_at")]
    for value in times:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise TypeError(f"event time {value!r} is not a number")
        if not 0 <= value < 1e11:  # seconds: finite, not negative, before year 5138
            raise ValueError(f"event time {value!r} is out of range")
    for key in ("argument", "detail", "command"):
        if not isinstance(item[key], str) or len(item[key]) > _EVENT_TEXT_LIMIT:
            raise TypeError(f"event {key} is not a string of at most {_EVENT_TEXT_LIMIT} chars")
    code = item["exit_code"]
    if code is not None and (isinstance(code, bool) or not isinstance(code, int)):
        raise TypeError(f"event exit_code {code!r} is not an integer")
    return EventRecord(
        at_s=float(item["at_s"]),
        action=EventAction(item["action"]),
        argument=item["argument"],
        status=EventStatus(item["status"]),
        started_at=float(item["started_at"]),
        ended_at=float(item["ended_at"]),
        detail=item["detail"],
        exit_code=code,
        command=item["command"],
    )


def _events_from_data(data: Any) -> tuple[EventRecord, ...]:
    if not isinstance(data, list):
        raise TypeError("events are not a list")
    return tuple(_event_from_data(item) for item in data)


def _events_to_data(events: tuple[EventRecord, ...]) -> list[dict[str, Any]]:
    return [e.as_dict() for e in events]


# ------------------------------------------------------------ I/O errors

_ERROR_TEXT_LIMIT = (
    4096  # an error's text and a host's label are short; anything longer is not ours
)
_ERROR_COUNT_LIMIT = 1 << 62  # fio counts in 64 bits


def _io_error_from_data(item: Any) -> IoErrorCount:
    """One stored count, every field checked (bundles are untrusted input)."""
    if not isinstance(item, dict):
        raise TypeError("an I/O error count is not an object")
    names = {"kind", "message", "count", "host"}
    if set(item) != names:
        raise ValueError(f"I/O error fields {sorted(item)} are not {sorted(names)}")
    kind, message, count, host = item["kind"], item["message"], item["count"], item["host"]
    if kind not in ERROR_KINDS:
        raise ValueError(f"I/O error kind {kind!r:.40} is not one of {', '.join(ERROR_KINDS)}")
    for key, text in (("message", message), ("host", host)):
        if key == "host" and text is None:
            continue
        if not isinstance(text, str) or not 0 < len(text) <= _ERROR_TEXT_LIMIT:
            raise TypeError(f"I/O error {key} is not a string of 1 to {_ERROR_TEXT_LIMIT} chars")
    if isinstance(count, bool) or not isinstance(count, int):
        raise TypeError(f"I/O error count {count!r:.40} is not an integer")
    if not 0 < count <= _ERROR_COUNT_LIMIT:
        raise ValueError(f"I/O error count {count} is out of range")
    return IoErrorCount(kind, message, count, host)


def _io_errors_from_data(data: Any) -> tuple[IoErrorCount, ...]:
    if not isinstance(data, list):
        raise TypeError("I/O errors are not a list")
    return tuple(_io_error_from_data(item) for item in data)


def _io_errors_to_data(counts: tuple[IoErrorCount, ...]) -> list[dict[str, Any]]:
    return [
        {"kind": c.kind, "message": c.message, "count": c.count, "host": c.host} for c in counts
    ]


# ------------------------------------------------------------ system under test


def _sut_from_data(data: Any) -> SutRecord:
    """The stored description and notes, checked against the schema a
    ``--sut`` file is (bundles are untrusted input)."""
    if not isinstance(data, dict) or set(data) != {"description", "notes"}:
        raise ValueError("the system under test is not {description, notes}")
    notes = data["notes"]
    if not isinstance(notes, list) or len(notes) > NOTES_LIMIT:
        raise TypeError(f"notes are not a list of at most {NOTES_LIMIT}")
    for note in notes:
        if not isinstance(note, str) or not 0 < len(note) <= NOTE_LIMIT:
            raise TypeError(f"a note is not a string of 1 to {NOTE_LIMIT} chars")
    try:
        description = parse_description(data["description"])
    except ValueError as exc:  # pydantic's ValidationError: name the first problem only
        errors = getattr(exc, "errors", lambda: [])()
        where = ".".join(str(p) for p in errors[0]["loc"]) if errors else ""
        first = f"{where}: {errors[0]['msg']}" if errors else str(exc)
        raise ValueError(f"description: {first:.200}") from None
    return SutRecord(describe(description), tuple(notes))


def _sut_to_data(record: SutRecord) -> dict[str, Any]:
    return {"description": dict(record.description), "notes": list(record.notes)}


# ------------------------------------------------------------ precision and A/B


def _number(value: Any, name: str, *, optional: bool = False) -> float | None:
    """A finite number, not negative (every stored figure is one)."""
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or value != value:
        raise TypeError(f"{name} {value!r:.40} is not a number")
    if not 0 <= value < math.inf:
        raise ValueError(f"{name} {value!r:.40} is infinite or negative")
    return float(value)


_PRECISION_FIELDS = {
    "metric",
    "target_pct",
    "min_s",
    "max_s",
    "precise",
    "seconds",
    "median",
    "low",
    "high",
    "achieved_pct",
    "confidence",
    "batch_s",
    "why",
}


def _precision_from_data(data: Any) -> PrecisionState | None:
    """A phase's stored precision, every field checked (bundles are untrusted)."""
    if data is None:
        return None
    if not isinstance(data, dict) or set(data) != _PRECISION_FIELDS:
        raise ValueError(f"precision fields are not {sorted(_PRECISION_FIELDS)}")
    if data["metric"] not in ("iops", "bytes_per_s"):
        raise ValueError(f"precision metric {data['metric']!r:.40} is not iops or bytes_per_s")
    if not isinstance(data["precise"], bool):
        raise TypeError("precision 'precise' is not true or false")
    for key in ("seconds", "batch_s"):
        value = data[key]
        if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
            raise TypeError(f"precision {key} {value!r:.40} is not an integer")
    if not isinstance(data["why"], str) or len(data["why"]) > 400:
        raise TypeError("precision 'why' is not a short text")
    confidence = _number(data["confidence"], "confidence")
    if not 0 < confidence < 1:
        raise ValueError(f"precision confidence {confidence} is not between 0 and 1")
    return PrecisionState(
        metric=data["metric"],
        target_pct=_number(data["target_pct"], "target_pct"),
        min_s=_number(data["min_s"], "min_s"),
        max_s=_number(data["max_s"], "max_s"),
        precise=data["precise"],
        seconds=data["seconds"],
        median=_number(data["median"], "median"),
        low=_number(data["low"], "low", optional=True),
        high=_number(data["high"], "high", optional=True),
        achieved_pct=_number(data["achieved_pct"], "achieved_pct", optional=True),
        confidence=confidence,
        batch_s=data["batch_s"],
        why=data["why"],
    )


def _precision_to_data(state: PrecisionState | None) -> dict[str, Any] | None:
    return None if state is None else asdict(state)


_AB_ID_LIMIT = 64


def _ab_from_data(data: Any) -> AbLink | None:
    """A run's A/B link, checked (bundles are untrusted input)."""
    if data is None:
        return None
    if not isinstance(data, dict) or set(data) != {"id", "side", "peer", "first"}:
        raise ValueError("the A/B link is not {id, side, peer, first}")
    for key in ("id", "peer"):
        text = data[key]
        if not isinstance(text, str) or not 0 < len(text) <= _AB_ID_LIMIT:
            raise TypeError(f"A/B {key} is not a string of 1 to {_AB_ID_LIMIT} chars")
    if data["side"] not in AB_SIDES:
        raise ValueError(f"A/B side {data['side']!r:.20} is not a or b")
    first = data["first"]
    if not isinstance(first, list) or len(first) > 10_000 or any(f not in AB_SIDES for f in first):
        raise TypeError("A/B 'first' is not a list of a and b")
    return AbLink(data["id"], data["side"], data["peer"], tuple(first))


def _ab_to_data(link: AbLink | None) -> dict[str, Any] | None:
    return (
        None
        if link is None
        else {"id": link.id, "side": link.side, "peer": link.peer, "first": list(link.first)}
    )


# ------------------------------------------------------------ generator CPU

_CPU_LIMIT_S = 1e9  # far beyond any phase: a bundle's nonsense is refused


def _generator_cpu_from_data(data: Any) -> GeneratorCpu | None:
    """A phase's measured generator CPU, checked (bundles are untrusted)."""
    if data is None:
        return None
    # others_cpu_s from schema version 13 on: before it, not measured
    keys = set(data) if isinstance(data, dict) else set()
    if keys not in ({"cpu_s", "wall_s"}, {"cpu_s", "wall_s", "others_cpu_s"}):
        raise ValueError("the generator's CPU is not {cpu_s, wall_s, others_cpu_s}")
    cpu_s = _number(data["cpu_s"], "cpu_s") or 0.0
    wall_s = _number(data["wall_s"], "wall_s") or 0.0
    others = _number(data.get("others_cpu_s"), "others_cpu_s", optional=True)
    if not (0 <= cpu_s < _CPU_LIMIT_S and 0 < wall_s < _CPU_LIMIT_S):
        raise ValueError(f"the generator's CPU {cpu_s:g} s over {wall_s:g} s is out of range")
    if others is not None and not 0 <= others < _CPU_LIMIT_S:
        raise ValueError(f"other processes' CPU {others:g} s is out of range")
    return GeneratorCpu(cpu_s, wall_s, others)


def _generator_cpu_to_data(cpu: GeneratorCpu | None) -> dict[str, float | None] | None:
    if cpu is None:
        return None
    return {"cpu_s": cpu.cpu_s, "wall_s": cpu.wall_s, "others_cpu_s": cpu.others_cpu_s}


# ------------------------------------------------------------ training

_MODEL_TEXTS = {
    "workload": ("unet3d", "resnet50", "cosmoflow"),
    "accelerator": ("h100", "a100"),
    "loader": ("pytorch", "tensorflow"),
}
_MODEL_INTS = {
    "accelerators": 1024,
    "epochs": 100,
    "batch": 10**6,
    "nominal_sample_bytes": 1 << 40,
    "samples_per_file": 10**6,
    "files_per_job": 10**9,
    "reader_threads": 256,
}
_MODEL_FLOATS = {"sample_bytes": 1 << 40, "compute_s": 1e6, "au_floor": 1.0, "scale": 1.0}
_READY_LIMIT = 50_000_000  # batch times of one accelerator: far beyond any run
_NAME_LIMIT = 256


def _training_from_data(data: Any) -> TrainingRecord | None:
    """A training phase's accelerators, every field checked (bundles are untrusted)."""
    if data is None:
        return None
    if not isinstance(data, dict) or set(data) != {"model", "traces"}:
        raise ValueError("training is not {model, traces}")
    m = data["model"]
    fields = {*_MODEL_TEXTS, *_MODEL_INTS, *_MODEL_FLOATS, "direct", "phase", "workload_label"}
    if not isinstance(m, dict) or set(m) != fields:
        raise ValueError(f"the accelerator model's fields are not {sorted(fields)}")
    for key, allowed in _MODEL_TEXTS.items():
        if m[key] not in allowed:
            raise ValueError(f"{key} {m[key]!r:.40} is not one of {', '.join(allowed)}")
    for key, limit in _MODEL_INTS.items():
        value = m[key]
        # every one at least 1: batches and steps are divided by them
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= limit:
            raise ValueError(f"{key} {value!r:.40} is not a whole number from 1 to {limit}")
    for key, limit in _MODEL_FLOATS.items():
        if not 0 < (_number(m[key], key) or 0.0) <= limit:
            raise ValueError(f"{key} {m[key]!r:.40} is not above 0 and at most {limit:g}")
    if not isinstance(m["direct"], bool):
        raise TypeError("direct is not true or false")
    for key in ("phase", "workload_label"):
        if not isinstance(m[key], str) or not 0 < len(m[key]) <= _NAME_LIMIT:
            raise TypeError(f"{key} is not a short text")
    model = AcceleratorModel(**m)
    shape = (model.epochs, model.steps_per_epoch)
    if shape[0] * shape[1] > _READY_LIMIT or not isinstance(data["traces"], list):
        raise ValueError("the accelerators' batches are not a list of a bounded size")
    if len(data["traces"]) > model.accelerators * 10_000:
        raise ValueError("more accelerators than any run has")
    return TrainingRecord(model, tuple(_trace(t, shape) for t in data["traces"]))


def _trace(t: Any, shape: tuple[int, int]) -> AcceleratorTrace:
    if not isinstance(t, dict) or set(t) != {"host", "index", "ready_ms"}:
        raise ValueError("an accelerator is not {host, index, ready_ms}")
    if not isinstance(t["host"], str) or not 0 < len(t["host"]) <= _NAME_LIMIT:
        raise TypeError("an accelerator's host is not a short text")
    index = t["index"]
    if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < 1024:
        raise ValueError(f"accelerator index {index!r:.40} is out of range")
    rows = t["ready_ms"]
    if not isinstance(rows, list) or len(rows) != shape[0]:
        raise ValueError(f"an accelerator's batches are not {shape[0]} epochs")
    ready = np.full(shape, np.nan)
    for e, row in enumerate(rows):
        if not isinstance(row, list) or len(row) != shape[1]:
            raise ValueError(f"an accelerator's epoch is not {shape[1]} batches")
        for k, value in enumerate(row):
            if value is not None:
                ready[e, k] = _signed(value, "a batch's time")
    return AcceleratorTrace(t["host"], index, ready)


def _signed(value: Any, name: str) -> float:
    """A finite number (a time on a phase's axis may be before its second 0)."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise TypeError(f"{name} {value!r:.40} is not a finite number")
    return float(value)


def _training_to_data(record: TrainingRecord | None) -> dict[str, Any] | None:
    if record is None:
        return None
    return {
        "model": asdict(record.model),
        "traces": [
            {
                "host": t.host,
                "index": t.index,
                "ready_ms": [
                    [None if v != v else round(float(v), 3) for v in row.tolist()]
                    for row in t.ready_ms
                ],
            }
            for t in record.traces
        ],
    }


# ------------------------------------------------------------ checkpoint

_CHECKPOINT_MODELS = ("llama3-8b", "llama3-70b", "llama3-405b", "llama3-1t")
_PROCESS_LIMIT = 1 << 20  # processes of one checkpoint phase, all hosts: far beyond any run


def _whole(value: Any, name: str, limit: int, least: int = 0) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not least <= value <= limit:
        raise ValueError(f"{name} {value!r:.40} is not a whole number from {least} to {limit}")
    return value


def _checkpoint_from_data(data: Any) -> CheckpointRecord | None:
    """A checkpoint phase's processes, every field checked (bundles are untrusted)."""
    if data is None:
        return None
    if not isinstance(data, dict) or set(data) != {"model", "op", "repetition", "processes"}:
        raise ValueError("checkpoint is not {model, op, repetition, processes}")
    m = data["model"]
    fields = {f.name for f in dataclass_fields(CheckpointModel)}
    if not isinstance(m, dict) or set(m) != fields:
        raise ValueError(f"the checkpoint model's fields are not {sorted(fields)}")
    if m["model"] not in _CHECKPOINT_MODELS:
        raise ValueError(f"model {m['model']!r:.40} is not one of {', '.join(_CHECKPOINT_MODELS)}")
    for key in ("processes", "repetitions"):
        _whole(m[key], key, 1 << 16, 1)
    for key in ("checkpoint_bytes", "nominal_bytes"):
        _whole(m[key], key, 1 << 60)
    if not 0 < (_number(m["scale"], "scale") or 0.0) <= 1:
        raise ValueError(f"scale {m['scale']!r:.40} is not above 0 and at most 1")
    for key in ("direct", "fsync"):
        if not isinstance(m[key], bool):
            raise TypeError(f"{key} is not true or false")
    if data["op"] not in ("write", "read"):
        raise ValueError(f"op {data['op']!r:.40} is not write or read")
    _whole(data["repetition"], "repetition", m["repetitions"], 1)
    rows = data["processes"]
    if not isinstance(rows, list) or len(rows) > _PROCESS_LIMIT:
        raise ValueError("the processes are not a list of a bounded size")
    return CheckpointRecord(
        CheckpointModel(**m), data["op"], data["repetition"], tuple(_process(p) for p in rows)
    )


def _process(p: Any) -> ProcessTime:
    if not isinstance(p, dict) or set(p) != {"host", "index", "io_bytes", "duration_s"}:
        raise ValueError("a process is not {host, index, io_bytes, duration_s}")
    if not isinstance(p["host"], str) or not 0 < len(p["host"]) <= _NAME_LIMIT:
        raise TypeError("a process's host is not a short text")
    return ProcessTime(
        p["host"],
        _whole(p["index"], "a process's index", _PROCESS_LIMIT),
        _whole(p["io_bytes"], "a process's bytes", 1 << 60),
        _number(p["duration_s"], "a process's duration") or 0.0,
    )


def _checkpoint_to_data(record: CheckpointRecord | None) -> dict[str, Any] | None:
    if record is None:
        return None
    return {
        "model": asdict(record.model),
        "op": record.op,
        "repetition": record.repetition,
        "processes": [asdict(p) for p in record.processes],
    }


RESOLVED = Codec[dict]("resolved scenario", from_data=_typed(dict))
PARAMS = Codec[dict]("parameters", from_data=_typed(dict))
TARGETS = Codec[list]("targets", from_data=_objects)
HOSTS = Codec[list]("hosts", from_data=_strings)
WARNINGS = Codec[tuple]("warnings", _findings_to_data, _findings_from_data)
DISCLOSURE = Codec[Disclosure]("disclosure", _disclosure_to_data, _disclosure_from_data)
SEARCH = Codec[dict]("search settings", from_data=_typed(dict))
POINT = Codec[dict]("point", from_data=_typed(dict))
ROUNDS = Codec[tuple]("steady-state rounds", list, _numbers)
EVENTS = Codec[tuple]("events", _events_to_data, _events_from_data)
IO_ERRORS = Codec[tuple]("I/O errors", _io_errors_to_data, _io_errors_from_data)
SUT = Codec[SutRecord]("system under test", _sut_to_data, _sut_from_data)
PRECISION = Codec[Any]("precision", _precision_to_data, _precision_from_data)
AB = Codec[Any]("A/B link", _ab_to_data, _ab_from_data)
# ------------------------------------------------------------ headline

_HEADLINE_WORKLOADS = 256  # far more than a phase has
_SHIFT_LIMIT_S = 86_400  # hosts start within seconds of each other, never a day


def _headline_of_from_data(data: Any) -> HeadlineOf | None:
    """The workloads a phase's headline counts, checked (bundles are untrusted)."""
    if data is None:
        return None
    if not isinstance(data, dict) or set(data) != {"workloads", "host_shifts_s"}:
        raise ValueError("the headline's workloads are not {workloads, host_shifts_s}")
    names, shifts = data["workloads"], data["host_shifts_s"]
    if not isinstance(names, list) or not 0 < len(names) <= _HEADLINE_WORKLOADS:
        raise ValueError("the headline's workloads are not a list of names")
    if not all(isinstance(n, str) and 0 < len(n) <= _NAME_LIMIT for n in names):
        raise ValueError("a headline workload's name is not a name")
    if not isinstance(shifts, dict) or not all(
        isinstance(h, str)
        and 0 < len(h) <= _NAME_LIMIT
        and type(v) is int
        and 0 <= v <= _SHIFT_LIMIT_S
        for h, v in shifts.items()
    ):
        raise ValueError("the hosts' shifts are not host: whole seconds from 0 to a day")
    return HeadlineOf(tuple(names), dict(shifts))


def _headline_of_to_data(of: HeadlineOf | None) -> dict[str, Any] | None:
    if of is None:
        return None
    return {"workloads": list(of.workloads), "host_shifts_s": dict(of.host_shifts_s)}


GENERATOR_CPU = Codec[Any]("generator CPU", _generator_cpu_to_data, _generator_cpu_from_data)
TRAINING = Codec[Any]("training", _training_to_data, _training_from_data)
CHECKPOINT = Codec[Any]("checkpoint", _checkpoint_to_data, _checkpoint_from_data)
HEADLINE_OF = Codec[Any]("headline workloads", _headline_of_to_data, _headline_of_from_data)

# RunRecord fields kept as JSON payloads, each in the column "<field>_json".
RUN_PAYLOADS: dict[str, Codec[Any]] = {
    "resolved": RESOLVED,
    "params": PARAMS,
    "targets": TARGETS,
    "hosts": HOSTS,
    "warnings": WARNINGS,
    "disclosure": DISCLOSURE,
    "search": SEARCH,
    "sut": SUT,
    "ab": AB,
}
# PhaseResult fields kept as JSON payloads, each in the column "<field>_json".
PHASE_PAYLOADS: dict[str, Codec[Any]] = {
    "point": POINT,
    "events": EVENTS,
    "io_errors": IO_ERRORS,
    "precision": PRECISION,
    "generator_cpu": GENERATOR_CPU,
    "training": TRAINING,
    "checkpoint": CHECKPOINT,
    "headline_of": HEADLINE_OF,
}
