"""The tiny end-to-end run of the RL recipe: all five stages, a few optimisation steps each, on a CPU.

A byte-level BPE tokenizer is trained here on our own texts (prompts, tasks, scripted solutions) and a tiny Qwen2
is randomly initialised: no downloads. Each stage runs through `cuda-agent train`'s code path with the committed
configs/rl/<stage>.yaml and command-line overrides (engine=trl: TRL and the transformers Trainer). With no GPU the
rewards come from the stand-in evaluator (cuda_agent.rl.standin over cuda_agent.pool.StandInEvaluator: nothing is
compiled or run; the paper's -1/1/2/3 from visible features of the solution, a response without one -1), so the run
exercises the machinery, not learning. The collect stage adds scripted episodes (a good one, a looping one, a
malformed one) replayed through the same token loop, so that the RFT filter has something to keep
and something to drop.

Writes benchmarks/logs/rl_tiny/ (per-stage logs, filter verdicts, configs, PNG plots) and
benchmarks/results/rl_tiny.json. Budget: under 10 minutes on 2 CPU cores.

    PYTHONPATH=src python3 benchmarks/rl_tiny.py [--work /tmp/cuda-agent-rl-tiny]
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import os
import shutil
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from cuda_agent.rl.config import PpoConfig, WarmupConfig

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "rl"))  # the tiny model and tokenizer builder (tiny_model.py) lives with the tests
LOGS = REPO / "benchmarks" / "logs" / "rl_tiny"

TASKS = {
    "relu": "import torch\nimport torch.nn as nn\n\nclass Model(nn.Module):\n    def __init__(self):\n        super().__init__()\n\n"
            "    def forward(self, x):\n        return torch.relu(x)\n\ndef get_inputs():\n    return [torch.randn(64, 64)]\n\n"
            "def get_init_inputs():\n    return []\n",
    "scale_add": "import torch\nimport torch.nn as nn\n\nclass Model(nn.Module):\n    def __init__(self, alpha: float = 2.0):\n"
                 "        super().__init__()\n        self.alpha = alpha\n\n    def forward(self, x, y):\n"
                 "        return self.alpha * x + y\n\ndef get_inputs():\n    return [torch.randn(128), torch.randn(128)]\n\n"
                 "def get_init_inputs():\n    return [2.0]\n",
}

KERNEL = """#include "cuda_agent.h"
__global__ void relu_kernel(const float* x, float* y, int64_t n) {
  __shared__ float tile[256];
  int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (i < n) { tile[threadIdx.x] = x[i]; y[i] = tile[threadIdx.x] > 0.f ? tile[threadIdx.x] : 0.f; }
}
void relu(ca::Tensor x, ca::Tensor out) {
  int64_t n = x.numel();
  relu_kernel<<<(n + 255) / 256, 256, 0, ca::stream()>>>(x.data_ptr<float>(), out.data_ptr<float>(), n);
}
CA_EXPORT(relu);
"""
MODEL_NEW = """import torch, torch.nn as nn
from binding import ops
class ModelNew(nn.Module):
    def forward(self, x):
        out = torch.empty_like(x)
        ops.relu(x, out)
        return out
"""
SINGLE_FILE = "```python\n" + MODEL_NEW + "# __global__ kernel with __shared__ tile, CA_EXPORT(relu)\n```"


def call(name: str, **arguments: object) -> str:
    return "<tool_call>\n" + json.dumps({"name": name, "arguments": arguments}) + "\n</tool_call><|im_end|>"


def scripts() -> list[dict[str, object]]:
    good = [call("read", path="model.py"), call("write", path="kernels/relu.cu", content=KERNEL),
            call("write", path="model_new.py", content=MODEL_NEW), call("profile"), call("submit")]
    loop = [call("read", path="model.py")] * 3 + good[1:]
    malformed = ["<tool_call>\n{\"name\": \"write\", \"arguments\": {\"path\": \"model_new.py\"\n</tool_call><|im_end|>"] + good[1:]
    return [{"name": "good", "task_id": "user/relu", "turns": good},
            {"name": "loop", "task_id": "user/relu", "turns": loop},
            {"name": "malformed", "task_id": "user/relu", "turns": malformed}]


def corpus(tasks_dir: Path) -> list[str]:
    from cuda_agent.agent import AgentEnv
    from cuda_agent.rl.data import SINGLE_TURN_SYSTEM

    env = AgentEnv()
    texts = [env.system_prompt, SINGLE_TURN_SYSTEM, KERNEL, MODEL_NEW, SINGLE_FILE, json.dumps(env.tool_schemas())]
    texts += [p.read_text() for p in tasks_dir.glob("*.py")]
    texts += [t for s in scripts() for t in s["turns"]]  # type: ignore[union-attr]
    return texts


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", type=Path, default=Path(os.environ.get("CUDA_AGENT_RL_TINY_DIR", "/tmp/cuda-agent-rl-tiny")))
    parser.add_argument("--steps", type=int, default=3, help="optimisation steps per training stage")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    import torch

    torch.set_num_threads(2)
    from benchmarks_io import machine_description, write_result
    from cuda_agent.rl.config import load_stage_config
    from cuda_agent.rl.stages import run_stage
    from tiny_model import build_model, build_tokenizer, save_pair

    started = time.monotonic()
    work = args.work
    shutil.rmtree(work, ignore_errors=True)
    tasks_dir = work / "tasks"
    tasks_dir.mkdir(parents=True)
    for name, code in TASKS.items():
        (tasks_dir / f"{name}.py").write_text(code)
    (work / "scripts.json").write_text(json.dumps(scripts()))
    tokenizer = build_tokenizer(corpus(tasks_dir), vocab_size=2048)
    base = save_pair(build_model(tokenizer), tokenizer, work / "base")
    n_params = sum(p.numel() for p in build_model(tokenizer).parameters())
    print(f"tokenizer: {len(tokenizer)} tokens; model: {n_params} parameters")

    steps = args.steps
    common = ["engine=trl", "use_cpu=true", "seed=0"]
    tasks = [f"tasks={tasks_dir}"]
    stand_in = ["eval.backend={kind: stand_in}"]
    plan = {
        "warmup": common + tasks + stand_in + [f"actor_path={base}", f"output_dir={work}/warmup", f"total_steps={steps}",
                                       "global_batch=4", "rollout.n=2", "max_response_tokens=32", "actor_lr=1e-4",
                                       "critic_lr=1e-4", "mini_batch=2", "small.warmup_algorithm=ppo",
                                       "small.ppo_epochs=2"],
        "collect": common + tasks + stand_in + ["episodes_per_task=1"] + [f"actor_path={work}/warmup/actor", f"output_dir={work}/collect",
                                        "max_turns=2", "max_tokens_per_turn=24", "max_response_tokens=256",
                                        "max_prompt_tokens=256", f"scripted_episodes={work}/scripts.json",
                                        "env={sandbox: local, max_turns: 150}"],
        "rft": common + [f"actor_path={work}/warmup/actor", f"trajectories={work}/collect/trajectories",
                         f"output_dir={work}/rft", f"total_steps={steps}", "global_batch=1", "max_length=1024",
                         "actor_lr=1e-4"],
        "critic": common + tasks + [f"actor_path={work}/rft/actor", f"trajectories={work}/collect/trajectories",
                            f"output_dir={work}/critic", f"total_steps={steps}", "global_batch=1", "only_kept=false", "max_length=1024",
                            "critic_lr=1e-4"],
        "ppo": common + tasks + stand_in + [f"actor_path={work}/rft/actor", f"output_dir={work}/ppo", f"total_steps={steps}",
                                    "global_batch=2", "rollout.n=2", "max_turns=2", "max_tokens_per_turn=24",
                                    "max_response_tokens=160", "max_prompt_tokens=192", "actor_lr=1e-4",
                                    f"critic_path={work}/critic/critic", "critic_lr=1e-4", "mini_batch=1",
                                    "small.ppo_algorithm=ppo", "small.ppo_epochs=2",
                                    "env={sandbox: local, max_turns: 150}"],
    }
    shutil.rmtree(LOGS, ignore_errors=True)
    LOGS.mkdir(parents=True)
    metrics: dict[str, float] = {}
    details: dict[str, object] = {"machine_per_stage": {}, "engine_per_stage": {}, "seconds_per_stage": {},
                                  "reward_source": "the stand-in evaluator (cuda_agent.rl.standin over cuda_agent.pool.StandInEvaluator): no GPU, nothing compiled or run, a feature score on the paper's -1/1/2/3 scale",
                                  "model_parameters": n_params, "tokenizer_vocab": len(tokenizer)}
    stages_run = 0
    for stage, overrides in plan.items():
        t0 = time.monotonic()
        cfg = load_stage_config(REPO / "configs" / "rl" / f"{stage}.yaml", overrides, stage=stage)
        (LOGS / f"{stage}_config.json").write_text(json.dumps(dataclasses.asdict(cfg), indent=2, default=str))
        try:
            result = run_stage(cfg)
        except Exception as exc:  # the run reports what failed and goes on with what it can
            logging.exception("stage %s failed", stage)
            details[f"{stage}_error"] = f"{type(exc).__name__}: {exc}"
            continue
        stages_run += 1
        metrics.update(result.metrics)
        details["machine_per_stage"][stage] = machine_description()  # type: ignore[index]
        details["engine_per_stage"][stage] = _warmup_engine(cfg) if stage == "warmup" else (  # type: ignore[index]
            _ppo_engine(cfg) if stage == "ppo" else "TRL SFTTrainer" if stage == "rft" else "transformers Trainer (critic loss)" if stage == "critic" else
            "token-level agent loop + transformers generate")
        details["seconds_per_stage"][stage] = round(time.monotonic() - t0, 1)  # type: ignore[index]
        for name in ("log", "filter"):
            src = result.files.get(name)
            if src and Path(src).exists():
                shutil.copy(src, LOGS / Path(src).name)
        for extra in ("filter.json",):
            if (result.out_dir / extra).exists():
                shutil.copy(result.out_dir / extra, LOGS / f"{stage}_{extra}")
        if stage in ("collect", "ppo"):
            traj = result.out_dir / "trajectories"
            summary = [{"file": p.name, "end": json.loads(p.read_text().splitlines()[-1])} for p in sorted(traj.glob("*.jsonl"))]
            (LOGS / f"{stage}_episodes.json").write_text(json.dumps(summary, indent=2))
        print(f"{stage}: done in {time.monotonic() - t0:.1f} s: {result.metrics}")
    metrics["stages_run"] = stages_run
    metrics["seconds_total"] = round(time.monotonic() - started, 1)
    plot(LOGS)
    path = write_result("rl_tiny", metrics, extra=details)
    print(f"stages run end to end: {stages_run}/5 in {metrics['seconds_total']} s; wrote {path}")
    return 0 if stages_run == 5 else 1


def _warmup_engine(cfg: WarmupConfig) -> str:
    if cfg.small.warmup_algorithm == "ppo":
        return ("algorithm ppo, single turn, critic a value head initialised from the actor (cuda_agent.rl.warmup_ppo "
                "over ppo_small's update: clipped token-level loss 0.2/0.28, GAE gamma 1 lambda 0.95, prompt masked)")
    return "algorithm grpo: TRL GRPOTrainer (no critic)"


def _ppo_engine(cfg: PpoConfig) -> str:
    if cfg.small.ppo_algorithm == "ppo":
        return (f"algorithm ppo with the critic from {cfg.critic_path} (cuda_agent.rl.ppo_small: "
                "clipped token-level loss 0.2/0.28, GAE gamma 1 lambda 0.95, observation tokens masked)")
    return "algorithm grpo: TRL GRPOTrainer + EnvRollout (no critic)"


def plot(folder: Path) -> None:
    """Loss and reward curves of each stage's trainer log (PNG)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    series = {}
    for stage in ("warmup", "rft", "critic", "ppo"):
        path = folder / f"{stage}_log.jsonl"
        if path.exists():
            series[stage] = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    for stage, rows in series.items():
        pts = [(r["step"], r["loss"]) for r in rows if "loss" in r and "step" in r]
        if pts:
            axes[0].plot(*zip(*pts), marker="o", label=stage + (" (policy + value)" if stage in ("warmup", "ppo") else ""))
        for key in ("policy_loss", "value_loss"):
            kpts = [(r["step"], r[key]) for r in rows if key in r and "step" in r]
            if kpts:
                axes[0].plot(*zip(*kpts), marker=".", linestyle="--", label=f"{stage} {key.replace('_', ' ')}")
        rpts = [(r["step"], r["reward"]) for r in rows if "reward" in r and "step" in r]
        if rpts:
            axes[1].plot(*zip(*rpts), marker="o", label=stage)
    axes[0].set(title="training loss per step (tiny run)", xlabel="step", ylabel="loss (symlog)")
    axes[0].set_yscale("symlog", linthresh=0.01)
    axes[1].set(title="mean reward per step (stand-in evaluator)", xlabel="step", ylabel="reward")
    for ax in axes:
        ax.legend()
        ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(folder / "curves.png", dpi=110)
    plt.close(fig)


if __name__ == "__main__":
    sys.exit(main())
