"""Loading a scenario: its source found (built-in, a YAML file or a fio job
file), parameters resolved, templates expanded, and the result checked by
the schema (``scenario.schema``).

A scenario is data, not code. Values may reference parameters as ``${name}``;
a value that is exactly ``${name}`` takes the parameter's typed value, a
longer string gets it interpolated. Parameters have a type, a default, and
may be changed by a named profile (``--quick``) or ``--set name=value``, in
that order of precedence. Every error names the file, the line and the field.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from iorig.errors import UserError
from iorig.scenario import checkpoint, training
from iorig.scenario.expr import evaluate
from iorig.scenario.fiofile import looks_like_job_file, parse_job_file
from iorig.scenario.fiojobs import translate
from iorig.scenario.schema import (
    Parameter,
    Scenario,
    coerce_parameter,
    value_text,
)
from iorig.scenario.source import Path_, YamlDoc, load_yaml
from iorig.untrusted import read_input

_TEMPLATE_RE = re.compile(r"\$\{([^}]*)\}")
_NAME_ONLY_RE = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_]*)\s*$")
_SIZE_PARAMETER_RE = re.compile(r"^\s*\$\{\s*size\s*\}\s*$")


# ------------------------------------------------------------------ loading


@dataclass(frozen=True)
class ScenarioSource:
    """A scenario file as read: its text, where it came from, its YAML tree."""

    text: str  # as given: a scenario's YAML, or a fio job file (stored with each run)
    origin: str  # "builtin:peak", a path, or "fio:PATH" (a fio job file)
    doc: YamlDoc  # the scenario (a fio job file's as iorig.scenario.fiojobs translated it)
    target: str | None = None  # the target the source names itself (a job file's filename)
    notes: tuple[str, ...] = ()  # what iorig did with the source (options not passed)

    @property
    def name(self) -> str:
        return str(self.doc.data.get("name", "")) if isinstance(self.doc.data, dict) else ""


@dataclass(frozen=True)
class ResolvedScenario:
    """A validated scenario with every parameter resolved."""

    scenario: Scenario
    source: ScenarioSource
    params: dict[str, Any]  # typed values
    param_origins: dict[str, str]  # "default", "profile quick", "--set", "sweep"
    profile: str | None
    sweep: dict[str, tuple[str, ...]] = field(default_factory=dict)  # name -> value texts
    phase_points: dict[str, dict[str, str]] = field(default_factory=dict)  # phase -> point
    notes: tuple[str, ...] = ()  # how options changed the scenario (--precision)

    def param_text(self, name: str) -> str:
        if name in self.sweep:
            return ", ".join(self.sweep[name])
        return value_text(self.scenario.parameters[name], self.params[name])

    def size_is_explicit(self, role: str) -> bool:
        """Whether target ``role``'s size is one to honour on a block device.

        A target sized by the plain ``size`` parameter left at its default
        (peak's 16 GiB) uses a whole device instead; any other size — given
        with --size, or derived, like Exchange's databases × db_size — is
        the region to use."""
        targets = self.source.doc.data.get("targets")
        raw = targets.get(role) if isinstance(targets, dict) else None
        text = str(raw.get("size", "")) if isinstance(raw, dict) else ""
        if _SIZE_PARAMETER_RE.match(text):
            return self.param_origins.get("size", "default") != "default"
        return True


def builtin_names() -> list[str]:
    folder = resources.files("iorig") / "scenarios"
    return sorted(p.name[:-5] for p in folder.iterdir() if p.name.endswith(".yaml"))


def is_job_file(ref: str, text: str) -> bool:
    """A fio job file, not a scenario: a name ending .fio, or a file not named
    .yaml/.yml whose first line that is not blank or a comment is [section]."""
    return ref.endswith(".fio") or (
        not ref.endswith((".yaml", ".yml")) and looks_like_job_file(text)
    )


def job_file_source(text: str, path: Path) -> ScenarioSource:
    """A fio job file as a scenario (iorig.scenario.fiojobs); its text kept as given."""
    found = translate(parse_job_file(text, str(path)), path.absolute())
    doc = load_yaml(found.yaml_text, f"{path} (as iorig's scenario)")
    return ScenarioSource(text, f"fio:{path.absolute()}", doc, found.target, found.notes)


def read_source(ref: str) -> ScenarioSource:
    """A built-in scenario by name, or a user's YAML or fio job file by path."""
    path = Path(ref)
    builtin = ref in builtin_names()
    # a path that is there (not a built-in's name: a folder `peak` in the working
    # directory does not hide it) is read as a file, or refused for what it is
    if (
        ref.endswith((".yaml", ".yml", ".fio"))
        or path.is_file()
        or (not builtin and os.path.lexists(path))
    ):
        what = "job file" if ref.endswith(".fio") else "scenario file"
        text = read_input(path, what)
        if is_job_file(ref, text):
            return job_file_source(text, path)
        return ScenarioSource(text, str(path), load_yaml(text, str(path)))
    if builtin:
        text = (resources.files("iorig") / "scenarios" / f"{ref}.yaml").read_text(encoding="utf-8")
        return ScenarioSource(text, f"builtin:{ref}", load_yaml(text, f"{ref}.yaml"))
    raise UserError(
        f"no built-in scenario named {ref!r} and no such file",
        hint=f"built-ins: {', '.join(builtin_names())}; or give a path to a .yaml file",
    )


def source_from_text(text: str, origin: str) -> ScenarioSource:
    return ScenarioSource(text, origin, load_yaml(text, origin))


def format_errors(
    errors: list,
    doc: YamlDoc,
    substituted: dict[Path_, str],
    prefix: Path_ = (),
    given: dict[Path_, str] | None = None,
) -> str:
    """Each validation error at its place in the scenario file, with the
    parameter values that made it. ``given``: where every value came from
    the command line, what was typed (``bs=4KB``): the error leads with it,
    and an ad-hoc run's scenario, whose lines the user never wrote
    ("adhoc:58: phases[1]…"), is not named."""
    lines = []
    for err in errors:
        # Drop pydantic's validator tags (e.g. "function-after[...]"), keep the data path.
        path = tuple(p for p in (*prefix, *err["loc"]) if isinstance(p, int) or "[" not in str(p))
        field = ".".join(f"[{p}]" if isinstance(p, int) else str(p) for p in path)
        field = field.replace(".[", "[") or "(top level)"
        message = err["msg"].removeprefix("Value error, ")
        if err["type"] == "extra_forbidden":
            message = f"unknown field {path[-1]!r}" if path else "unknown field"
        elif err["type"] == "missing":
            message = "required field is missing"
        elif err["type"] == "string_pattern_mismatch":
            message = "use lowercase letters, digits, '-' or '_' (e.g. random-read)"
        typed = (given or {}).get(path)
        if typed and doc.source == "adhoc":
            lines.append(f"{typed} (on the command line): {message}")
            continue
        origin = substituted.get(path)
        suffix = f" (value from parameter {origin})" if origin else ""
        lines.append(f"{doc.where(path)}: {field}: {message}{suffix}")
    return "\n".join(lines)


def _substitute(data: Any, params: dict[str, Any], path: Path_, doc: YamlDoc, used: dict) -> Any:
    if isinstance(data, dict):
        return {k: _substitute(v, params, (*path, k), doc, used) for k, v in data.items()}
    if isinstance(data, list):
        return [_substitute(v, params, (*path, i), doc, used) for i, v in enumerate(data)]
    if isinstance(data, str) and "${" in data:
        try:
            value, names = expand_template(data, params)
        except ValueError as exc:
            raise UserError(
                f"{doc.where(path)}: {exc}",
                hint=f"parameters: {', '.join(params) or 'none'}",
            ) from None
        used[path] = ", ".join(names)
        return value
    return data


def _template_value(inner: str, params: dict[str, Any]) -> tuple[Any, list[str]]:
    plain = _NAME_ONLY_RE.match(inner)
    if plain:
        name = plain.group(1)
        if name not in params:
            raise ValueError(f"unknown parameter ${{{name}}}: declare it under 'parameters'")
        return params[name], [name]
    value = evaluate(inner, params)
    return value, [n for n in params if re.search(rf"\b{re.escape(n)}\b", inner)]


def expand_template(text: str, params: dict[str, Any]) -> tuple[Any, list[str]]:
    """``${name}`` or ``${expression}``: as a whole value, the typed value (an
    expression's whole-number result is an int); inside a longer string, its
    text. Returns the value and the parameters it used."""
    whole = _TEMPLATE_RE.fullmatch(text)
    if whole:
        value, names = _template_value(whole.group(1), params)
        if (
            isinstance(value, float)
            and value.is_integer()
            and not _NAME_ONLY_RE.match(whole.group(1))
        ):
            value = int(value)
        return value, names
    used: list[str] = []

    def replace_one(match: re.Match) -> str:
        value, names = _template_value(match.group(1), params)
        used.extend(names)
        return str(value)

    return _TEMPLATE_RE.sub(replace_one, text), used


def _parameter_specs(source: ScenarioSource) -> dict[str, Parameter]:
    data = source.doc.data
    if not isinstance(data, dict):
        raise UserError(f"{source.doc.where(())}: a scenario is a mapping with name, title, phases")
    raw = data.get("parameters") or {}
    if not isinstance(raw, dict):
        raise UserError(f"{source.doc.where(('parameters',))}: 'parameters' must be a mapping")
    specs = {}
    for name, spec in raw.items():
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
            raise UserError(
                f"{source.doc.where(('parameters', name))}: bad parameter name {name!r}"
            )
        if not isinstance(spec, dict):
            raise UserError(
                f"{source.doc.where(('parameters', name))}: parameter {name!r} needs a mapping "
                "with 'type' and 'default'"
            )
        try:
            specs[name] = Parameter.model_validate(spec)
        except ValidationError as exc:
            raise UserError(
                format_errors(exc.errors(), source.doc, {}, prefix=("parameters", name))
            ) from None
    return specs


def resolve(
    source: ScenarioSource,
    profile: str | None = None,
    overrides: dict[str, str] | None = None,
) -> ResolvedScenario:
    """Validate ``source`` with its parameters resolved. Raises UserError."""
    overrides = overrides or {}
    specs = _parameter_specs(source)
    data = source.doc.data
    profiles = data.get("profiles") or {}
    if profile is not None and profile not in profiles:
        known = ", ".join(profiles) or "none"
        raise UserError(f"scenario {source.name!r} has no profile {profile!r} (profiles: {known})")
    values: dict[str, Any] = {}
    origins: dict[str, str] = {}
    raw_text: dict[str, str] = {}
    derived: list[str] = []
    for name, spec in specs.items():
        if isinstance(spec.default, str) and "${" in spec.default:
            derived.append(name)  # computed below, once the others are known
            continue
        values[name] = coerce_parameter(spec, spec.default)
        origins[name] = "default"
        raw_text[name] = str(spec.default)
    for name, value in (profiles.get(profile) or {}).items() if profile else ():
        if name not in specs:
            raise UserError(
                f"{source.doc.where(('profiles', profile, name))}: profile {profile!r} sets "
                f"unknown parameter {name!r}"
            )
        try:
            values[name] = coerce_parameter(specs[name], value)
        except ValueError as exc:
            raise UserError(
                f"{source.doc.where(('profiles', profile, name))}: {name}: {exc}"
            ) from None
        origins[name] = f"profile {profile}"
        raw_text[name] = str(value)
    for name, value in overrides.items():
        if name not in specs:
            raise UserError(
                f"--set {name}=...: scenario {source.name!r} has no parameter {name!r}",
                hint=f"its parameters: {', '.join(specs) or 'none'} (see `iorig scenarios show`)",
            )
        try:
            values[name] = coerce_parameter(specs[name], value)
        except ValueError as exc:
            raise UserError(f"--set {name}={value}: {exc}") from None
        origins[name] = "--set"
        raw_text[name] = str(value)
    for name in derived:
        if name in origins:
            continue  # set by a profile or --set
        where = source.doc.where(("parameters", name, "default"))
        try:
            value, _ = expand_template(specs[name].default, values)
            values[name] = coerce_parameter(specs[name], value)
        except ValueError as exc:
            raise UserError(
                f"{where}: {name}: {exc}",
                hint="a derived default may use the parameters declared before it",
            ) from None
        origins[name] = "default"
        raw_text[name] = str(specs[name].default)

    used: dict[Path_, str] = {}
    body = {k: v for k, v in data.items() if k not in ("parameters", "profiles")}
    body = _substitute(body, values, (), source.doc, used)
    body["parameters"] = {n: s.model_dump() for n, s in specs.items()}
    body["profiles"] = profiles
    described = {
        path: "; ".join(
            f"{n}: {raw_text.get(n, '?')} from {origins.get(n, '?')}" for n in names.split(", ")
        )
        for path, names in used.items()
        if names
    }
    body = _generated_body(body, source.doc, described)
    # values only the command line gave, as typed (the error leads with them)
    typed = {
        path: ", ".join(f"{n}={raw_text.get(n, '?')}" for n in names.split(", "))
        for path, names in used.items()
        if names and all(origins.get(n) == "--set" for n in names.split(", "))
    }
    try:
        scenario = Scenario.model_validate(body)
    except ValidationError as exc:
        raise UserError(format_errors(exc.errors(), source.doc, described, given=typed)) from None
    return ResolvedScenario(scenario, source, values, origins, profile, notes=source.notes)


GENERATORS = {"training": training.expand, "checkpoint": checkpoint.expand}


def _generated_body(body: dict[str, Any], doc: YamlDoc, described: dict[Path_, str]) -> dict:
    """``body`` with its phases made from its ``training:`` or ``checkpoint:``
    section, if it has one (both: the scenario's validation refuses it)."""
    section = next((s for s in GENERATORS if isinstance(body.get(s), dict)), None)
    if section is None:
        return body
    if body.get("phases"):
        raise UserError(
            f"{doc.where(('phases',))}: a scenario with a {section} section gets its phases "
            "from it",
            hint=f"remove 'phases' (or the {section} section)",
        )
    try:
        return GENERATORS[section](body)
    except ValidationError as exc:
        errors = format_errors(exc.errors(), doc, described, prefix=(section,))
        raise UserError(errors) from None


def load(
    ref: str, profile: str | None = None, overrides: dict[str, str] | None = None
) -> ResolvedScenario:
    return resolve(read_source(ref), profile, overrides)


def parse_assignments(items: list[str]) -> dict[str, str]:
    """``["bs=4k", "iodepth=32"]`` -> dict; rejects malformed items."""
    out: dict[str, str] = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            raise UserError(f"--set {item!r}: expected name=value, e.g. --set duration=30s")
        out[name.strip()] = value.strip()
    return out
