"""The system under test as the user describes it: what iorig cannot read
from the load generators (the storage product, its bill of materials,
tuning, data protection, network, clients, dataflow), in the sections of a
SPECstorage full disclosure report (seed 004).

Every field is optional and unknown fields are refused. The same schema
checks a ``--sut`` file, a scenario's ``sut:`` section and a stored run's
payload (bundles are untrusted input), so text lengths and list sizes are
bounded here.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field

TEXT_LIMIT = 16_384  # a paragraph of notes; anything longer is not a description
NAME_LIMIT = 512
ITEMS_LIMIT = 500  # rows of one table (seed 004's longest has 9)
NOTE_LIMIT = 4096
NOTES_LIMIT = 50


def _text(value: Any) -> Any:
    """YAML reads ``2022-07-15`` as a date and ``1500`` as a number: keep
    them as the user wrote them. Booleans are refused (``yes`` is ambiguous)."""
    if isinstance(value, bool):
        raise ValueError("expected text, got true/false (quote it)")
    if isinstance(value, int | float | dt.date):
        return str(value)
    return value


def _flag(value: Any) -> Any:
    if isinstance(value, str) and value.strip().lower() in ("yes", "true", "no", "false"):
        return value.strip().lower() in ("yes", "true")
    return value


Text = Annotated[str, BeforeValidator(_text), Field(max_length=TEXT_LIMIT)]
Name = Annotated[str, BeforeValidator(_text), Field(max_length=NAME_LIMIT)]
Count = Annotated[int, Field(ge=0, le=2**31 - 1, strict=True)]
Flag = Annotated[bool, BeforeValidator(_flag), Field(strict=True)]


class _Part(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False, defer_build=True)


class TestInfo(_Part):
    tested_by: Name | None = None
    date_tested: Name | None = None
    hardware_available: Name | None = None
    software_available: Name | None = None
    location: Name | None = None


class Product(_Part):
    name: Name | None = None
    version: Name | None = None
    description: Text | None = None


class BomItem(_Part):
    quantity: Count | None = None
    type: Name | None = None
    vendor: Name | None = None
    model: Name | None = None
    description: Text | None = None


class SoftwareItem(_Part):
    name: Name | None = None
    type: Name | None = None
    version: Name | None = None
    description: Text | None = None


class TuningItem(_Part):
    component: Name | None = None  # e.g. "Linux clients", "FSVMs"
    parameter: Name | None = None
    value: Name | None = None
    description: Text | None = None


class Tuning(_Part):
    hardware: list[TuningItem] | None = Field(default=None, max_length=ITEMS_LIMIT)
    hardware_notes: Text | None = None
    software: list[TuningItem] | None = Field(default=None, max_length=ITEMS_LIMIT)
    software_notes: Text | None = None


class StorageItem(_Part):
    quantity: Count | None = None
    description: Text | None = None
    data_protection: Name | None = None
    stable_storage: Flag | None = None


class Storage(_Part):
    items: list[StorageItem] | None = Field(default=None, max_length=ITEMS_LIMIT)
    data_protection: Name | None = None
    filesystems: Count | None = None
    filesystem_type: Name | None = None
    total_capacity: Name | None = None
    stable_storage: Text | None = None  # how acknowledged writes survive a power loss
    notes: Text | None = None


class Port(_Part):
    type: Name | None = None
    ports: Count | None = None
    speed: Name | None = None
    mtu: Count | None = None
    notes: Text | None = None


class Switch(_Part):
    name: Name | None = None
    type: Name | None = None
    ports_total: Count | None = None
    ports_used: Count | None = None
    mtu: Count | None = None
    notes: Text | None = None


class Network(_Part):
    transport: list[Port] | None = Field(default=None, max_length=ITEMS_LIMIT)
    switches: list[Switch] | None = Field(default=None, max_length=ITEMS_LIMIT)
    notes: Text | None = None


class Processor(_Part):
    quantity: Count | None = None
    type: Name | None = None
    location: Name | None = None
    description: Text | None = None
    function: Name | None = None


class MemoryItem(_Part):
    description: Text | None = None
    size_gib: Annotated[float, Field(ge=0, le=1e12)] | None = None
    quantity: Count | None = None
    nonvolatile: Flag | None = None


class Compute(_Part):
    processors: list[Processor] | None = Field(default=None, max_length=ITEMS_LIMIT)
    processor_notes: Text | None = None
    memory: list[MemoryItem] | None = Field(default=None, max_length=ITEMS_LIMIT)
    memory_notes: Text | None = None


class Client(_Part):
    quantity: Count | None = None
    description: Text | None = None
    os: Name | None = None
    configuration: Text | None = None  # mount options, driver settings


class SystemUnderTest(_Part):
    """A ``--sut`` file, or a scenario's ``sut:`` section."""

    test: TestInfo | None = None
    product: Product | None = None
    bill_of_materials: list[BomItem] | None = Field(default=None, max_length=ITEMS_LIMIT)
    software: list[SoftwareItem] | None = Field(default=None, max_length=ITEMS_LIMIT)
    tuning: Tuning | None = None
    storage: Storage | None = None
    network: Network | None = None
    compute: Compute | None = None
    clients: list[Client] | None = Field(default=None, max_length=ITEMS_LIMIT)
    clients_notes: Text | None = None
    dataflow: Text | None = None
    notes: Text | None = None


@dataclass(frozen=True)
class SutRecord:
    """What a run stores about its system under test: the description as
    JSON (validated, unfilled fields left out) and ``--note`` texts."""

    description: Mapping[str, Any] = field(default_factory=dict)
    notes: tuple[str, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.description) or bool(self.notes)


def describe(model: SystemUnderTest) -> dict[str, Any]:
    """The description as stored: JSON, unfilled fields left out."""
    return model.model_dump(mode="json", exclude_none=True)


def parse_description(data: Any) -> SystemUnderTest:
    """A stored or given description, checked (raises pydantic's ValidationError)."""
    return SystemUnderTest.model_validate(data)


# ------------------------------------------------------------ disclosure rows

# Sections in the order of seed 004's report, each with its title.
SECTIONS: tuple[tuple[str, str], ...] = (
    ("test", "Product and test information"),
    ("product", "Product"),
    ("bill_of_materials", "Bill of materials"),
    ("software", "Component software"),
    ("tuning", "Configuration and tuning"),
    ("storage", "Storage and filesystems"),
    ("network", "Transport and switches"),
    ("compute", "Processing elements and memory"),
    ("clients", "Clients"),
    ("clients_notes", "Client notes"),
    ("dataflow", "Dataflow"),
    ("notes", "Other notes"),
)
NOT_DISCLOSED = "not disclosed"


@dataclass(frozen=True)
class SutTable:
    """One part of a section: ``rows`` of (field, text) pairs, or with
    ``headers`` a table of items; ``missing`` when nothing was disclosed."""

    title: str
    headers: tuple[str, ...] = ()
    rows: tuple[tuple[str, ...], ...] = ()
    missing: bool = False


def _label(name: str) -> str:
    return name.replace("_", " ")


def _cell(value: Any) -> str:
    if value is None:
        return NOT_DISCLOSED
    if isinstance(value, bool):
        return "yes" if value else "no"
    return str(value)


def _item_type(annotation: Any) -> type[BaseModel] | None:
    """The item model of ``list[Item] | None``, else None."""
    for arg in getattr(annotation, "__args__", ()):
        if getattr(arg, "__origin__", None) is list:
            (item,) = arg.__args__
            return item
    return None


def _item_table(title: str, item_type: type[BaseModel], items: Any) -> SutTable:
    names = tuple(item_type.model_fields)
    if not items:
        return SutTable(title, tuple(_label(n) for n in names), (), missing=True)
    rows = tuple(tuple(_cell(i.get(n)) for n in names) for i in items)
    return SutTable(title, tuple(_label(n) for n in names), rows)


def disclosure_tables(record: SutRecord) -> list[SutTable]:
    """Every section of the schema in seed 004's order, what the user did not
    fill marked "not disclosed", then the run's notes."""
    data = record.description
    out: list[SutTable] = []
    for name, title in SECTIONS:
        info = SystemUnderTest.model_fields[name]
        item = _item_type(info.annotation)
        if item is not None:
            out.append(_item_table(title, item, data.get(name)))
            continue
        sub = next(
            (
                a
                for a in getattr(info.annotation, "__args__", ())
                if isinstance(a, type) and issubclass(a, BaseModel)
            ),
            None,
        )
        if sub is None:
            out.append(
                SutTable(title, (), (("", _cell(data.get(name))),), missing=data.get(name) is None)
            )
            continue
        value = data.get(name) or {}
        lists = {n: _item_type(f.annotation) for n, f in sub.model_fields.items()}
        scalars = [(n, value.get(n)) for n, t in lists.items() if t is None]
        if scalars:
            rows = tuple((_label(n), _cell(v)) for n, v in scalars)
            unfilled = all(v is None for _, v in scalars)
            # a section given in part (tuning items, no notes): only the fields
            # left out are "not disclosed", named, never the section
            part = (
                title
                if not value or not unfilled
                else (f"{title}: {', '.join(_label(n) for n, _ in scalars)}")
            )
            out.append(SutTable(part, (), rows, missing=unfilled))
        for n, t in lists.items():
            if t is not None:
                out.append(_item_table(f"{title}: {_label(n)}", t, value.get(n)))
    notes = tuple(("", n) for n in record.notes)
    out.append(
        SutTable("Run notes (--note)", (), notes or (("", NOT_DISCLOSED),), missing=not notes)
    )
    return out


def brief(record: SutRecord) -> str | None:
    """One line for plain ``show``: the product, and which sections the user
    described (all of it: ``show --disclosure``); None without a description."""
    data = record.description
    if not data:
        return None
    product = data.get("product") or {}
    name = " ".join(str(product[k]) for k in ("name", "version") if product.get(k))
    given = ", ".join(_label(n) for n, _ in SECTIONS if data.get(n))
    return f"{name + '; ' if name else ''}described: {given} (all: show --disclosure)"


# ------------------------------------------------------------ differences


def _item_key(section: str, item: Mapping[str, Any], index: int) -> str:
    """How an item is named in a difference: a tuning item by its component
    and parameter ("cache: on → off"), others by model/name, else position."""
    if "parameter" in item:
        return "/".join(str(item[k]) for k in ("component", "parameter") if k in item)
    for key in ("model", "name", "type", "description"):
        if key in item:
            return f"{section}[{str(item[key])[:40]}]"
    return f"{section}[{index}]"


def flat_description(record: SutRecord) -> dict[str, str]:
    """Field -> text of a description, for comparing runs: tuning items by
    parameter, list items by their name."""
    out: dict[str, str] = {}

    def walk(value: Any, prefix: str) -> None:
        if isinstance(value, dict):
            for key, inner in value.items():
                walk(inner, f"{prefix}.{key}" if prefix else key)
        elif isinstance(value, list):
            for i, item in enumerate(value):
                if isinstance(item, dict):
                    key = _item_key(prefix, item, i)
                    if "parameter" in item:
                        out[key] = _cell(item.get("value"))
                    else:
                        walk(item, key)
                else:
                    out[f"{prefix}[{i}]"] = _cell(item)
        else:
            out[prefix] = _cell(value)

    walk(dict(record.description), "")
    for i, note in enumerate(record.notes):
        out[f"note {i + 1}"] = note
    return out
