"""Every honest kernel of the corpus (tests/evaluator/cases/honest) is accepted in strict mode on a GPU: correct,
no rule fired, reward >= 1, and timed (the speed-of-light floor is checked during timing). Needs a CUDA GPU and the
KernelBench data; the lead runs it on the H200 (`python3 -m pytest -m gpu tests/evaluator/test_honest_corpus_gpu.py`).
"""
from __future__ import annotations

from pathlib import Path

import pytest

from cuda_agent.evaluator import EvalConfig, evaluate

from honest_corpus import HonestCase, honest_cases

CASES = honest_cases()


@pytest.mark.gpu
@pytest.mark.slow
@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_honest_case_accepted(case: HonestCase, warm_worker, tmp_path: Path) -> None:
    task = case.load_task()  # skips without the KernelBench data
    solution = case.materialise(tmp_path)
    config = EvalConfig(mode="strict", reps=20, warmup=3, timeout_s=900)
    result = evaluate(task, solution, config, worker=warm_worker)
    detail = f"{case.name} ({case.task}, {', '.join(case.styles)}): {result.stage}: {result.reason}\n{result.log[-2000:]}"
    assert result.correct, detail
    assert not result.rules_fired, detail
    assert result.reward >= 1, detail
