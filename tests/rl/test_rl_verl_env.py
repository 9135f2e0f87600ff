"""In verl's training environment (.venv-rl, `bash scripts/setup.sh --rl`): verl's declared requirements hold, verl's
real model merger hands a checkpoint on, and verl's real SFT dataset reads RFT rows with their exact tool schemas.
Skipped in any other environment (the dev one has a newer transformers than verl declares)."""
from __future__ import annotations

import json
import subprocess

import pytest

from cuda_agent.rl import verl_env

PROBLEMS = verl_env.problems()
pytestmark = [pytest.mark.verl_env,
              pytest.mark.skipif(bool(PROBLEMS), reason=f"not verl's environment ({'; '.join(PROBLEMS)[:200]})")]


def test_verls_declared_requirements_hold_here():
    assert PROBLEMS == []
    from importlib import metadata

    assert metadata.version("verl") == "0.9.1"
    import transfer_queue  # noqa: F401  (verl's v1 trainer imports it)
    import verl.trainer.main_ppo  # noqa: F401
    import verl.trainer.sft_trainer  # noqa: F401


def _tiny(tmp_path):
    from tiny_model import build_model, build_tokenizer, save_pair

    tokenizer = build_tokenizer(["def forward(self, x): return torch.relu(x)"] * 8, vocab_size=300)
    return save_pair(build_model(tokenizer), tokenizer, tmp_path / "base"), build_model(tokenizer)


def test_verls_model_merger_hands_a_checkpoint_on(tmp_path):
    """A one-rank FSDP checkpoint in verl's layout (shards, fsdp_config.json, huggingface/) becomes the Hugging Face
    folder the next stage reads, through `handoff.merge_commands` and verl's own merger."""
    import shutil

    import torch
    from transformers import AutoModelForCausalLM

    from cuda_agent.rl.handoff import merge_commands

    base, _ = _tiny(tmp_path)
    model = AutoModelForCausalLM.from_pretrained(base)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.25)  # "trained": differs from the base weights
    step = tmp_path / "warmup" / "checkpoints" / "global_step_2" / "actor"
    step.mkdir(parents=True)
    torch.save(model.state_dict(), step / "model_world_size_1_rank_0.pt")
    (step / "fsdp_config.json").write_text(json.dumps({"FSDP_version": 2, "world_size": 1}))
    shutil.copytree(base, step / "huggingface")
    (tmp_path / "warmup" / "checkpoints" / "latest_checkpointed_iteration.txt").write_text("2")
    for command in merge_commands("warmup", tmp_path / "warmup"):
        done = subprocess.run(command, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr[-2000:]
    merged = AutoModelForCausalLM.from_pretrained(tmp_path / "warmup" / "actor")
    expected = {k: v.to(torch.bfloat16).float() for k, v in model.state_dict().items()}
    for key, value in merged.state_dict().items():
        assert torch.allclose(value.float(), expected[key], atol=1e-2), key


def test_verls_sft_dataset_gets_the_exact_tool_schemas(tmp_path):
    """Parquet widens a list of differing tool schemas to their union (nulls); the RFT dataset reads tools_json."""
    from omegaconf import OmegaConf
    from transformers import AutoTokenizer
    from verl.trainer.sft_trainer import create_sft_dataset

    from cuda_agent.rl.data import write_parquet

    base, _ = _tiny(tmp_path)
    tools = [{"type": "function", "function": {"name": "read", "parameters": {
                 "type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}}},
             {"type": "function", "function": {"name": "bash", "parameters": {
                 "type": "object", "properties": {"command": {"type": "string"}, "timeout": {"type": "integer",
                                                                                          "default": 300}}}}}]
    messages = [{"role": "system", "content": "s"}, {"role": "user", "content": "u"},
                {"role": "assistant", "content": "done"}]
    path = write_parquet([{"messages": messages, "tools": tools, "tools_json": json.dumps(tools)}] * 2,
                         tmp_path / "rft.parquet")
    tokenizer = AutoTokenizer.from_pretrained(base)
    data = OmegaConf.create({"max_length": 256, "truncation": "left", "messages_key": "messages", "tools_key": "tools",
                             "pad_mode": "no_padding", "custom_cls": {"path": None, "name": None}})
    plain = create_sft_dataset(str(path), data, tokenizer, None)
    assert plain.tools[0] != tools  # verl's own reader sees the widened schemas
    assert plain.tools[0][0]["function"]["parameters"]["properties"]["command"] is None
    from pathlib import Path

    import cuda_agent.rl.verl_sft_data as module

    data.custom_cls = {"path": str(Path(module.__file__)), "name": "ExactToolsSFTDataset"}
    exact = create_sft_dataset(str(path), data, tokenizer, None)
    assert exact.tools[0] == tools
    assert exact[0]["input_ids"].shape[-1] > 0
