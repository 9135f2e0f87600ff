"""The adversarial corpus on the GPU (tests/evaluator/cases/adversarial/gpu): every cheat is rejected (reward -1,
with the rule or stage its header names) and leaks or changes none of the secrets planted for it; known holes are
xfail with the hole's description. Needs a CUDA GPU (the lead runs these on the H200);
`test_adversarial_gpu_workspaces_compile` checks with real nvcc on any machine that every workspace case builds, so
the GPU run fails only on behaviour."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from cuda_agent.evaluator import WarmWorker, evaluate

from adversarial_corpus import (AdversarialCase, Secrets, adversarial_cases, adversary_worker,  # noqa: F401
                                assert_blocked, case_param, eval_config, secrets)

CASES = adversarial_cases("gpu")


@pytest.mark.gpu
@pytest.mark.parametrize("case", [case_param(c) for c in CASES])
def test_adversarial_gpu_case_is_rejected(case: AdversarialCase, adversary_worker: WarmWorker,  # noqa: F811
                                          secrets: Secrets, tmp_path: Path) -> None:  # noqa: F811
    result = evaluate(case.load_task(), case.materialise(tmp_path), eval_config(case), worker=adversary_worker,
                      env=secrets.env_with_cache)
    assert_blocked(case, result, secrets)
    assert adversary_worker.alive


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("nvcc") is None and not Path("/usr/local/cuda/bin/nvcc").exists(),
                    reason="needs nvcc")
def test_adversarial_gpu_workspaces_compile(tmp_path: Path) -> None:
    """Every GPU workspace case builds for sm_90 (in the sandbox, as the evaluator builds it)."""
    from cuda_agent.compiler import build_workspace
    from cuda_agent.sandbox import sandboxed_runner

    failures = []
    for case in [c for c in CASES if not c.single_file]:
        try:
            case.load_task()
        except BaseException:  # noqa: BLE001 - KernelBench data absent: skip that case here
            continue
        root = case.materialise(tmp_path)
        staging = tmp_path / f"{case.name}-staging"
        runner = sandboxed_runner(root, extra_rw=[staging], readonly_workspace=True)
        result = build_workspace(root, arch="90", cache_dir=tmp_path / "cache", runner=runner, staging=staging)
        if not result.ok:
            failures.append(f"{case.name}: {result.diagnostics[:800]}")
    assert not failures, "\n".join(failures)
