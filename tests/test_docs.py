"""The docs in the repository kept true to the code: the generated
references are what the code makes now, the architecture page's module map
names every module (and no module that is gone), and every link between
the docs, and every docs/ path a comment in the code names, exists."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from iorig.cli.reference import REFERENCES

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
PACKAGE = ROOT / "src" / "iorig"


@pytest.mark.parametrize("name", sorted(REFERENCES))
def test_the_generated_reference_is_current(name):
    written = (DOCS / "reference" / name).read_text()
    assert written == REFERENCES[name](), (
        f"docs/reference/{name} is out of date: run `make docs` and commit it"
    )


def _mapped_modules(text: str) -> set[str]:
    """``src/iorig/...py`` of every row under a ``### `src/iorig/PKG/``` heading."""
    found, folder = set(), None
    for line in text.splitlines():
        if m := re.fullmatch(r"### `(src/iorig/(?:[\w/]+/)?)`", line.strip()):
            folder = m.group(1)
        elif folder and (m := re.match(r"\| `([\w]+\.py)` \|", line)):
            found.add(folder + m.group(1))
    return found


def test_the_module_map_names_every_module_and_only_those():
    mapped = _mapped_modules((DOCS / "architecture.md").read_text())
    actual = {str(p.relative_to(ROOT)) for p in PACKAGE.rglob("*.py")}
    assert not actual - mapped, (
        f"add to docs/architecture.md's module map: {sorted(actual - mapped)}"
    )
    assert not mapped - actual, f"gone, remove from the module map: {sorted(mapped - actual)}"


def test_the_module_map_check_sees_a_missing_module():
    """Not vacuous: a map without one row is seen to lack it."""
    text = (DOCS / "architecture.md").read_text().replace("| `plan.py` |", "| plan |")
    assert "src/iorig/run/plan.py" not in _mapped_modules(text)
    assert "src/iorig/run/session.py" in _mapped_modules(text)


def _markdown_files() -> list[Path]:
    return [ROOT / "README.md", *sorted(DOCS.rglob("*.md"))]


LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")


@pytest.mark.parametrize("page", _markdown_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_links_between_the_docs_resolve(page):
    broken = [
        target
        for target in LINK.findall(page.read_text())
        if "://" not in target
        and not target.startswith("mailto:")
        and not (page.parent / target).exists()
    ]
    assert not broken, f"{page.relative_to(ROOT)} links to what does not exist: {broken}"


def test_every_docs_path_the_code_names_exists():
    named = {}
    for path in [*PACKAGE.rglob("*.py"), *(ROOT / "tests").rglob("*.py"), ROOT / "Makefile"]:
        for ref in re.findall(r"\bdocs/[\w./-]+\.md\b", path.read_text()):
            named.setdefault(ref, str(path.relative_to(ROOT)))
    missing = {ref: where for ref, where in named.items() if not (ROOT / ref).exists()}
    assert not missing, f"these name docs that do not exist: {missing}"
