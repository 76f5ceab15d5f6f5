"""The locks in requirements/ against pyproject.toml: what `make demo` and
`make test` install (scripts/bootstrap.sh) is every dependency pyproject
names, pinned inside its range, with hashes, and the same version of each in
both locks. A range changed without `make lock` fails here, not on a user's
machine."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest
from packaging.markers import Marker
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

REPO = Path(__file__).resolve().parent.parent
LOCKS = {"runtime": REPO / "requirements" / "runtime.txt", "dev": REPO / "requirements" / "dev.txt"}
# what bootstrap.sh installs besides pyproject's dependencies
TOOLS = REPO / "requirements" / "tools.in"


def _pins(lock: Path) -> list[tuple[str, str, Marker | None, int]]:
    """(name, version, marker, hashes) of each requirement in a lock."""
    text = lock.read_text()
    entries = re.split(r"\n(?=[A-Za-z0-9])", text)
    pins = []
    for entry in entries:
        head = entry.split("\\")[0].strip()
        if not head or head.startswith("#"):
            continue
        requirement = Requirement(head)
        (spec,) = requirement.specifier
        assert spec.operator == "==", f"{lock.name}: {head} is not pinned to one version"
        hashes = len(re.findall(r"--hash=sha256:[0-9a-f]{64}", entry))
        pins.append((canonicalize_name(requirement.name), spec.version, requirement.marker, hashes))
    return pins


def _wanted(extra: str | None) -> list[Requirement]:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    lines = list(project["dependencies"])
    if extra:
        lines += project["optional-dependencies"][extra]
    lines += [line for line in TOOLS.read_text().splitlines() if line and not line.startswith("#")]
    return [Requirement(line) for line in lines]


@pytest.mark.parametrize(("lock", "extra"), [("runtime", None), ("dev", "dev")])
def test_every_dependency_is_locked_inside_its_range_with_hashes(lock, extra):
    pins = _pins(LOCKS[lock])
    assert pins and all(hashes > 0 for *_, hashes in pins), "a pin without a hash"
    # this Python's environment: the pin pip installs here
    here = {
        name: version for name, version, marker, _ in pins if marker is None or marker.evaluate()
    }
    for requirement in _wanted(extra):
        name = canonicalize_name(requirement.name)
        assert name in here, f"{name} is not in {lock}.txt: run make lock"
        assert requirement.specifier.contains(here[name], prereleases=True), (
            f"{lock}.txt pins {name}=={here[name]} outside pyproject's {requirement}: run make lock"
        )


def test_the_demo_and_the_tests_run_iorig_on_the_same_packages():
    runtime = {(name, str(marker)): version for name, version, marker, _ in _pins(LOCKS["runtime"])}
    dev = {(name, str(marker)): version for name, version, marker, _ in _pins(LOCKS["dev"])}
    assert runtime.keys() <= dev.keys()
    assert {key: dev[key] for key in runtime} == runtime
