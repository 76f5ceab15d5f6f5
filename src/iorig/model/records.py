"""Run records: what a run was (scenario, parameters, targets, hosts, the
system it ran on, what the audit found) and, with its phases, a stored run."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from iorig.model.kinds import RunStatus
from iorig.model.precision import AbLink
from iorig.model.results import PhaseResult
from iorig.model.sut import SutRecord


@dataclass(frozen=True)
class InterfaceLimit:
    """The smallest known link bandwidth on the path to the targets."""

    bytes_per_s: float
    source: str  # the device and link it was read from


@dataclass(frozen=True)
class Disclosure:
    """What iorig read about the machines of a run, by section (``host``,
    ``os``, ``cpu``, ``memory``, ``mitigations``, ``fio``, ``targets``,
    ``nics``; for multi-host runs ``fio``, ``servers`` and ``client``), as the
    collectors gave it, plus the interface limit derived from it."""

    sections: Mapping[str, Any] = field(default_factory=dict)
    interface_limit: InterfaceLimit | None = None

    def __bool__(self) -> bool:
        return bool(self.sections)

    def section(self, name: str) -> Any:
        return self.sections.get(name)

    @property
    def memory_bytes(self) -> int | None:
        memory = self.sections.get("memory")
        return memory.get("total_bytes") if isinstance(memory, dict) else None

    @property
    def usable_cpus(self) -> float | None:
        """CPUs fio could run on (affinity, capped by a cgroup quota); None
        when unknown (older runs, or hosts iorig could not look at)."""
        cpu = self.sections.get("cpu")
        value = cpu.get("usable_cpus") if isinstance(cpu, dict) else None
        return float(value) if isinstance(value, int | float) and value > 0 else None

    @property
    def targets(self) -> list[dict[str, Any]]:
        found = self.sections.get("targets")
        return [t for t in found if isinstance(t, dict)] if isinstance(found, list) else []

    def flat(self) -> dict[str, str]:
        """Dotted keys -> text, for showing and diffing two disclosures."""
        return flatten(dict(self.sections))


def flatten(data: Any, prefix: str = "") -> dict[str, str]:
    """Dotted keys -> text of nested dicts and lists."""
    out: dict[str, str] = {}
    if isinstance(data, dict):
        for key, value in data.items():
            out.update(flatten(value, f"{prefix}.{key}" if prefix else str(key)))
    elif isinstance(data, list):
        for i, value in enumerate(data):
            out.update(flatten(value, f"{prefix}[{i}]"))
    else:
        out[prefix] = "" if data is None else str(data)
    return out


@dataclass(frozen=True)
class Finding:
    """Something that could have inflated or distorted a run, with advice."""

    code: str
    message: str
    advice: str
    phase: str | None = None
    severity: str = "warning"  # "warning" or "info"

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


JOB_FILE_ORIGIN = "fio:"  # a run's scenario_origin when it ran a fio job file


@dataclass(frozen=True)
class RunRecord:
    """One run as stored. The store maps these fields to its columns."""

    id: str
    label: str | None
    scenario: str
    scenario_version: int
    title: str
    scenario_origin: str
    scenario_text: str
    resolved: dict[str, Any]  # the scenario after parameters, as JSON
    params: dict[str, Any]  # name -> {"value", "text", "origin"}
    profile: str | None
    targets: list[dict[str, Any]]  # role, path, kind, size_bytes, … (host: on several hosts)
    hosts: list[str]
    command: str
    iorig_version: str
    fio_version: str
    status: RunStatus
    error: str | None
    warnings: tuple[Finding, ...]
    disclosure: Disclosure
    hostname: str
    pid: int
    started_at: float
    ended_at: float | None
    search: dict[str, Any] = field(default_factory=dict)  # sweep / knee / curve settings
    sut: SutRecord = field(default_factory=SutRecord)  # the user's description and notes
    ab: AbLink | None = None  # one side of an interleaved A/B comparison (iorig ab)

    @property
    def name(self) -> str:
        """How comparisons and reports call the run: its label, else its id."""
        return self.label or self.id

    @property
    def job_file(self) -> tuple[str, str] | None:
        """(path, text) of the fio job file the run ran, as it was given; None
        for a scenario (``scenario_text`` then holds the scenario's YAML)."""
        if not self.scenario_origin.startswith(JOB_FILE_ORIGIN):
            return None
        return self.scenario_origin.removeprefix(JOB_FILE_ORIGIN), self.scenario_text


def target_name(target: dict[str, Any]) -> str:
    """A stored target's role, with its host on a multi-host run (``db@h2:8765``)."""
    return target["role"] + (f"@{target['host']}" if target.get("host") else "")


@dataclass(frozen=True)
class StoredRun:
    run: RunRecord
    phases: tuple[PhaseResult, ...]
    phase_ids: tuple[int, ...] = ()
