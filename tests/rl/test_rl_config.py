import json

import pytest
import yaml

from cuda_agent.errors import ConfigError
from cuda_agent.rl.config import PAPER, load_stage_config, parse_override
from cuda_agent.rl.stages import run_stage
from cuda_agent.locations import rl_config_path as config_path


def test_committed_configs_hold_the_paper_defaults():
    for stage in ("warmup", "critic", "ppo"):
        cfg = load_stage_config(config_path(stage), stage=stage)
        assert (cfg.get("global_batch"), cfg.get("actor_lr"), cfg.get("critic_lr")) == (
            PAPER.global_batch, PAPER.actor_lr, PAPER.critic_lr)
        assert (cfg.get("clip_ratio_low"), cfg.get("clip_ratio_high"), cfg.get("loss_agg_mode")) == (0.2, 0.28, "token-mean")
        assert (cfg.get("gamma"), cfg.get("lam")) == (1.0, 0.95)
    warm = load_stage_config(config_path("warmup"))
    assert warm.get("max_prompt_tokens") + warm.get("max_response_tokens") == PAPER.warmup_context
    ppo = load_stage_config(config_path("ppo"))
    assert ppo.get("max_prompt_tokens") + ppo.get("max_response_tokens") == PAPER.agent_context
    assert ppo.get("max_turns") == PAPER.max_turns


def test_overrides_are_typed_and_checked():
    assert parse_override("actor_lr=1e-6") == ("actor_lr", 1e-6)
    assert parse_override("rollout.n=4") == ("rollout.n", 4)
    assert parse_override("eval.backend={kind: stand_in}") == ("eval.backend", {"kind": "stand_in"})
    cfg = load_stage_config(config_path("ppo"), ["rollout.n=8", "verl.trainer.save_freq=3", "engine=trl"])
    assert cfg.get("rollout.n") == 8 and cfg.get("verl.trainer.save_freq") == 3 and cfg.engine == "trl"
    with pytest.raises(ConfigError, match="unknown key 'actor_lrr'"):
        load_stage_config(config_path("ppo"), ["actor_lrr=1"])
    with pytest.raises(ConfigError, match="not key=value"):
        load_stage_config(config_path("ppo"), ["actor_lr"])
    with pytest.raises(ConfigError, match="not 'rft'"):
        load_stage_config(config_path("ppo"), stage="rft")
    with pytest.raises(ConfigError, match="engine must be"):
        load_stage_config(config_path("ppo"), ["engine=deepspeed"])


def test_dry_run_writes_task_rows_and_the_verl_config(tmp_path):
    import pyarrow.parquet as pq

    tasks = tmp_path / "tasks"
    tasks.mkdir()
    from rl_samples import RELU

    (tasks / "relu.py").write_text(RELU)
    cfg = load_stage_config(config_path("ppo"), [f"tasks={tasks}", f"output_dir={tmp_path / 'out'}", "max_turns=40"])
    result = run_stage(cfg, dry_run=True)
    rows = pq.read_table(tmp_path / "out" / "tasks_train.parquet").to_pylist()
    assert [r["agent_name"] for r in rows] == ["cuda_agent"]
    assert json.loads(rows[0]["extra_info"]["task_json"])["id"] == "user/relu"
    generated = yaml.safe_load(open(result.files["verl_config"]).read())
    assert generated["actor_rollout_ref"]["rollout"]["multi_turn"]["max_assistant_turns"] == 40
    assert generated["cuda_agent"]["backend"] == {"kind": "ray", "address": "auto"}
    assert result.command[1:3] == ("-m", "verl.trainer.main_ppo") and result.returncode is None


def test_rft_dry_run_filters_and_writes_chat_rows(tmp_path):
    traj = tmp_path / "traj"
    traj.mkdir()
    header = {"type": "header", "task": {"id": "t"}, "tools": [{"type": "function"}],
              "messages": [{"role": "system", "content": "s"}, {"role": "user", "content": "u"}]}
    turn = {"type": "turn", "messages": [{"role": "assistant", "content": "done",
                                          "tool_calls": [{"id": "c", "type": "function",
                                                          "function": {"name": "submit", "arguments": "{}"}}]},
                                         {"role": "tool", "content": "submitted", "tool_call_id": "c"}],
            "results": [{"tool_call_id": "c", "observation": "submitted", "info": {"ok": True}}]}
    for name, reward in (("a", 3), ("b", -1)):
        (traj / f"{name}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in [header, turn, {"type": "end", "reward": reward}]))
    cfg = load_stage_config(config_path("rft"), [f"trajectories={traj}", f"output_dir={tmp_path / 'rft'}"])
    result = run_stage(cfg, dry_run=True)
    assert result.metrics == {"trajectories": 2.0, "kept": 1.0}
    import pyarrow.parquet as pq

    rows = pq.read_table(tmp_path / "rft" / "rft_train.parquet").to_pylist()
    assert len(rows) == 1 and rows[0]["reward"] == 3 and rows[0]["messages"][2]["role"] == "assistant"
    assert "sft_trainer" in " ".join(result.command)
