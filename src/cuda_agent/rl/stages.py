"""Run one stage of the recipe: ``warmup``, ``collect``, ``rft``, ``critic``, ``ppo``.

With ``engine: verl`` a stage prepares its data, writes the verl config it generates (``<out>/verl_<stage>.yaml``)
and launches verl (``dry_run`` stops after writing, for inspection); launching first checks that this Python is
verl's environment (`cuda_agent.rl.verl_env`), and a stage that succeeds hands its last checkpoint on as Hugging
Face folders (``<out>/actor``, ``<out>/critic``) through verl's model merger (`cuda_agent.rl.handoff`). ``collect`` with verl's checkpoint runs the
agent against an OpenAI-compatible endpoint that serves it (vLLM or SGLang), many episodes at once, writing
trajectories. With ``engine: trl`` the stage runs the small-scale path in this process (`cuda_agent.rl.small`).
"""
from __future__ import annotations

import json
import logging
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from cuda_agent.errors import ConfigError
from cuda_agent.rl.config import CollectConfig, RftConfig, RolloutStage, StageConfig
from cuda_agent.rl.stage_io import Progress, StageResult, load_task_list, out_dir_of

log = logging.getLogger(__name__)


def run_stage(cfg: StageConfig, *, dry_run: bool = False, progress: Progress | None = None) -> StageResult:
    """Run ``cfg``'s stage with its engine. Raises `ConfigError` for missing settings; a launched engine that
    fails is reported in ``returncode`` (its own log says why)."""
    if cfg.engine == "trl":
        from cuda_agent.rl.small import run_small_stage

        return run_small_stage(cfg, progress=progress)
    out = out_dir_of(cfg)
    out.mkdir(parents=True, exist_ok=True)
    if isinstance(cfg, CollectConfig):
        return _collect_with_endpoint(cfg, out, dry_run, progress)
    from cuda_agent.rl import data, verl_config

    if isinstance(cfg, RftConfig):
        from cuda_agent.rl.filters import FilterConfig, select

        paths = sorted(Path(cfg.trajectories).glob("*.jsonl"))
        kept, reasons = select(paths, FilterConfig(max_repeats=cfg.filter.max_repeats))
        if not kept and not dry_run:
            raise ConfigError(f"rft: none of {len(paths)} trajectories passed the filter ({reasons})")
        train = data.write_parquet(data.sft_rows(kept), out / "rft_train.parquet")
        tree = verl_config.sft_config(cfg, out, train)
        metrics = {"trajectories": float(len(paths)), "kept": float(len(kept))}
    else:
        assert isinstance(cfg, RolloutStage)
        agent = "single_turn_agent" if cfg.stage == "warmup" else "cuda_agent"
        train = data.write_parquet(data.task_rows(load_task_list(cfg), agent), out / "tasks_train.parquet")
        tree = verl_config.ppo_config(cfg, out, train)
        metrics = {}
    path = verl_config.write_config(tree, out, f"verl_{cfg.stage}")
    command = verl_config.launch_command(cfg.stage, path, cfg)
    log.info("%s: verl config written to %s", cfg.stage, path)
    if dry_run:
        return StageResult(cfg.stage, "verl", out, metrics, {"verl_config": str(path)}, tuple(command))
    from cuda_agent.rl import verl_env
    from cuda_agent.rl.handoff import merge_commands

    verl_env.require()
    rc = subprocess.call(command)
    files = {"verl_config": str(path)}
    for merge in merge_commands(cfg.stage, out) if rc == 0 else []:
        log.info("%s: merging %s into %s", cfg.stage, merge[-3], merge[-1])
        rc = subprocess.call(merge)
        if rc != 0:
            break
        files[Path(merge[-1]).name] = merge[-1]
    return StageResult(cfg.stage, "verl", out, metrics, files, tuple(command), rc)


def _collect_with_endpoint(cfg: CollectConfig, out: Path, dry_run: bool, progress: Progress | None) -> StageResult:
    from cuda_agent.agent import AgentEnv, OpenAIConfig, OpenAIPolicy, run_episode
    from cuda_agent.rl.envfactory import env_config, make_backend

    policy = cfg.policy
    if not policy.base_url or not policy.model:
        raise ConfigError(f"{cfg.source or 'collect'}: policy.base_url and policy.model are required with engine "
                          "verl (the endpoint that serves the checkpoint)")
    policy_cfg = OpenAIConfig(base_url=policy.base_url, model=policy.model, temperature=policy.temperature)
    tasks = load_task_list(cfg)
    repeats = cfg.episodes_per_task
    jobs = [(t, r) for t in tasks for r in range(repeats)]
    traj_dir = out / "trajectories"
    traj_dir.mkdir(parents=True, exist_ok=True)
    if dry_run:
        return StageResult("collect", "verl", out, {"episodes": float(len(jobs))}, {"trajectories": str(traj_dir)})

    def one(job: tuple[Any, int]) -> float:
        task, r = job
        env = AgentEnv(env_config(cfg.env), make_backend(cfg.eval.backend))
        slug = task.id.replace("/", "_")
        result = run_episode(task, OpenAIPolicy(policy_cfg), env, trajectory=traj_dir / f"{slug}-{r}.jsonl")
        return float(result.reward)

    rewards: list[float] = []
    with ThreadPoolExecutor(max_workers=cfg.concurrency) as pool:
        for done, reward in enumerate(pool.map(one, jobs), start=1):
            rewards.append(reward)
            if progress:
                progress("collect", done, len(jobs))
    metrics = {"episodes": float(len(rewards)), "mean_reward": sum(rewards) / max(1, len(rewards)),
               "positive": float(sum(r > 0 for r in rewards))}
    (out / "collect_summary.json").write_text(json.dumps(metrics, indent=2))
    return StageResult("collect", "verl", out, metrics, {"trajectories": str(traj_dir)})
