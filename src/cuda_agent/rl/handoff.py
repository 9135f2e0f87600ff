"""Checkpoint hand-off between verl stages: verl saves sharded FSDP checkpoints under
``<out>/checkpoints/global_step_N/`` (``actor/`` and ``critic/`` for PPO-style stages; the SFT trainer's shards sit
in the step folder itself), while the next stage and the serving step read a Hugging Face folder
(``<out>/actor``, ``<out>/critic``). After a stage succeeds, verl's own model merger
(``python -m verl.model_merger merge --backend fsdp``) turns the last saved step into those folders.

What each stage hands on: warm-up and RFT their actor; critic pre-training its critic (the actor is frozen there);
PPO both.
"""
from __future__ import annotations

import re
import sys
from pathlib import Path

from cuda_agent.errors import ConfigError

LATEST = "latest_checkpointed_iteration.txt"
ROLES: dict[str, tuple[tuple[str, str], ...]] = {
    # stage -> (folder inside global_step_N ("" = the step folder), name of the merged folder in the stage's out)
    "warmup": (("actor", "actor"),),
    "rft": (("", "actor"),),
    "critic": (("critic", "critic"),),
    "ppo": (("actor", "actor"), ("critic", "critic")),
}


def latest_step(checkpoints: Path) -> Path:
    """The newest ``global_step_N`` folder: the one verl's tracker file names, else the highest N. Raises
    `ConfigError` when there is none (the stage saved nothing: ``save_every`` and ``total_steps`` say when)."""
    tracker = checkpoints / LATEST
    if tracker.is_file():
        step = checkpoints / f"global_step_{tracker.read_text().strip()}"
        if step.is_dir():
            return step
    steps = [(int(m.group(1)), p) for p in checkpoints.glob("global_step_*")
             if p.is_dir() and (m := re.fullmatch(r"global_step_(\d+)", p.name))]
    if not steps:
        raise ConfigError(f"{checkpoints}: no global_step_N checkpoint to hand on; the stage saved none")
    return max(steps)[1]


def merge_commands(stage: str, out_dir: Path) -> list[list[str]]:
    """verl model-merger commands that write ``<out>/<role>`` from the stage's last checkpoint. Raises
    `ConfigError` for a stage that hands nothing on or a checkpoint without the expected role folder."""
    if stage not in ROLES:
        raise ConfigError(f"stage {stage!r} writes no checkpoint to hand on")
    out_dir = out_dir.resolve()
    step = latest_step(out_dir / "checkpoints")
    commands = []
    for folder, name in ROLES[stage]:
        source = step / folder if folder else step
        if not source.is_dir():
            raise ConfigError(f"{source}: the {stage} checkpoint has no {folder or 'model'} shards")
        commands.append([sys.executable, "-m", "verl.model_merger", "merge", "--backend", "fsdp",
                         "--local_dir", str(source), "--target_dir", str(out_dir / name)])
    return commands
