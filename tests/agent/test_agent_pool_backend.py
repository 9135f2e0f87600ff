"""`PoolBackend`: an episode whose builds go to the pool's build pool and whose evaluations go to its GPU queue,
with the pool's documented stand-in evaluator doing the GPU work on a CPU machine."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from cuda_agent.agent import AgentEnv, EnvConfig, PoolBackend, ScriptedPolicy, StepInfo, run_episode
from cuda_agent.agent.examples import example_dir

pytestmark = pytest.mark.slow


@pytest.fixture
def pool(build_cache: Path):
    from cuda_agent.pool import BuildPool, LocalPool, StandInEvaluator

    pool = LocalPool(gpus=["0"], evaluator=StandInEvaluator(seconds=0.05),
                     builds=BuildPool(max_workers=1, cache_dir=build_cache))
    yield pool
    pool.close()


def _steps(extra_files: dict[str, str]) -> list[dict]:
    files = {"kernels/scaled_silu.cu": (example_dir() / "scaled_silu_slow.cu").read_text(),
             "model_new.py": (example_dir() / "scaled_silu_model_new.py.txt").read_text(), **extra_files}
    writes = [{"name": "write", "arguments": {"path": p, "content": c}} for p, c in files.items()]
    return [*writes, {"name": "verify"}, {"name": "bash", "arguments": {"command": "cuda-agent profile"}},
            {"name": "submit"}]


def test_episode_through_the_pool(pool, task, sandbox_mode: str, tmp_path: Path) -> None:
    env = AgentEnv(EnvConfig(sandbox=sandbox_mode, verify="gpu"), PoolBackend(pool, timeout_s=120))
    seen: list[StepInfo] = []
    result = run_episode(task, ScriptedPolicy.from_steps(_steps({})), env, progress=seen.append)
    assert [e.stage for e in result.evaluations] == ["correct", "timed", "timed"]
    assert all(i.ok for i in seen) and seen[2].build is not None and seen[2].build.ok
    assert "stand-in evaluation" in result.evaluations[0].reason
    # the stand-in's feature score: a __global__ kernel registered with CA_EXPORT gets made-up speedups worth 2
    assert result.best is not None and result.best.result.stage == "timed"
    assert result.reward == 2.0 and result.reward_available


def test_a_broken_gpu_result_reaches_the_agent(pool, task, sandbox_mode: str) -> None:
    env = AgentEnv(EnvConfig(sandbox=sandbox_mode, verify="gpu"), PoolBackend(pool, timeout_s=120))
    fault = {"kernels/standin.json": json.dumps({"fault": "broken", "seconds": 0.01})}
    seen: list[StepInfo] = []
    result = run_episode(task, ScriptedPolicy.from_steps(_steps(fault)), env, progress=seen.append)
    assert [e.stage for e in result.evaluations] == ["runtime_error"] * 3
    verify = next(i for i in seen if i.tool == "verify")
    assert "illegal memory access" in verify.evaluations[0].reason
    assert result.reward == -1.0
