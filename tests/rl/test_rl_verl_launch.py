"""verl's real entry points on this CPU with a tiny model: each of the four verl stages' generated config passes
verl's own validation, and its launch (`main_ppo` on a local Ray; the SFT trainer under torchrun) gets as far as its
first step that needs a GPU and stops there, for that reason. Runs in verl's environment only (.venv-rl; CI builds
it and runs this file there), about 8 minutes on 2 cores."""
from __future__ import annotations

from pathlib import Path

import pytest

from cuda_agent.locations import rl_configs_dir
from cuda_agent.rl import verl_env

PROBLEMS = verl_env.problems()
pytestmark = [pytest.mark.verl_env, pytest.mark.slow,
              pytest.mark.skipif(bool(PROBLEMS), reason=f"not verl's environment ({'; '.join(PROBLEMS)[:200]})")]

EXPECTED = {
    "warmup": ("main_ppo", "gpu_resource_pool", "Total available GPUs 0 is less than total desired GPUs 1"),
    "rft": ("sft_trainer", "nccl_process_group", "ProcessGroupNCCL is only supported with GPUs"),
    "critic": ("main_ppo", "gpu_resource_pool", "Total available GPUs 0 is less than total desired GPUs 1"),
    "ppo": ("main_ppo", "gpu_resource_pool", "Total available GPUs 0 is less than total desired GPUs 1"),
}


@pytest.fixture(scope="module")
def prepared(tmp_path_factory):
    from tiny_run import prepare

    from cuda_agent.rl.stages import run_stage

    work = tmp_path_factory.mktemp("verl-launch")
    configs = prepare(work, rl_configs_dir())
    return {stage: run_stage(cfg, dry_run=True) for stage, cfg in configs.items()}


@pytest.mark.parametrize("stage", list(EXPECTED))
def test_generated_config_passes_verls_validation(prepared, stage):
    from cuda_agent.rl.launch_check import validate_stage

    details = validate_stage(stage, Path(prepared[stage].files["verl_config"]))
    if stage == "rft":
        assert details["dataset"] == "ExactToolsSFTDataset" and details["samples"] == 2
        assert isinstance(details["tools"], list) and {"read", "write", "submit"} <= {
            t["function"]["name"] for t in details["tools"]}
    else:
        assert details["use_v1"] is True and details["critic"] is True
        if stage != "warmup":
            assert details["agent_loops"] == ["CudaAgentLoop"]


@pytest.mark.parametrize("stage", list(EXPECTED))
def test_launch_reaches_the_first_gpu_step(prepared, stage, tmp_path):
    from cuda_agent.rl.launch_check import launch

    entry, step, reason = EXPECTED[stage]
    run = launch(prepared[stage].command, tmp_path / f"{stage}.log", timeout_s=540)
    assert run.entry == entry
    assert run.launched_to == step, f"stopped at {run.launched_to}: {run.reason} (log {run.log})"
    assert reason in run.reason and run.returncode not in (0, None)
    assert run.at_first_gpu_step
