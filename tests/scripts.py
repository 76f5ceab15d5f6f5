"""The project's scripts (scripts/*.py), loaded for the tests: they are
not part of the package, so they are imported from their files."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

SCRIPTS = Path(__file__).resolve().parent.parent / "scripts"


def load_script(name: str) -> ModuleType:
    """scripts/``name``.py as a module of its own."""
    spec = importlib.util.spec_from_file_location(f"{name}_under_test", SCRIPTS / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


# fio's example job files copied into tests/data/fio-examples/ and how iorig takes each
fio_examples = load_script("fio_examples")
