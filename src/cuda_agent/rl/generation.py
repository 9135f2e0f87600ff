"""Sampling episodes from a transformers model: the generation server, one episode written as a trajectory, and the
rollout limits of a stage. Shared by the stages of the small-scale path (`cuda_agent.rl.small`, `ppo_small`,
`warmup_ppo`) and the TRL adapter; it imports none of them.
"""
from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from cuda_agent.agent.trajectory import VERSION, TrajectoryWriter, now_iso
from cuda_agent.rl.config import CollectConfig, CriticConfig, PpoConfig
from cuda_agent.rl.rollout import RolloutLimits, run_token_episode
from cuda_agent.rl.scripted import ScriptedOutput


class HFGenerator:
    """A generation server over a transformers model, for `run_token_episode` (sampling, log-probabilities)."""

    def __init__(self, model: Any, tokenizer: Any, *, temperature: float = 1.0, seed: int = 0) -> None:
        self.model, self.tokenizer, self.temperature = model, tokenizer, temperature
        self.seed = seed

    async def __call__(self, context: list[int], params: dict[str, Any]) -> Any:
        import torch

        ids = torch.tensor([context], device=getattr(self.model, "device", None))
        with torch.no_grad():
            out = self.model.generate(ids, attention_mask=torch.ones_like(ids), do_sample=True,
                                      temperature=self.temperature, max_new_tokens=int(params.get("max_tokens", 64)),
                                      eos_token_id=self.tokenizer.eos_token_id, pad_token_id=self.tokenizer.pad_token_id,
                                      output_scores=True, return_dict_in_generate=True)
        new = out.sequences[0, ids.shape[1]:]
        scores = self.model.compute_transition_scores(out.sequences, out.scores, normalize_logits=True)[0]
        return ScriptedOutput(token_ids=new.tolist(), log_probs=scores.tolist())


def collect_episode(env: Any, task: Any, generate: Any, tokenizer: Any, limits: Any, path: Path,
                    sampling: dict[str, Any] | None = None) -> Any:
    """Run one token-level episode and write it as an agent trajectory (header, turns, end)."""
    writer = TrajectoryWriter(path)
    records: list[dict[str, Any]] = []

    def on_turn(event: Any) -> None:
        if not records:
            header = {"type": "header", "version": VERSION, "time": now_iso(), "task": task.to_dict(),
                      "workspace": str(env.workspace), "tools": env.tool_schemas(),
                      "messages": [{"role": "system", "content": env.system_prompt},
                                   {"role": "user", "content": env.task_prompt}]}
            writer.append(header)
            records.append(header)
        record = {"type": "turn", "time": now_iso(), "messages": [m.to_openai() for m in event.messages],
                  "results": list(event.results), "malformed_calls": event.parsed.n_malformed}
        writer.append(record)
        records.append(record)

    try:
        episode = asyncio.run(run_token_episode(env, task, generate, tokenizer, limits=limits, on_turn=on_turn,
                                                sampling_params=sampling))
        writer.append({"type": "end", "time": now_iso(), "reward": episode.reward, "reason": episode.end_reason,
                       "turns": episode.assistant_turns, "malformed_calls": episode.malformed_calls})
    finally:
        writer.close()
    return episode


def rollout_limits(cfg: CollectConfig | CriticConfig | PpoConfig) -> RolloutLimits:
    """A multi-turn stage's episode limits."""
    return RolloutLimits(max_turns=cfg.max_turns, response_length=cfg.max_response_tokens,
                         max_tokens_per_turn=cfg.max_tokens_per_turn, max_observation_tokens=cfg.max_observation_tokens,
                         max_prompt_tokens=cfg.max_prompt_tokens)
