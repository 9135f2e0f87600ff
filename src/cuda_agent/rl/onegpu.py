"""The one-GPU RL run's parts: a LoRA policy and critic from a GGUF (or a transformers folder), batched
single-turn sampling, and rewards from the real evaluator, one evaluation at a time.

Used by `benchmarks/rl_gpu.py` (the measured run on one H200) and by its CPU test with a tiny random model. The
update itself is the small path's (`cuda_agent.rl.ppo_small.ppo_update`); only LoRA weights (and the critic's value
head) train, so a checkpoint is a few MiB and can travel between sessions.

Why a second loader beside `ppo_small.load_trainee`: that one loads full models from a folder and trains every
weight; this one loads the GGUF through transformers (which dequantises it with the ``gguf`` package), wraps both
models in LoRA adapters (peft), builds the critic from the actor's body without loading the file twice, and
reloads adapters saved by an earlier run.
"""
from __future__ import annotations

import json
import os
import logging
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from cuda_agent.rl.ppo_small import PPOSettings, Trainee
from cuda_agent.tasks.task import Task

log = logging.getLogger(__name__)

LORA_TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj")
STATE_FILE = "state.json"


@dataclass(frozen=True)
class LoraSettings:
    """LoRA on the attention projections: rank 8 keeps each adapter near 4 MiB in float32 for a 0.5B Qwen2."""

    rank: int = 8
    alpha: int = 16
    targets: tuple[str, ...] = LORA_TARGETS


def load_base(model: str | Path, device: str, dtype: torch.dtype) -> tuple[Any, Any]:
    """``(causal_lm, tokenizer)`` from a ``.gguf`` file (transformers dequantises it; needs the ``gguf`` package)
    or a transformers folder. Raises `FileNotFoundError` for a path that does not exist."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    path = Path(model)
    if not path.exists():
        raise FileNotFoundError(f"{path}: no such model file or folder")
    if path.suffix == ".gguf":
        folder, extra = str(path.parent), {"gguf_file": path.name}
        tokenizer = gguf_tokenizer(path)
    else:
        folder, extra = str(path), {}
        tokenizer = AutoTokenizer.from_pretrained(folder)
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    lm = AutoModelForCausalLM.from_pretrained(folder, dtype=dtype, **extra)
    return lm.to(device), tokenizer


def tokenizer_folder(gguf: Path) -> Path:
    """Where the tokenizer converted from ``gguf`` is kept: ``<file>.tokenizer/`` beside it."""
    return gguf.with_name(gguf.name + ".tokenizer")


def gguf_tokenizer(gguf: Path) -> Any:
    """The GGUF's tokenizer. transformers builds it from the header's 150k-token vocabulary and merges in Python
    (minutes on a busy CPU), so the result is saved beside the file and read from there next time (a folder that
    can travel with the model)."""
    from transformers import AutoTokenizer

    cached = tokenizer_folder(gguf)
    if (cached / "tokenizer.json").is_file():
        return AutoTokenizer.from_pretrained(str(cached))
    tokenizer = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    try:
        tokenizer.save_pretrained(str(cached))
    except OSError as exc:  # a read-only model folder: use the tokenizer, convert again next time
        log.warning("could not keep the converted tokenizer in %s: %s", cached, exc)
    return tokenizer


def critic_from(actor: Any) -> Any:
    """A one-label token-classification model (the critic) whose body is a copy of ``actor``'s: the value head
    is new, the rest starts from the actor's weights, as the small path's critic stage builds it."""
    from transformers import AutoModelForTokenClassification

    config = actor.config.__class__.from_dict(actor.config.to_dict())
    config.num_labels = 1
    with torch.device(actor.device):  # built where the actor is: initialising 0.5B weights on a CPU takes long
        critic = AutoModelForTokenClassification.from_config(config)
    body = getattr(critic, critic.base_model_prefix)
    body.load_state_dict(getattr(actor, actor.base_model_prefix).state_dict())
    torch.nn.init.zeros_(critic.score.weight)
    return critic.to(device=actor.device, dtype=actor.dtype)


def wrap_lora(actor: Any, critic: Any, lora: LoraSettings, adapters: Path | None) -> tuple[Any, Any]:
    """Both models with LoRA adapters: fresh, or reloaded (trainable) from ``adapters``/actor and /critic."""
    from peft import LoraConfig, PeftModel, get_peft_model

    if adapters is not None:
        return (PeftModel.from_pretrained(actor, str(adapters / "actor"), is_trainable=True),
                PeftModel.from_pretrained(critic, str(adapters / "critic"), is_trainable=True))
    common = {"r": lora.rank, "lora_alpha": lora.alpha, "lora_dropout": 0.0, "target_modules": list(lora.targets)}
    return (get_peft_model(actor, LoraConfig(task_type="CAUSAL_LM", **common)),
            get_peft_model(critic, LoraConfig(task_type="TOKEN_CLS", modules_to_save=["score"], **common)))


def load_trainee_lora(model: str | Path, settings: PPOSettings, *, device: str, lora: LoraSettings = LoraSettings(),
                      adapters: Path | None = None, actor_lr: float = 1e-5, critic_lr: float = 2e-5,
                      seed: int = 0) -> Trainee:
    """A `Trainee` (actor, critic, tokenizer, AdamW over the trainable weights only) for `ppo_small.ppo_update`.
    bfloat16 weights on CUDA (the LoRA weights stay float32), float32 on a CPU."""
    torch.manual_seed(seed)
    dtype = torch.bfloat16 if device.startswith("cuda") else torch.float32
    base, tokenizer = load_base(model, device, dtype)
    actor, critic = wrap_lora(base, critic_from(base), lora, adapters)
    actor.eval()
    critic.eval()

    def trainable(m: Any) -> list[torch.nn.Parameter]:
        return [p for p in m.parameters() if p.requires_grad]

    return Trainee(actor, critic, tokenizer, torch.optim.AdamW(trainable(actor), lr=actor_lr),
                   torch.optim.AdamW(trainable(critic), lr=critic_lr), settings)


def save_adapters(trainee: Trainee, folder: Path, state: dict[str, Any]) -> Path:
    """Write the actor's and critic's adapters and the run's ``state.json`` (steps done, history) to ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    trainee.actor.save_pretrained(str(folder / "actor"))
    trainee.critic.save_pretrained(str(folder / "critic"))
    (folder / STATE_FILE).write_text(json.dumps(state, indent=1) + "\n")
    return folder


def load_state(folder: Path | None) -> dict[str, Any]:
    """The ``state.json`` saved with adapters (empty for a fresh run). Raises `FileNotFoundError` when ``folder``
    is given but holds no adapters."""
    if folder is None:
        return {}
    for needed in ("actor/adapter_config.json", "critic/adapter_config.json"):
        if not (folder / needed).is_file():
            raise FileNotFoundError(f"{folder}: no {needed}; pass the folder a previous run saved its adapters in")
    path = folder / STATE_FILE
    return json.loads(path.read_text()) if path.is_file() else {}


def stop_ids(tokenizer: Any) -> list[int]:
    """Token ids that end a response: the tokenizer's eos and ChatML's ``<|im_end|>`` / ``<|endoftext|>``."""
    ids = {tokenizer.eos_token_id}
    for token in ("<|im_end|>", "<|endoftext|>"):
        tid = tokenizer.convert_tokens_to_ids(token)
        if isinstance(tid, int) and tid != tokenizer.unk_token_id:
            ids.add(tid)
    return sorted(i for i in ids if i is not None)


def sample_responses(actor: Any, tokenizer: Any, prompts: Sequence[list[int]], max_new_tokens: int,
                     temperature: float, batch_size: int = 16) -> list[list[int]]:
    """One sampled response per prompt, generated ``batch_size`` prompts at a time (left-padded); each response is
    cut after its first stop token (kept, as the PPO update scores it)."""
    stops = stop_ids(tokenizer)
    pad = int(tokenizer.pad_token_id if tokenizer.pad_token_id is not None else stops[0])
    device = next(actor.parameters()).device
    out: list[list[int]] = []
    for start in range(0, len(prompts), batch_size):
        chunk = prompts[start:start + batch_size]
        width = max(len(p) for p in chunk)
        ids = torch.tensor([[pad] * (width - len(p)) + list(p) for p in chunk], device=device)
        attn = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in chunk], device=device)
        with torch.no_grad():
            seqs = actor.generate(input_ids=ids, attention_mask=attn, do_sample=True, temperature=temperature,
                                  top_p=1.0, top_k=0, max_new_tokens=max_new_tokens, eos_token_id=stops,
                                  pad_token_id=pad)
        for row in seqs[:, width:].tolist():
            cut = next((i + 1 for i, t in enumerate(row) if t in stops), len(row))
            out.append(row[:cut])
    return out


@dataclass(frozen=True)
class Judged:
    """One response's reward and what the evaluator said (``evaluated`` False: no ``ModelNew`` in the reply).
    ``reward`` None: the evaluator failed on its own side (``eval_error``), which is no verdict on the reply, so a
    training step leaves it out rather than score it -1."""

    reward: float | None
    correct: bool
    faster_than_eager: bool
    evaluated: bool
    stage: str
    reason: str
    seconds: float


@dataclass
class JudgeStats:
    """Counters of the evaluations a scorer or backend made."""

    evaluations: int = 0
    seconds: float = 0.0
    stages: dict[str, int] = field(default_factory=dict)

    def add(self, stage: str, seconds: float) -> None:
        self.evaluations += 1
        self.seconds += seconds
        self.stages[stage] = self.stages.get(stage, 0) + 1


class JudgedScorer:
    """Score single-turn replies with the real evaluator through one warm worker, one evaluation at a time.

    ``device``: the evaluator's (``cuda`` on the GPU host, ``cpu`` for the CPU test). A lost worker is restarted
    and the reply scored -1 (logged): a training step never stops for an evaluation failure."""

    def __init__(self, device: str, timeout_s: float = 180.0) -> None:
        from cuda_agent.evaluator import WarmWorker

        self.device, self.timeout_s = device, timeout_s
        self.worker = WarmWorker()
        self.worker.start()
        self.stats = JudgeStats()

    def close(self) -> None:
        self.worker.close()

    def prebuild(self, replies: list[tuple[Task, str]], mode: str, jobs: int | None = None) -> int:
        """Build the solutions of ``replies`` (each a task and a reply's text), ``jobs`` at once (default: half the
        CPU cores, at least 1), so that `score` finds them in the build cache and the GPU's one-at-a-time
        evaluations do not wait for the compilers in turn. A reply without a solution, or one that fails to build,
        is left to `score`, which says why. Returns how many were built."""
        from concurrent.futures import ThreadPoolExecutor

        from cuda_agent.evaluator import EvalConfig, prebuild
        from cuda_agent.rl.reward import extract_solution

        codes = [(task, code) for task, code in ((t, extract_solution(text)) for t, text in replies) if code]
        if not codes:
            return 0
        config = EvalConfig(mode=mode, device=self.device, timeout_s=self.timeout_s)
        with tempfile.TemporaryDirectory(prefix="cuda-agent-rl-prebuild-") as folder:

            def one(item: tuple[int, tuple[Task, str]]) -> bool:
                n, (task, code) = item
                path = Path(folder) / f"{n}" / "solution.py"
                path.parent.mkdir()
                path.write_text(code)
                return prebuild(task, path, config)

            workers = jobs or max(1, (os.cpu_count() or 2) // 2)
            with ThreadPoolExecutor(min(workers, len(codes))) as pool:
                return sum(pool.map(one, enumerate(codes)))

    def score(self, task: Task, text: str, mode: str, *, profile: bool = True) -> Judged:
        """Judge ``text`` (its last ``ModelNew`` block) in ``mode``; ``profile`` False checks correctness only
        (no eager / torch.compile baselines to time: what a pass rate needs, at a fraction of the cost)."""
        from cuda_agent.errors import CudaAgentError
        from cuda_agent.evaluator import EvalConfig, evaluate
        from cuda_agent.rl.reward import NO_SOLUTION, extract_solution

        code = extract_solution(text)
        if code is None:
            return Judged(NO_SOLUTION, False, False, False, "no_solution", "no ModelNew in the reply", 0.0)
        config = EvalConfig(mode=mode, device=self.device, timeout_s=self.timeout_s, profile=profile)
        started = time.monotonic()
        with tempfile.TemporaryDirectory(prefix="cuda-agent-rl-") as folder:
            path = Path(folder) / "solution.py"
            path.write_text(code)
            try:
                result = evaluate(task, path, config, worker=self.worker)
            except CudaAgentError as exc:  # the worker died; the reply gets -1 and the next one a fresh worker
                log.error("evaluation of a reply for %s failed: %s", task.id, exc)
                self.worker.close()
                self.worker.start()
                seconds = time.monotonic() - started
                self.stats.add("eval_error", seconds)
                return Judged(None, False, False, True, "eval_error", str(exc), seconds)
        seconds = time.monotonic() - started
        self.stats.add(result.stage, seconds)
        reward = None if result.stage == "eval_error" else float(result.reward)
        return Judged(reward, bool(result.correct), result.reward >= 2, True, result.stage, result.reason, seconds)


class CountingBackend:
    """The agent environment's backend (`cuda_agent.agent.LocalBackend`, warm) with every build and evaluation
    timed and every evaluation's verdict recorded (the agentic stage's evaluations and pass counts)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.stats = JudgeStats()
        self.build_seconds = 0.0
        self.verdicts: list[dict[str, Any]] = []

    @property
    def verify_mode(self) -> str:
        return self.inner.verify_mode

    def build(self, workspace: Path) -> Any:
        started = time.monotonic()
        try:
            return self.inner.build(workspace)
        finally:
            self.build_seconds += time.monotonic() - started

    def verify(self, task: Task, workspace: Path) -> Any:
        return self._record(task, lambda: self.inner.verify(task, workspace))

    def profile(self, task: Task, workspace: Path, *, breakdown: bool = False) -> Any:
        return self._record(task, lambda: self.inner.profile(task, workspace, breakdown=breakdown))

    def _record(self, task: Task, call: Any) -> Any:
        started = time.monotonic()
        evaluation = call()
        self.stats.add(evaluation.stage, time.monotonic() - started)
        self.verdicts.append({"task": task.id, "stage": evaluation.stage,
                              "correct": evaluation.correct, "reward": evaluation.reward})
        return evaluation

    def close(self) -> None:
        self.inner.close()


def agent_backend(mode: str, device: str, timeout_s: float = 180.0) -> CountingBackend:
    """A warm local backend whose evaluations use ``mode`` on ``device`` (verification always on: ``gpu`` means
    "run the evaluator", which runs on ``device``), each within ``timeout_s``."""
    from cuda_agent.agent import LocalBackend
    from cuda_agent.evaluator import EvalConfig

    config = EvalConfig(mode=mode, device=device, timeout_s=timeout_s)
    return CountingBackend(LocalBackend(verify="gpu", eval_config=config, warm=True))
