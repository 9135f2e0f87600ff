"""The precision probe with every kept call judged at once (``EvalConfig.probe_stash_share=0``), the way the judge
keeps the calls of large tasks (13 GB a call on the 6 GiB level-1 tasks), whose copies no longer fit beside the run:
kernels that lower their precision after 30 to 400 calls are still refused by the precision contract, and honest
kernels are still accepted, with the probe's margins reported. Needs a CUDA GPU (the lead runs these on the H200)."""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from cuda_agent.evaluator import EvalConfig, WarmWorker, evaluate

from adversarial_corpus import (AdversarialCase, Secrets, adversarial_cases, adversary_worker,  # noqa: F401
                                assert_blocked, eval_config, secrets)
from evalcases import gpu_cases
from test_eval_gpu_cases import materialise

SWITCHERS = ("switch30_fp16_nearest", "switch100_tf32_nearest_pycount", "switch400_fp16_nearest_pycount",
             "lowp_tf32_nearest_gemm")
CHEATS = [c for c in adversarial_cases("gpu") if c.name in SWITCHERS]
HONEST = [c for c in gpu_cases() if c.name in ("honest_tiled_matmul", "honest_l2_gemm_mul_leaky")]


@pytest.mark.gpu
@pytest.mark.parametrize("case", CHEATS, ids=[c.name for c in CHEATS])
def test_lowered_precision_refused_with_every_kept_call_judged_at_once(
        case: AdversarialCase, adversary_worker: WarmWorker, secrets: Secrets, tmp_path: Path) -> None:  # noqa: F811
    config = replace(eval_config(case), probe_stash_share=0.0)
    result = evaluate(case.load_task(), case.materialise(tmp_path), config, worker=adversary_worker,
                      env=secrets.env_with_cache)
    assert_blocked(case, result, secrets)


@pytest.mark.gpu
@pytest.mark.parametrize("case", HONEST, ids=[c.name for c in HONEST])
def test_honest_accepted_with_every_kept_call_judged_at_once(case, warm_worker, tmp_path: Path) -> None:
    root = materialise(case, tmp_path)
    config = EvalConfig(mode=case.mode, reps=20, warmup=3, timeout_s=600, probe_stash_share=0.0)
    result = evaluate(case.load_task(), root, config, worker=warm_worker)
    assert result.correct and result.reward >= 1, (result.stage, result.reason, result.rule_names, result.notes)
    assert "precision_probe" in result.checks_run
    assert result.extra["precision"]["probe_outputs"] >= 3, result.extra.get("precision")
