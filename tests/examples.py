"""scripts/fio_examples.py, loaded for the tests: fio's example job files
copied into tests/data/fio-examples/ and how iorig takes each."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "fio_examples.py"


def _script():
    spec = importlib.util.spec_from_file_location("fio_examples_under_test", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


fio_examples = _script()
