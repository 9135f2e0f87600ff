"""The judge builds a single-file solution's ``load_inline`` extensions from the source text, then the candidate
process looks each one up by the key of the call the solution actually makes at import. The two keys are computed
on different sides (one from the statically read call, one from torch's real signature binding the live call), so a
mismatch would turn an honest solution into a runtime error: this checks they agree on every single-file solution
we keep, and that a changed call is told apart."""
from __future__ import annotations

import sys
from pathlib import Path
from unittest import mock

import pytest

torch = pytest.importorskip("torch")
import torch.utils.cpp_extension as cpp_extension  # noqa: E402

from cuda_agent.compiler.inline import extract_inline_specs  # noqa: E402
from cuda_agent.evaluator.judge.prepare import inline_call_key  # noqa: E402
from cuda_agent.evaluator.runner.inline import _binder, spec_key  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


def _single_file_solutions() -> list[Path]:
    found = []
    for folder in (ROOT / "tests/evaluator/cases/honest", ROOT / "benchmarks/single_file_solutions"):
        for path in sorted(folder.rglob("*.py")):
            text = path.read_text()
            if "load_inline" in text and path.name != "model.py":
                found.append(path)
    return found


def _keys_at_import(path: Path) -> list[str]:
    """Run the solution's top level with ``load_inline`` replaced by a recorder that keys each call exactly as the
    candidate process's loader does."""
    bind = _binder(cpp_extension.load_inline)
    keys: list[str] = []

    def record(*args, **kwargs):
        keys.append(spec_key(bind(args, kwargs)))
        return mock.MagicMock(name="extension")

    namespace = {"__name__": "solution_under_test", "__file__": str(path)}
    with mock.patch.object(cpp_extension, "load_inline", record):
        sys.modules.pop("solution_under_test", None)
        exec(compile(path.read_text(), str(path), "exec"), namespace)
    return keys


SOLUTIONS = _single_file_solutions()


def test_corpus_has_single_file_solutions():
    assert len(SOLUTIONS) >= 5


@pytest.mark.parametrize("path", SOLUTIONS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_static_keys_match_the_call_made_at_import(path: Path):
    static = {inline_call_key(spec) for spec in extract_inline_specs(path.read_text())}
    live = set(_keys_at_import(path))
    assert live, "the solution made no load_inline call at import"
    assert static == live


def test_a_changed_call_gets_another_key():
    bind = _binder(cpp_extension.load_inline)
    base = bind(("ext", "int f();"), {"cuda_sources": "__global__ void k(){}", "functions": ["f"]})
    key = spec_key(base)
    assert spec_key(dict(base, extra_cuda_cflags=["-O3"])) != key
    assert spec_key(dict(base, functions={"f": "doc"})) != key
    # torch's own normalisation: a string is a one-item list, a list of names is name -> name
    assert spec_key(dict(base, cpp_sources=["int f();"], functions={"f": "f"})) == key
    assert spec_key(dict(base, is_python_module=True, extra_cflags=None)) == key
