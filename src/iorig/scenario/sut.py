"""The system under test: a ``--sut`` file read with file:line errors, merged
over a scenario's ``sut:`` section, ``--note`` texts checked, and the
commented template ``iorig sut template`` prints. All of it before a run
row or a target file exists."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from iorig.errors import UserError
from iorig.model.sut import (
    NOTE_LIMIT,
    NOTES_LIMIT,
    SutRecord,
    SystemUnderTest,
    describe,
    parse_description,
)
from iorig.scenario.loading import ResolvedScenario, format_errors
from iorig.scenario.source import load_yaml
from iorig.untrusted import check_text, read_input

MAX_FILE_BYTES = 1_000_000


def load_sut_file(path: Path) -> dict[str, Any]:
    """The description in ``path``, validated; errors name file and line.
    Returns it as given (for merging): unfilled fields are simply absent."""
    text = read_input(path, "--sut", limit_bytes=MAX_FILE_BYTES)
    doc = load_yaml(text, str(path))
    data = doc.data
    if isinstance(data, dict) and set(data) == {"sut"}:  # a scenario's section copied whole
        data, prefix = data["sut"], ("sut",)
    else:
        prefix = ()
    try:
        parse_description(data)
    except ValidationError as exc:
        raise UserError(
            format_errors(exc.errors(), doc, {}, prefix=prefix),
            hint="see `iorig sut template` for every field",
        ) from None
    return data


def check_sut_file(path: Path) -> SystemUnderTest:
    """``iorig sut check``: the file validated on its own."""
    return parse_description(load_sut_file(path))


def merged(base: Any, over: Any) -> Any:
    """``over`` on top of ``base``: mappings merge key by key, anything else
    (text, numbers, lists of items) is replaced."""
    if isinstance(base, Mapping) and isinstance(over, Mapping):
        out = dict(base)
        for key, value in over.items():
            out[key] = merged(base[key], value) if key in base else value
        return out
    return over


def check_notes(notes: Sequence[str]) -> tuple[str, ...]:
    if len(notes) > NOTES_LIMIT:
        raise UserError(f"--note is given {len(notes)} times; at most {NOTES_LIMIT}")
    for note in notes:
        if not note.strip():
            raise UserError("--note is empty", hint='e.g. --note "write cache disabled"')
        if len(note) > NOTE_LIMIT:
            raise UserError(f"--note has {len(note):,} characters; at most {NOTE_LIMIT:,}")
        check_text(note, "--note", allow="\n\t")  # newlines and tabs: a note may have lines
    return tuple(notes)


def system_under_test(
    resolved: ResolvedScenario, sut_file: Path | None, notes: Sequence[str]
) -> SutRecord:
    """What the run stores: the scenario's ``sut:`` section with the
    ``--sut`` file merged over it, and the ``--note`` texts."""
    checked = check_notes(notes)
    section = resolved.scenario.sut
    base = describe(section) if section is not None else {}
    if sut_file is None:
        return SutRecord(base, checked)
    given = load_sut_file(sut_file)
    try:
        model = parse_description(merged(base, given))
    except ValidationError as exc:  # both validated alone; kept for safety
        raise UserError(f"--sut {sut_file}: {exc.errors()[0]['msg']}") from None
    return SutRecord(describe(model), checked)


def template() -> str:
    """The commented template: every field, with example values (it validates)."""
    return TEMPLATE


TEMPLATE = """\
# iorig system-under-test description: what iorig cannot read from the load
# generators. Give it with --sut FILE, or put it under `sut:` in a scenario.
# Every field is optional; what you leave out is listed as "not disclosed"
# in `iorig show RUN --disclosure` and the reports. Unknown fields are refused.
# The sections follow a SPECstorage full disclosure report.

test:                                  # product and test information
  tested_by: Example Labs
  date_tested: 2026-11                 # as you write it: 2026-11, 2026-11-23 …
  hardware_available: 2026-08
  software_available: 2026-08
  location: Durham, NC

product:
  name: Example Filer
  version: "4.1.0"                     # quote versions: 4.10 would read as 4.1
  description: A scale-out NAS with NVMe storage nodes.

bill_of_materials:                     # one item per kind of component
  - quantity: 4
    type: Node
    vendor: Example
    model: EF-8170
    description: 2x Xeon Gold 6336Y, 1 TiB RAM, 2x 100GbE, 8x 2 TB NVMe
  - quantity: 1
    type: Switch
    vendor: Example Networks
    model: X-7160
    description: 32 ports of 100GbE

software:                              # component software and versions
  - name: Example OS
    type: Storage operating system
    version: "6.5"
    description: runs on every node
  - name: Linux
    type: Load generators
    version: "6.1"

tuning:
  hardware:                            # parameter, value, what it does
    - component: Node
      parameter: MTU
      value: 1500
      description: default of the OS
  hardware_notes: No custom hardware tuning.
  software:
    - component: Linux clients
      parameter: nconnect
      value: 4
      description: NFS client connections per mount
    - component: Filer
      parameter: write cache
      value: "on"                      # quote on/off/yes/no: they are text here
      description: battery-backed write-back cache
  software_notes: Clients mount over NFSv3, rsize and wsize 1 MiB.

storage:
  items:
    - quantity: 4
      description: EF-8170 node with 8x 2 TB NVMe
      data_protection: replication factor 2
      stable_storage: yes              # are acknowledged writes on stable storage?
  data_protection: replication factor 2
  filesystems: 12
  filesystem_type: NFSv3
  total_capacity: 43.67 TiB
  stable_storage: >-
    Every synchronous write is committed to NVMe before it is acknowledged;
    no volatile cache holds acknowledged data.
  notes: Filesystems use the default 64 KiB block size.

network:
  transport:
    - type: 100GbE Ethernet
      ports: 8
      speed: 100Gb/s
      mtu: 1500
      notes: two ports per node in an LACP bond
  switches:
    - name: Example X-7160
      type: 100GbE
      ports_total: 32
      ports_used: 12
      mtu: 9214
  notes: Management traffic on a separate 1GbE network.

compute:
  processors:
    - quantity: 8
      type: CPU
      location: Node
      description: Intel Xeon Gold 6336Y, 24 cores
      function: storage services
  processor_notes: None.
  memory:
    - description: node memory
      size_gib: 1024
      quantity: 4
      nonvolatile: no
  memory_notes: 90 % of memory is filesystem cache.

clients:                               # the load generators and how they were set up
  - quantity: 12
    description: virtual machines, 8 vCPUs, 192 GiB
    os: Linux 6.1
    configuration: mount -o vers=3,rsize=1048576,wsize=1048576,nconnect=4
clients_notes: One orchestration client did not generate load.

dataflow: Each client mounts its own share; shares are spread over all nodes.
notes: The data set was created once and kept between load points.
"""


def check_template() -> SystemUnderTest:
    """The template as a description (tests: it must validate)."""
    return parse_description(load_yaml(TEMPLATE, "template").data)
