"""The one-GPU RL run's parts on a CPU: a tiny random Qwen2 with LoRA adapters (save, resume), the real evaluator
(relaxed and strict mode, on the CPU) as the single-turn reward and as the agent environment's backend, and the
whole `benchmarks/rl_gpu.py` run (warm-up, agentic PPO, held-out before/after, result file, plot, adapters) twice,
the second resuming from the first's adapters."""
from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from cuda_agent.tasks.task import Task

from rl_samples import RELU, call_text

REPO = Path(__file__).resolve().parents[2]
TORCH_RELU = ("import torch\nimport torch.nn as nn\n\nclass ModelNew(nn.Module):\n    def forward(self, x):\n"
              "        return torch.relu(x)\n")
REPLY = "Here is the solution.\n```python\n" + TORCH_RELU + "```\n"
BUILDABLE_KERNEL = (
    '#include "cuda_agent.h"\n__global__ void relu_kernel(const float* x, float* y, int64_t n) {\n'
    "  int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;\n  if (i < n) y[i] = x[i] > 0.f ? x[i] : 0.f;\n}\n"
    "void relu(ca::Tensor x, ca::Tensor out) {\n  int64_t n = x.numel();\n"
    "  relu_kernel<<<(n + 255) / 256, 256, 0, ca::stream()>>>(x.data_ptr<float>(), out.data_ptr<float>(), n);\n}\n"
    "CA_EXPORT(relu);\n")
ADD = ("import torch\nimport torch.nn as nn\n\nclass Model(nn.Module):\n    def forward(self, x, y):\n"
       "        return x + 2 * y\n\ndef get_inputs():\n    return [torch.randn(32), torch.randn(32)]\n\n"
       "def get_init_inputs():\n    return []\n")


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from tiny_model import build_model, build_tokenizer, save_pair

    folder = tmp_path_factory.mktemp("tiny")
    tokenizer = build_tokenizer([RELU, ADD, REPLY, TORCH_RELU, call_text("submit")] * 4, vocab_size=400)
    return save_pair(build_model(tokenizer, hidden=32, layers=1, heads=2), tokenizer, folder / "model")


def test_lora_trainee_trains_only_adapters_and_resumes(tiny_model: Path, tmp_path: Path) -> None:
    import torch

    from cuda_agent.rl.onegpu import load_state, load_trainee_lora, save_adapters
    from cuda_agent.rl.ppo_small import PPOSettings
    from cuda_agent.rl.warmup_ppo import SingleTurnEpisode

    trainee = load_trainee_lora(tiny_model, PPOSettings(), device="cpu", actor_lr=1e-2, critic_lr=1e-2)
    trainable = {n for n, p in trainee.actor.named_parameters() if p.requires_grad}
    assert trainable and all("lora_" in n for n in trainable)
    critic_trainable = {n for n, p in trainee.critic.named_parameters() if p.requires_grad}
    assert any("score" in n for n in critic_trainable) and any("lora_" in n for n in critic_trainable)
    frozen = {n: p.detach().clone() for n, p in trainee.actor.named_parameters() if not p.requires_grad}
    lora_before = {n: p.detach().clone() for n, p in trainee.actor.named_parameters() if p.requires_grad}
    ids = trainee.tokenizer.encode(REPLY)
    episodes = [SingleTurnEpisode([1, 2, 3], ids[:12], [1] * 12, 1.0, ""),
                SingleTurnEpisode([1, 2, 3], ids[12:24], [1] * 12, -1.0, "")]
    trainee.update(episodes)
    trainee.update(episodes)
    after = dict(trainee.actor.named_parameters())
    assert all(torch.equal(frozen[n], after[n]) for n in frozen)
    assert any(not torch.equal(lora_before[n], after[n]) for n in lora_before)

    save_adapters(trainee, tmp_path / "adapters", {"warmup_steps_done": 2})
    assert load_state(tmp_path / "adapters") == {"warmup_steps_done": 2}
    again = load_trainee_lora(tiny_model, PPOSettings(), device="cpu", adapters=tmp_path / "adapters")
    reloaded = dict(again.actor.named_parameters())
    assert all(torch.equal(after[n], reloaded[n]) for n in lora_before)
    assert all(p.requires_grad for n, p in reloaded.items() if n in lora_before)
    with pytest.raises(FileNotFoundError, match="adapter_config.json"):
        load_state(tmp_path)


def test_sampled_responses_stop_at_the_stop_token(tiny_model: Path) -> None:
    from cuda_agent.rl.onegpu import load_trainee_lora, sample_responses, stop_ids
    from cuda_agent.rl.ppo_small import PPOSettings

    trainee = load_trainee_lora(tiny_model, PPOSettings(), device="cpu")
    stops = stop_ids(trainee.tokenizer)
    assert trainee.tokenizer.eos_token_id in stops
    prompts = [trainee.tokenizer.encode("class Model"), trainee.tokenizer.encode("def get_inputs():\n  return")]
    out = sample_responses(trainee.actor, trainee.tokenizer, prompts, 20, 1.0, batch_size=2)
    assert len(out) == 2
    for reply in out:
        assert 0 < len(reply) <= 20
        assert not any(t in stops for t in reply[:-1])


@pytest.mark.slow
def test_judged_scorer_uses_the_real_evaluator(tmp_path: Path) -> None:
    from cuda_agent.rl.onegpu import JudgedScorer

    import torch

    task = Task(id="user/relu", code=RELU, name="relu")
    scorer = JudgedScorer("cuda" if torch.cuda.is_available() else "cpu", timeout_s=240)
    try:
        relaxed = scorer.score(task, REPLY, "relaxed", profile=False)
        strict = scorer.score(task, REPLY, "strict", profile=False)
        wrong = scorer.score(task, REPLY.replace("torch.relu(x)", "x"), "relaxed", profile=False)
        none = scorer.score(task, "I would use a kernel.", "relaxed")
        # the task's own code fails in the judge: the evaluator's eval_error, no verdict on the reply and no reward
        broken = Task(id="user/relu_broken", code=RELU.replace("return torch.relu(x)", "raise RuntimeError('bad task')"),
                      name="relu_broken")
        unjudged = scorer.score(broken, REPLY, "relaxed", profile=False)
    finally:
        scorer.close()
    assert unjudged.stage == "eval_error" and unjudged.reward is None and unjudged.evaluated, unjudged.reason
    assert relaxed.correct and relaxed.reward == 1.0 and relaxed.evaluated, relaxed.reason
    assert not strict.correct and strict.reward == -1.0 and strict.evaluated
    assert not wrong.correct and wrong.reward == -1.0 and wrong.stage != "correct"
    assert not none.evaluated and none.reward == -1.0
    assert scorer.stats.evaluations == 4 and scorer.stats.stages.get("correct") == 1


INLINE_RELU_REPLY = (
    "```python\nimport torch\nimport torch.nn as nn\nfrom torch.utils.cpp_extension import load_inline\n\n"
    "_src = '''\n#include <torch/extension.h>\n// MARK\ntorch::Tensor relu_cpu(torch::Tensor x) {\n"
    "  auto y = x.contiguous(); auto out = torch::empty_like(y);\n"
    "  auto a = y.data_ptr<float>(); auto o = out.data_ptr<float>();\n"
    "  for (int64_t i = 0; i < y.numel(); ++i) o[i] = a[i] > 0.f ? a[i] : 0.f;\n  return out;\n}\n'''\n"
    "_ext = load_inline(name='rl_prebuild_relu', cpp_sources=_src, functions=['relu_cpu'], verbose=False)\n\n"
    "class ModelNew(nn.Module):\n    def forward(self, x):\n        return _ext.relu_cpu(x)\n```\n")


def test_judged_scorer_prebuilds_replies_into_the_build_cache(tmp_path: Path) -> None:
    """`JudgedScorer.prebuild` builds every reply's solution at once into the trusted build cache (an inline C++
    extension, so that it runs on a CPU); replies with no solution or a failing build are left to `score`."""
    import uuid

    from cuda_agent.compiler.builder import default_cache_dir
    from cuda_agent.rl.onegpu import JudgedScorer

    task = Task(id="user/relu", code=RELU, name="relu")
    good = INLINE_RELU_REPLY.replace("MARK", uuid.uuid4().hex)  # a source no earlier run has cached
    broken = good.replace("return out;", "return out")
    inline_cache = default_cache_dir() / "inline"
    before = set(inline_cache.rglob("*")) if inline_cache.exists() else set()
    scorer = JudgedScorer("cpu", timeout_s=240)
    try:
        built = scorer.prebuild([(task, good), (task, "no code here"), (task, broken)], "relaxed", jobs=2)
        added = set(inline_cache.rglob("*")) - before
        judged = scorer.score(task, good, "relaxed", profile=False)
        failed = scorer.score(task, broken, "relaxed", profile=False)
    finally:
        scorer.close()
    assert built == 1
    assert added, "the prebuilt extension is not in the build cache"
    assert judged.correct and judged.reward == 1.0, judged.reason
    assert failed.stage == "build_failed" and failed.reward == -1.0


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("nvcc") is None and not Path("/usr/local/cuda/bin/nvcc").exists(),
                    reason="needs nvcc")
def test_counting_backend_records_the_agent_environments_evaluations(tokenizer, tmp_path: Path) -> None:
    """A scripted episode (a real kernel built by nvcc, a PyTorch model_new.py, profile, submit) through the
    environment and the warm local backend: the evaluator's verdicts are counted. Without a GPU the evaluator
    answers that the built kernels cannot run here; on a GPU host relaxed mode accepts the PyTorch forward."""
    import torch

    from cuda_agent.agent import AgentEnv
    from cuda_agent.rl.envfactory import env_config
    from cuda_agent.rl.onegpu import agent_backend
    from cuda_agent.rl.rollout import RolloutLimits, run_token_episode
    from cuda_agent.rl.scripted import ScriptedGenerationServer

    task = Task(id="user/relu", code=RELU, name="relu")
    turns = [call_text("write", path="kernels/relu.cu", content=BUILDABLE_KERNEL),
             call_text("write", path="model_new.py", content=TORCH_RELU), call_text("profile"), call_text("submit")]
    server = ScriptedGenerationServer([turns], tokenizer)
    backend = agent_backend("relaxed", "cuda" if torch.cuda.is_available() else "cpu")
    env = AgentEnv(env_config({"sandbox": "local", "workspace_root": str(tmp_path / "ws"), "verify": "gpu"}), backend)
    try:
        episode = asyncio.run(run_token_episode(env, task, server.as_generate_fn("r0"), tokenizer,
                                                limits=RolloutLimits(max_turns=6, response_length=100_000)))
    finally:
        env.close()
        backend.close()
    assert episode.end_reason == "submitted"
    assert backend.stats.evaluations >= 1 and backend.build_seconds > 0
    assert {v["task"] for v in backend.verdicts} == {"user/relu"}
    if torch.cuda.is_available():
        assert episode.reward >= 1.0 and backend.verdicts[-1]["correct"] is True
    else:
        assert episode.reward == -1.0 and backend.stats.stages == {"runtime_error": backend.stats.evaluations}


def _run(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(REPO / "benchmarks" / "rl_gpu.py"), *args], capture_output=True,
                          text=True, env=env, timeout=900, cwd=REPO)


@pytest.mark.slow
def test_rl_gpu_run_end_to_end_on_cpu_and_resumed(tiny_model: Path, tmp_path: Path) -> None:
    train, heldout = tmp_path / "train", tmp_path / "heldout"
    train.mkdir()
    heldout.mkdir()
    (train / "relu.py").write_text(RELU)
    (heldout / "add.py").write_text(ADD)
    env = {**os.environ, "PYTHONPATH": str(REPO / "src"), "CUDA_AGENT_CACHE": str(tmp_path / "cache")}
    env.pop("CUDA_AGENT_RESULTS_DIR", None)
    common = ["--model", str(tiny_model), "--device", "cpu", "--train-tasks", str(train), "--heldout-tasks",
              str(heldout), "--warmup-batch", "2", "--warmup-max-tokens", "8", "--heldout-max-tokens", "8",
              "--ppo-episodes", "1", "--max-turns", "1", "--max-tokens-per-turn", "8", "--max-response-tokens", "64",
              "--sandbox", "local", "--budget-s", "900"]
    first = _run(common + ["--out", str(tmp_path / "run1"), "--warmup-steps", "1", "--ppo-steps", "1",
                           "--export", str(tmp_path / "export1")], env)
    assert first.returncode == 0, first.stderr[-3000:]
    exported = {p.name for p in (tmp_path / "export1").iterdir()}
    assert exported == {"rl_gpu.json", "rl_gpu.png", "adapters.tgz", "logs.tgz"}
    record = json.loads((tmp_path / "export1" / "rl_gpu.json").read_text())
    m = record["metrics"]
    assert record["model"] == "model" and m["model_params"] > 0
    assert (m["ppo_steps"], m["warmup_steps"], m["agentic_steps"]) == (2, 1, 1)
    assert m["heldout_tasks"] == 1 and m["real_reward"] == 0  # the CPU evaluator: not the GPU's reward
    assert m["tokens_generated"] > 0 and m["seconds_training"] > 0
    assert m["evaluations_with_heldout"] >= m["evaluations"] and m["model_params"] > 10_000
    steps = [json.loads(line) for line in (tmp_path / "run1" / "steps.jsonl").read_text().splitlines()]
    assert [s["stage"] for s in steps] == ["warmup", "agentic"]
    assert all(s["replies"] == n for s, n in zip(steps, (2, 1)))
    # every judged reply's row, written as it came (a run cut off at the lease's end keeps them)
    samples = [json.loads(line) for line in (tmp_path / "run1" / "samples.jsonl").read_text().splitlines()]
    assert [s["phase"] for s in samples] == ["heldout_before", "warmup", "warmup", "agentic", "heldout_after"]
    assert record["details"]["modes"]["warmup"] in ("strict", "relaxed")
    with tarfile.open(tmp_path / "export1" / "adapters.tgz") as tar:
        names = tar.getnames()
    assert "adapters/actor/adapter_model.safetensors" in names and "adapters/state.json" in names

    second = _run(common + ["--out", str(tmp_path / "run2"), "--warmup-steps", "1", "--ppo-steps", "0",
                            "--resume", str(tmp_path / "export1" / "adapters.tgz")], env)
    assert second.returncode == 0, second.stderr[-3000:]
    record2 = json.loads((tmp_path / "run2" / "results" / "rl_gpu.json").read_text())
    m2 = record2["metrics"]
    assert (m2["ppo_steps"], m2["warmup_steps"], m2["session_steps"]) == (3, 2, 1)
    assert record2["details"]["sessions"] == 2
    assert [r["step"] for r in record2["details"]["history"]] == [1, 1, 2]
    assert m2["heldout_pass_before"] == m["heldout_pass_before"]  # the first session's "before" is kept

    bad = _run(["--model", str(tmp_path / "missing.gguf")], env)
    assert bad.returncode == 2 and "--model" in bad.stderr and "Traceback" not in bad.stderr
