"""The RL backend that verl's rollout workers use to reach the evaluation nodes: a real `cuda-agent serve` (stand-in
evaluator, 127.0.0.1), one shared `PoolClient` per process, a token-level episode and the warm-up reward through it."""
from __future__ import annotations

import asyncio

import pytest

from rl_samples import KERNEL, MODEL_NEW, call_text
from cuda_agent.errors import ConfigError
from fault_probes import ServeProcess
from cuda_agent.rl.envfactory import make_backend, make_env, shared_pool
from cuda_agent.rl.reward import compute_score
from cuda_agent.rl.rollout import RolloutLimits, run_token_episode
from cuda_agent.rl.scripted import ScriptedGenerationServer

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def served():
    server = ServeProcess.start(store="none")
    try:
        yield server
    finally:
        code, left = server.stop()
    assert code == 0 and not left


def test_episode_and_warmup_reward_evaluate_on_the_served_pool(served, task, tokenizer, tmp_path):
    backend = {"kind": "http", "url": served.url, "token": served.token, "timeout_s": 120}
    first, second = make_backend(backend), make_backend(dict(backend))
    assert first.pool is second.pool  # one client per process, shared by every episode
    spec = {k: v for k, v in backend.items() if k != "kind"}
    assert shared_pool("http", spec) is first.pool  # and by the warm-up reward
    before = first.pool.stats().completed

    settings = {"env": {"sandbox": "local", "workspace_root": str(tmp_path / "ws")}, "backend": backend}
    turns = [call_text("write", path="kernels/k.cu", content=KERNEL),
             call_text("write", path="model_new.py", content=MODEL_NEW), call_text("submit")]
    server = ScriptedGenerationServer([turns], tokenizer)
    env = make_env(settings)
    try:
        episode = asyncio.run(run_token_episode(env, task, server.as_generate_fn("r0"), tokenizer,
                                                limits=RolloutLimits(max_turns=5, response_length=100_000)))
    finally:
        env.close()
    assert episode.end_reason == "submitted"
    assert "build OK" in episode.observations[-1]  # compiled by the server's build pool
    assert ("profile: stage=timed correct=yes\nspeedup vs eager PyTorch: 1.200x\nspeedup vs torch.compile: 1.000x\n"
            "reward: 2\nstand-in evaluation") in episode.observations[-1]  # a CA_EXPORT kernel: the feature score 2
    after_episode = first.pool.stats().completed
    assert after_episode > before

    reply = f"```python\n{MODEL_NEW}```"
    extra = {"task_json": __import__("json").dumps(task.to_dict())}
    assert compute_score("cuda_agent", reply, extra_info=extra, backend=backend) == 1.0
    assert first.pool.stats().completed == after_episode + 1


def test_http_backend_needs_a_url():
    with pytest.raises(ConfigError, match="backend kind http needs url"):
        make_backend({"kind": "http"})
