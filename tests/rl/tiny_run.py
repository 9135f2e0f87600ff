"""The tiny run's verl stages: a task, a tiny model, two trajectories and the four verl stages' configs, built on
this machine with no download. What `cuda_agent.rl.launch_check` checks in tests/rl/test_rl_verl_launch.py and
benchmarks/verl_launch.py (which puts this folder on its import path)."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from rl_samples import RELU
from tiny_model import build_model, build_tokenizer, save_pair

from cuda_agent.agent import ScriptedPolicy, run_episode
from cuda_agent.rl.config import load_stage_config
from cuda_agent.rl.envfactory import make_env
from cuda_agent.tasks.task import Task

MODEL_NEW = ("import torch\nimport torch.nn as nn\n\nclass ModelNew(nn.Module):\n    def forward(self, x):\n"
             "        return torch.relu(x)\n")
STAGES: tuple[str, ...] = ("warmup", "rft", "critic", "ppo")


def prepare(work: Path, configs: Path) -> dict[str, Any]:
    """The four verl stages' configs for a tiny run under ``work``: a task folder, a tiny Qwen2 with a locally
    trained tokenizer (no downloads), two trajectories from real episodes (scripted turns, the stand-in evaluator) for
    RFT, and ``configs/rl/<stage>.yaml`` with overrides for one GPU, short contexts and one step. Returns
    ``{stage: StageConfig}``."""
    work = work.resolve()
    tasks = work / "tasks"
    tasks.mkdir(parents=True, exist_ok=True)
    (tasks / "relu.py").write_text(RELU)
    base = work / "base"
    if not (base / "config.json").exists():
        tokenizer = build_tokenizer([RELU, MODEL_NEW] * 4, vocab_size=512)
        save_pair(build_model(tokenizer), tokenizer, base)
    trajectories = work / "collect" / "trajectories"
    trajectories.mkdir(parents=True, exist_ok=True)
    task = Task(id="user/relu", code=RELU, name="relu")
    for i in range(2):
        path = trajectories / f"relu-{i}.jsonl"
        if path.exists():
            continue
        env = make_env({"env": {"sandbox": "local", "workspace_root": str(work / "ws" / str(i))},
                        "backend": {"kind": "stand_in"}})
        policy = ScriptedPolicy.from_steps([{"name": "read", "arguments": {"path": "model.py"}},
                                            {"name": "write", "arguments": {"path": "model_new.py",
                                                                            "content": MODEL_NEW}},
                                            {"name": "submit", "arguments": {}}])
        run_episode(task, policy, env, trajectory=path)
    small = ["cluster.gpus_per_node=1", "sequence_parallel=1", "global_batch=2", "total_steps=1"]
    ppo_like = small + [f"tasks={tasks}", "mini_batch=2", "max_prompt_tokens=1024", "max_response_tokens=1024",
                        "rollout.agent_workers=1", "rollout.tensor_parallel=1", "eval.backend={kind: stand_in}"]
    overrides = {
        "warmup": ppo_like + [f"actor_path={base}"],
        "rft": small + [f"actor_path={base}", f"trajectories={trajectories}", "max_length=2048"],
        "critic": ppo_like + [f"actor_path={base}", f"critic_path={base}"],
        "ppo": ppo_like + [f"actor_path={base}", f"critic_path={base}"],
    }
    return {stage: load_stage_config(configs / f"{stage}.yaml", overrides[stage] + [f"output_dir={work / stage}"])
            for stage in STAGES}
