"""How far each verl stage gets on this machine: verl's own config validation of the generated config, then a real
launch of verl's entry point (``main_ppo`` on a local Ray, the SFT trainer under torchrun) that is expected to stop at
its first step that needs a GPU. Used by the CPU test in CI (tests/rl/test_rl_verl_launch.py) and by
benchmarks/verl_launch.py, both on the tiny run's configs (tests/rl/tiny_run.py); on a cluster node it checks an
environment before GPUs are booked.

Where each launch stops, on a machine without a GPU (the markers are verl's and Ray's own output):

- ``main_ppo`` (warm-up, critic, ppo): config validated -> local Ray started -> verl's v1 task runner composes the
  config -> TransferQueue and the dataloader (our parquet, the tiny model's tokenizer) -> the resource-pool check
  that asks Ray for the trainer's GPUs, where it stops: "Total available GPUs 0 is less than total desired GPUs".
- ``sft_trainer`` (rft): torchrun starts the rank -> Hydra composes the config and calls ``run_sft`` -> verl's
  ``initialize_global_process_group`` -> the NCCL process group, where it stops: "ProcessGroupNCCL is only
  supported with GPUs". The dataset that the trainer would build next is built by
  `validate_stage` (verl's `create_sft_dataset` with the config's own data settings) instead.

Every path is a real component: verl, Ray, torch.distributed, TransferQueue; nothing is patched. For a 2-core
machine the launches add two Hydra overrides (``CPU_OVERRIDES``): Ray's logical CPU count, and one TransferQueue
storage unit instead of eight (each is a Ray actor process).
"""
from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

CPU_OVERRIDES: tuple[str, ...] = ("ray_kwargs.ray_init.num_cpus=16",
                                  "transfer_queue.backend.SimpleStorage.num_data_storage_units=1")
PPO_STEPS: tuple[tuple[str, str], ...] = (
    ("config_validated", "[validate_config] All configuration checks passed"),
    ("ray_started", "Started a local Ray instance"),
    ("task_runner", "(TaskRunnerV1 pid="),
    ("dataloader", "train and validate dataloader initialized"),
    ("gpu_resource_pool", "Total available GPUs 0 is less than total desired GPUs"),
)
SFT_STEPS: tuple[tuple[str, str], ...] = (
    ("entry_point", "sft_trainer.py"),
    ("run_sft", "in run_sft"),
    ("process_group_init", "in initialize_global_process_group"),
    ("nccl_process_group", "ProcessGroupNCCL is only supported with GPUs"),
)
FIRST_GPU_STEP = {"main_ppo": "gpu_resource_pool", "sft_trainer": "nccl_process_group"}
_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_ERROR = re.compile(r"(\w+(?:Error|Exception)): (.+)")


@dataclass(frozen=True)
class Launch:
    """What one launch did. ``launched_to``: the last of the entry point's steps reached, in order;
    ``reason``: the last error line it printed; ``at_first_gpu_step``: it stopped where a GPU is first needed."""

    entry: str
    launched_to: str
    reason: str
    seconds: float
    returncode: int | None
    log: Path

    @property
    def at_first_gpu_step(self) -> bool:
        return self.launched_to == FIRST_GPU_STEP[self.entry]


def entry_of(command: Sequence[str]) -> str:
    return "sft_trainer" if "verl.trainer.sft_trainer" in command else "main_ppo"


def compose(config_path: Path, overrides: Sequence[str] = ()) -> Any:
    """The config verl's Hydra main would receive for ``config_path`` (the generated file, over verl's tree)."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir

    with initialize_config_dir(config_dir=str(config_path.parent.resolve()), version_base=None):
        return hydra_compose(config_name=config_path.stem, overrides=list(overrides))


def validate_stage(stage: str, config_path: Path) -> dict[str, Any]:
    """Run verl's own validation on a generated config; raise what verl raises when it is invalid.

    PPO-style stages: `verl.utils.config.validate_config` exactly as ``main_ppo`` calls it, and the agent loop the
    config names is loaded. RFT: the dataclass conversions the SFT trainer makes first (model, engine, optimizer,
    checkpoint, profiler), then verl's `create_sft_dataset` on the config's data, reading one sample."""
    config = compose(config_path)
    if stage == "rft":
        from verl.trainer.sft_trainer import create_sft_dataset
        from verl.utils.config import omega_conf_to_dataclass

        model = omega_conf_to_dataclass(config.model)
        for section in ("engine", "optim", "checkpoint", "profiler"):
            omega_conf_to_dataclass(config[section])
        dataset = create_sft_dataset(config.data.train_files, config.data, model.tokenizer, model.processor)
        sample = dataset[0]
        return {"samples": len(dataset), "first_sample_tokens": int(sample["input_ids"].shape[-1]),
                "dataset": type(dataset).__name__, "tools": dataset.tools[0]}
    from verl.trainer.ppo.utils import need_critic, need_reference_policy
    from verl.utils.config import validate_config
    from verl.utils.device import auto_set_device

    auto_set_device(config)
    validate_config(config=config, use_reference_policy=need_reference_policy(config), use_critic=need_critic(config))
    details: dict[str, Any] = {"critic": bool(need_critic(config)), "use_v1": bool(config.trainer.use_v1)}
    registry = config.actor_rollout_ref.rollout.agent.get("agent_loop_config_path")
    if registry:
        import yaml
        from hydra.utils import get_class

        entries = yaml.safe_load(Path(registry).read_text())
        details["agent_loops"] = [get_class(e["_target_"]).__name__ for e in entries]
    return details


def launch(command: Sequence[str], log: Path, *, timeout_s: float = 600.0, overrides: Sequence[str] = CPU_OVERRIDES,
           env: dict[str, str] | None = None) -> Launch:
    """Run ``command`` (a stage's launch command) with ``overrides`` appended, in its own session; wait at most
    ``timeout_s`` (then SIGINT, which lets Ray shut down, and SIGKILL after 30 s); afterwards end whatever is left
    in its process group. Output goes to ``log``."""
    entry = entry_of(command)
    full_env = {**os.environ, **(env or {}), "HYDRA_FULL_ERROR": "1", "RAY_DEDUP_LOGS": "0"}
    argv = list(command) + list(overrides if entry == "main_ppo" else ())
    log.parent.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    with open(log, "w") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=full_env, start_new_session=True)
        try:
            rc: int | None = proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            _signal_group(proc.pid, signal.SIGINT)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                _signal_group(proc.pid, signal.SIGKILL)
                proc.wait()
            rc = None
        finally:
            _signal_group(proc.pid, signal.SIGKILL)
    seconds = time.monotonic() - started
    text = _ANSI.sub("", log.read_text(errors="replace"))
    return Launch(entry, reached(text, PPO_STEPS if entry == "main_ppo" else SFT_STEPS), last_error(text), seconds,
                  rc, log)


def reached(text: str, steps: Sequence[tuple[str, str]]) -> str:
    """The last step whose marker appears after the previous step's (``"none"`` if the first is missing)."""
    last, position = "none", 0
    for name, marker in steps:
        found = text.find(marker, position)
        if found < 0:
            break
        last, position = name, found
    return last


def last_error(text: str) -> str:
    """The last ``SomethingError: message`` line of ``text`` (empty if none)."""
    errors = [f"{m.group(1)}: {m.group(2).strip()}" for m in _ERROR.finditer(text)]
    return errors[-1] if errors else ""


def _signal_group(pid: int, sig: signal.Signals) -> None:
    try:
        os.killpg(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass
