"""Triton kernels run in the candidate's process (`-m gpu`, on the H200): the honest Triton cases of the corpus are
accepted in relaxed and in strict mode, their kernels launched by forward and attributed to the solution (not counted
as PyTorch compute), and Triton's runtime helper was staged by the judge. The CPU half of the route (the broker, the
confined candidate) is tests/evaluator/test_jit_broker_cpu.py; the Triton cheats are in the adversarial corpus
(gpu/strict_triton_decoy, gpu/strict_triton_compile_named_decoy)."""
from __future__ import annotations

from pathlib import Path

import pytest

from cuda_agent.evaluator import EvalConfig, evaluate
from cuda_agent.evaluator.judge.jit import triton_kernel_names

from honest_corpus import HonestCase, honest_cases

TRITON = [c for c in honest_cases() if "triton" in c.styles]


@pytest.mark.gpu
@pytest.mark.slow
@pytest.mark.parametrize("mode", ["relaxed", "strict"])
@pytest.mark.parametrize("case", TRITON, ids=[c.name for c in TRITON])
def test_triton_case_accepted(case: HonestCase, mode: str, warm_worker, tmp_path: Path) -> None:
    task = case.load_task()  # skips without the KernelBench data
    config = EvalConfig(mode=mode, reps=20, warmup=3, timeout_s=900, kernel_breakdown=True)
    result = evaluate(task, case.materialise(tmp_path), config, worker=warm_worker)
    detail = f"{case.name} ({mode}): {result.stage}: {result.reason}\n{result.notes}\n{result.log[-3000:]}"
    assert result.correct and not result.rules_fired and result.reward >= 1, detail
    assert any("compile broker" in note for note in result.notes), detail
    assert not any("compiled kernels" in note and "launched" in note for note in result.notes), detail
    names = {row["name"] for row in result.kernel_breakdown}
    own = set(triton_kernel_names((case.folder / "solution.py").read_text()))
    assert own & names, (own, names, detail)
