"""The layer contract of ``src/iorig``, read from the source itself: which
part may import which, and no import cycles.

    cli → report → analyze → scenario → model
    cli → run → machine, fio, targets, store → model
    run → analyze, scenario

(docs/architecture.md draws the whole contract.)

Every import counts, including those inside functions and under
TYPE_CHECKING: a layer that needs a type from above is in the wrong place.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parent.parent / "src"
PACKAGE = SRC / "iorig"

# Each part of iorig (a package, or one of the base modules) and the parts
# it may import (the package root's __version__ aside).
BASE = {"model", "errors", "units", "untrusted", "bounded"}
PARTS: dict[str, set[str]] = {
    "model": set(),
    "errors": set(),
    "units": set(),
    "bounded": set(),  # a call that may hang, waited for a bounded time
    "untrusted": {"errors"},  # files read bounded, argv and text checked, text made visible
    "fio": BASE,
    "scenario": BASE,
    "targets": BASE,
    "store": {"model", "errors", "untrusted"},
    "analyze": BASE | {"scenario"},
    # what iorig reads from or changes on the machine beyond a process: the
    # system's description, the block throttle, locks, records to restore
    "machine": BASE | {"store", "targets"},
    "run": BASE | {"fio", "store", "analyze", "scenario", "targets", "machine"},
    "report": BASE | {"analyze", "scenario"},
    # iorig serve and --metrics: pages from the store through the report
    # writer, TLS as the agent makes it (fio.agentauth)
    "serve": BASE | {"analyze", "scenario", "report", "store", "fio"},
}
PARTS["cli"] = set(PARTS)  # the top: anything below it
TOP_LEVEL = {
    "__main__": "cli",
    "entry": "cli",  # the command's entry point, around the command line
}


def _modules() -> dict[str, Path]:
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(SRC).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


MODULES = _modules()


def _part(module: str) -> str | None:
    pieces = module.split(".")
    if len(pieces) == 1:
        return None  # the package root (only __version__)
    name = pieces[1]
    return TOP_LEVEL.get(name, name)


def _imports(module: str, path: Path) -> set[str]:
    """The iorig modules ``module`` imports: for ``from pkg import name`` the
    submodule ``pkg.name`` when it is one, else ``pkg``."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.split(".")[0] == "iorig"}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module.split(".")[0] != "iorig":
                continue
            for alias in node.names:
                sub = f"{node.module}.{alias.name}"
                found.add(sub if sub in MODULES else node.module)
    found.discard(module)
    return found


@functools.cache
def graph() -> dict[str, set[str]]:
    """Each module's iorig imports; parsed when a test asks, not at
    collection (every pytest worker collects)."""
    return {m: _imports(m, p) for m, p in MODULES.items()}


def test_every_part_is_known():
    unknown = {_part(m) for m in MODULES} - set(PARTS) - {None}
    assert not unknown, f"modules outside the layer contract: {unknown}"


@pytest.mark.parametrize("module", sorted(MODULES))
def test_imports_follow_the_layers(module):
    part = _part(module)
    if part is None:
        return
    allowed = PARTS[part] | {part}
    wrong = sorted(
        f"{target} ({_part(target)})"
        for target in graph()[module]
        if _part(target) is not None and _part(target) not in allowed
    )
    assert not wrong, f"{module} ({part}) may not import: {', '.join(wrong)}"


def test_no_import_cycles():
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []
    counter = [0]

    def visit(node: str) -> None:  # Tarjan's strongly connected components
        index[node] = low[node] = counter[0]
        counter[0] += 1
        stack.append(node)
        on_stack.add(node)
        for target in graph().get(node, ()):
            if target not in MODULES:
                continue
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for module in MODULES:
        if module not in index:
            visit(module)
    assert cycles == []


def test_the_contract_catches_a_violation():
    """The check is not vacuous: an upward import is seen and refused."""
    tree = ast.parse("from iorig.report.tables.run import TableModel\n")
    node = tree.body[0]
    assert isinstance(node, ast.ImportFrom)
    assert _part(node.module or "") == "report" and "report" not in PARTS["analyze"]
    assert "iorig.store.repository" in graph()["iorig.store"]
