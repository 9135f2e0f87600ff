"""A benchmark script (benchmarks/NAME.py) loaded as a module, for tests of its parts on the CPU (imported as
``benchmark_scripts``: pytest puts tests/ on sys.path)."""
from __future__ import annotations

import contextlib
import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Iterator

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


@contextlib.contextmanager
def loaded_script(name: str) -> Iterator[ModuleType]:
    """benchmarks/``name``.py as a module while the context lasts: registered under a name of its own (its
    dataclasses look their module up by name) and with its folder on sys.path, as when it runs as a script (its
    helpers, such as benchmarks_io, import)."""
    spec = importlib.util.spec_from_file_location(f"{name}_under_test", BENCHMARKS / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    sys.path.insert(0, str(BENCHMARKS))
    try:
        spec.loader.exec_module(module)
        yield module
    finally:
        sys.path.remove(str(BENCHMARKS))
        sys.modules.pop(spec.name, None)
