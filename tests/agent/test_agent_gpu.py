"""On a GPU: the bundled scripted episode keeps the faster kernel and earns a reward of at least 1."""
from __future__ import annotations

from pathlib import Path

import pytest

from cuda_agent.agent import AgentEnv, EnvConfig, LocalBackend, ScriptedPolicy, run_episode
from cuda_agent.agent.examples import example_dir, example_script_path

pytestmark = [pytest.mark.gpu, pytest.mark.slow]


def test_scripted_episode_keeps_the_faster_kernel(task, build_cache: Path, sandbox_mode: str, tmp_path: Path) -> None:
    backend = LocalBackend(verify="gpu", cache_dir=build_cache)
    env = AgentEnv(EnvConfig(sandbox=sandbox_mode, verify="gpu"), backend)
    try:
        result = run_episode(task, ScriptedPolicy.from_file(example_script_path()), env, trajectory=tmp_path / "t.jsonl")
    finally:
        backend.close()
    stages = [e.stage for e in result.evaluations]
    assert stages == ["correct", "timed", "timed", "timed"], stages
    slow, fast = result.evaluations[1].speedup_compile, result.evaluations[2].speedup_compile
    assert fast > slow
    assert result.best is not None and result.best.turn in (9, 10)  # the submit re-profiles the same files
    assert result.best.files["kernels/scaled_silu.cu"] == (example_dir() / "scaled_silu_fast.cu").read_text()
    assert result.reward >= 1 and result.reward_available
