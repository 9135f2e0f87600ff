"""The honest corpus is well formed (no GPU, no import of the solutions): a valid CASE header per folder, a task id
that resolves (skipped without the KernelBench data), and a workspace (model_new.py + kernels/*.cu) or a single file
(solution.py with a load_inline call) that defines class ModelNew. tests/evaluator/test_honest_corpus_gpu.py runs
them through the evaluator."""
from __future__ import annotations

import ast
from collections import Counter

import pytest

from cuda_agent.evaluator.judge.jit import triton_kernel_names

from honest_corpus import HONEST, honest_cases, parse_header

CASES = honest_cases()


def _defines_model_new(tree: ast.Module) -> bool:
    return any(isinstance(node, ast.ClassDef) and node.name == "ModelNew" for node in tree.body)


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_case_is_well_formed(case) -> None:
    text = (case.folder / "CASE").read_text()
    lines = text.splitlines()
    assert parse_header(text) is not None, f"{case.name}: bad CASE header: {lines[:1]}"
    assert 2 <= len(lines) <= 4 and all(line.startswith("# ") for line in lines[1:]), \
        f"{case.name}: CASE needs 1-3 comment lines after the header"
    single = (case.folder / "solution.py").is_file()
    workspace = (case.folder / "model_new.py").is_file()
    assert single != workspace, f"{case.name}: either solution.py or model_new.py + kernels/, not both or neither"
    if single:
        source = (case.folder / "solution.py").read_text()
        tree = ast.parse(source)
        assert _defines_model_new(tree), f"{case.name}: solution.py defines no ModelNew"
        if "triton" in case.styles:
            assert triton_kernel_names(source), f"{case.name}: a Triton case defines a @triton.jit kernel"
            assert "load_inline" not in source, f"{case.name}: a Triton case compiles nothing else"
            return
        calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call)
                 and getattr(n.func, "id", getattr(n.func, "attr", "")) == "load_inline"]
        assert len(calls) == 1, f"{case.name}: a single file builds its extension with one load_inline call"
        keywords = {k.arg for k in calls[0].keywords}
        assert {"name", "cpp_sources", "cuda_sources", "functions"} <= keywords, f"{case.name}: load_inline arguments"
    else:
        tree = ast.parse((case.folder / "model_new.py").read_text())
        assert _defines_model_new(tree), f"{case.name}: model_new.py defines no ModelNew"
        sources = list((case.folder / "kernels").glob("*.cu"))
        assert sources, f"{case.name}: kernels/ holds no .cu file"
        text = "\n".join(p.read_text() for p in (case.folder / "kernels").iterdir() if p.is_file())
        assert "CA_EXPORT(" in text and '#include "cuda_agent.h"' in text, f"{case.name}: not in the workspace ABI"


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_case_task_resolves(case) -> None:
    task = case.load_task()  # skips without the KernelBench data
    assert task.code and "class Model" in task.code


def test_corpus_coverage() -> None:
    """Issue 16: at least 30 honest kernels, every level, both formats, and the required styles."""
    assert len(CASES) >= 30, len(CASES)
    levels = Counter(c.task.split("/")[0] for c in CASES)
    assert all(levels[level] >= 5 for level in ("L1", "L2", "L3")), levels
    singles = sum(c.single_file for c in CASES)
    assert 8 <= singles <= len(CASES) - 8, singles
    styles = {s for c in CASES for s in c.styles}
    required = {
        "cublas_fused_epilogue", "template_fixed_size", "float4_tail", "warp_shuffle", "float_atomics",
        "parameter_folding", "parameter_folding_in_place", "algebraic_shortcut", "fork_join_streams",
        "fork_join_streams_python", "cuda_graph", "launch_bounds_after_void", "launch_bounds_before_void",
        "named_like_torch_op", "extern_c_kernel", "macro_declared_kernel", "multiline_declaration",
        "templated_kernel", "degenerate_output", "cudnn_from_cpp", "single_file", "triton",
    }
    assert required <= styles, sorted(required - styles)
    assert len({(c.task, "triton" in c.styles) for c in CASES}) == len(CASES), "one case per task (and language)"
    assert sum("triton" in c.styles for c in CASES) >= 3, "issue 24: at least three Triton kernels"
    assert HONEST.is_dir()
