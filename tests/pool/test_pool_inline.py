"""BuildPool runs single-file (load_inline) builds on its workers, with the pool's architecture and cache."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from cuda_agent.compiler.inline import InlineExtractionError, InlineSpec
from cuda_agent.errors import PoolError
from cuda_agent.pool import BuildPool

SOLUTION = Path(__file__).resolve().parents[1] / "compiler" / "inline_cases" / "cpu_branch_split.py"


def test_pool_builds_every_call_of_a_solution(tmp_path):
    seen: list[tuple[str, dict[str, Any]]] = []

    def fake(spec: InlineSpec, **options: Any) -> str:
        seen.append((spec.name, options))
        return spec.name

    pool = BuildPool(2, cache_dir=tmp_path, arch="90", jobs=3, inline_builder=fake,
                     inline_options={"strategies": ("full",)})
    futures = pool.submit_solution(SOLUTION.read_text())
    assert [f.result(timeout=60) for f in futures] == ["cak_case_cpu_branch"]
    assert seen[0][1] == {"arch": "90", "jobs": 3, "strategies": ("full",), "cache_dir": tmp_path / "inline"}
    with pytest.raises(InlineExtractionError):
        pool.submit_solution("from torch.utils.cpp_extension import load_inline\nload_inline('e', read())")
    pool.close()
    with pytest.raises(PoolError):
        pool.submit_inline(InlineSpec(name="e", cpp_sources=("",)))
