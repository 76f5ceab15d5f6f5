"""Checks of a run read from a file iorig did not write itself (a bundle).

SQLite stores whatever a crafted file holds: text in a REAL column, a
negative count, an infinite time. Every field of the typed model that comes
from a plain column is checked against its annotation — type, finiteness,
sign — and every field that comes from a JSON payload by that payload's
decoder as it is read (``codecs``), so that only runs iorig could have
written reach the database, each field checked once. A failure names the field by its
path in the model (``phases[2].scopes[0].totals[read].ios``).
"""

from __future__ import annotations

import dataclasses
import enum
import math
import re
import types
import typing
from collections.abc import Mapping
from functools import cache
from typing import Any

import numpy as np

from iorig.errors import UserError
from iorig.model import PhaseResult, RunRecord, SteadyState, StoredRun
from iorig.store import codecs
from iorig.store.schema import LATEST, schema_objects

# Fields read through a payload's decoder, which checked all of it as it
# decoded (store/codecs.py): each field of an imported run is checked once.
DECODED: dict[type, frozenset[str]] = {
    RunRecord: frozenset(codecs.RUN_PAYLOADS),
    PhaseResult: frozenset(codecs.PHASE_PAYLOADS),
    SteadyState: frozenset({"rounds"}),
}

# iorig's run ids are 12 hex digits; allow some room for future lengths only.
RUN_ID = re.compile(r"[0-9a-f]{8,32}")


class InvalidRun(ValueError):
    """A stored run that iorig could not have written (the message says where)."""


@cache
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def _number_problem(value: float) -> str | None:
    if math.isinf(value):
        return "is infinite"
    if value < 0:
        return "is negative"
    return None


def _check(value: Any, hint: Any, path: str) -> None:  # noqa: C901, PLR0911, PLR0912
    if hint is Any:
        return
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if origin in (types.UnionType, typing.Union):
        if value is None and type(None) in args:
            return
        (hint,) = [a for a in args if a is not type(None)]
        return _check(value, hint, path)
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        if not isinstance(value, hint):
            raise InvalidRun(f"{path} is {value!r}, not one of {', '.join(map(str, hint))}")
        return
    if origin is typing.Literal:
        if isinstance(value, bool) or value not in args:
            raise InvalidRun(f"{path} is {value!r:.60}, not one of {', '.join(map(str, args))}")
        return
    if hint is bool:
        if not isinstance(value, bool):
            raise InvalidRun(f"{path} is {value!r}, not true or false")
        return
    if hint is int or hint is float:
        kinds = (int,) if hint is int else (int, float)
        if isinstance(value, bool) or not isinstance(value, kinds):
            raise InvalidRun(
                f"{path} is {value!r:.60}, not {'an integer' if hint is int else 'a number'}"
            )
        problem = None if value != value else _number_problem(value)  # NaN means "none"
        if problem:
            raise InvalidRun(f"{path} {problem} ({value!r})")
        return
    if hint is str:
        if not isinstance(value, str):
            raise InvalidRun(f"{path} is {value!r:.60}, not text")
        return
    if hint is np.ndarray:
        if not isinstance(value, np.ndarray) or value.dtype.kind not in "iuf":
            raise InvalidRun(f"{path} is not an array of numbers")
        finite = value[~np.isnan(value)] if value.dtype.kind == "f" else value
        if finite.size and (np.isinf(finite).any() or (finite < 0).any()):
            raise InvalidRun(f"{path} holds infinite or negative values")
        return
    if dataclasses.is_dataclass(hint):
        if not isinstance(value, hint):
            raise InvalidRun(f"{path} is not a {hint.__name__}")
        decoded = DECODED.get(hint, frozenset())
        for f in dataclasses.fields(hint):
            if f.name not in decoded:
                _check(getattr(value, f.name), _hints(hint)[f.name], f"{path}.{f.name}")
        return
    if origin in (dict, Mapping):
        if not isinstance(value, Mapping):
            raise InvalidRun(f"{path} is not a mapping")
        key_hint, value_hint = args
        for key, item in value.items():
            _check(key, key_hint, f"{path} key")
            _check(item, value_hint, f"{path}[{key}]")
        return
    if origin in (tuple, list):
        if not isinstance(value, origin):
            raise InvalidRun(f"{path} is not a {origin.__name__}")
        for i, item in enumerate(value):
            _check(item, args[0], f"{path}[{i}]")
        return
    raise TypeError(f"no check for {hint!r} at {path}")  # a model type this module must learn


def check_run(stored: StoredRun) -> None:
    """Raise InvalidRun naming the field when ``stored`` is not a run iorig could have written."""
    run = stored.run
    if not isinstance(run.id, str) or not RUN_ID.fullmatch(run.id):
        raise InvalidRun(f"run id {run.id!r:.40} is not of the form iorig writes (hex digits)")
    _check(run, type(run), "run")
    hosts = set(run.hosts)
    for i, phase in enumerate(stored.phases):
        _check(phase, type(phase), f"phases[{i}]")
        for j, scope in enumerate(phase.scopes):
            host = scope.scope.host
            if host is not None and host not in hosts:
                raise InvalidRun(
                    f"phases[{i}].scopes[{j}].scope.host {host!r:.40} is not one of the run's hosts"
                )
            for ddir, series in scope.series.items():
                sizes = {
                    len(series),
                    series.iops.size,
                    series.bytes_per_s.size,
                    series.lat_mean_ns.size,
                }
                if len(sizes) != 1 or len(series.hist) not in (0, len(series)):
                    raise InvalidRun(
                        f"phases[{i}].scopes[{j}].series[{ddir}] has columns of different lengths"
                    )


NOT_OURS_HINT = "import files written by `iorig export` (or another iorig results database)"
LISTED = 6  # objects named in a refusal; the rest are counted


def _listed(items: list[str]) -> str:
    more = len(items) - LISTED
    return ", ".join(items[:LISTED]) + (f" and {more} more" if more > 0 else "")


def check_schema(
    version: int, objects: frozenset[tuple[str, str, str, str | None]], path: object
) -> None:
    """Refuse a file whose schema objects (``schema.file_objects``) are not
    exactly those of iorig's schema ``version`` (its ``PRAGMA user_version``):
    no view, trigger, virtual table, extra index, table or column, and
    nothing missing. The refusal says what the file holds instead."""
    not_ours = f"{path} is not an iorig results file"
    if version > LATEST:
        raise UserError(
            f"{path} has schema version {version}, newer than this iorig understands ({LATEST})",
            hint="upgrade iorig to import it",
        )
    if not objects:
        raise UserError(f"{not_ours}: it holds no tables", hint=NOT_OURS_HINT)
    held = sorted(objects, key=lambda o: (o[1], o[0]))
    if version < 1:
        names = [f"{kind} {name}" for kind, name, _, _ in held]
        raise UserError(f"{not_ours}: it holds {_listed(names)}", hint=NOT_OURS_HINT)
    expected = schema_objects(version)
    if objects == expected:
        return
    ours = {(kind, name) for kind, name, _, _ in expected}
    odd = [
        f"{kind} {name}" + (" (not as iorig makes it)" if (kind, name) in ours else "")
        for kind, name, table, sql in held
        if (kind, name, table, sql) not in expected
    ]
    found = {(kind, name) for kind, name, _, _ in objects}
    lacks = [f"{kind} {name}" for kind, name in sorted(ours - found)]
    said = " and ".join(
        f"{verb} {_listed(items)}" for verb, items in (("holds", odd), ("lacks", lacks)) if items
    )
    raise UserError(
        f"{not_ours}: it {said}, unlike iorig's schema version {version}", hint=NOT_OURS_HINT
    )
