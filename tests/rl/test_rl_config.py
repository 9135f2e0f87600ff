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
        assert (cfg.global_batch, cfg.actor_lr, cfg.critic_lr) == (PAPER.global_batch, PAPER.actor_lr, PAPER.critic_lr)
        assert (cfg.clip_ratio_low, cfg.clip_ratio_high, cfg.loss_agg_mode) == (0.2, 0.28, "token-mean")
        assert (cfg.gamma, cfg.lam) == (1.0, 0.95)
    warm = load_stage_config(config_path("warmup"))
    assert warm.max_prompt_tokens + warm.max_response_tokens == PAPER.warmup_context
    ppo = load_stage_config(config_path("ppo"))
    assert ppo.max_prompt_tokens + ppo.max_response_tokens == PAPER.agent_context
    assert ppo.max_turns == PAPER.max_turns


def test_overrides_are_typed_and_checked():
    assert parse_override("actor_lr=1e-6") == ("actor_lr", 1e-6)
    assert parse_override("rollout.n=4") == ("rollout.n", 4)
    assert parse_override("eval.backend={kind: stand_in}") == ("eval.backend", {"kind": "stand_in"})
    cfg = load_stage_config(config_path("ppo"), ["rollout.n=8", "verl.trainer.save_freq=3", "engine=trl"])
    assert cfg.rollout.n == 8 and cfg.verl["trainer"]["save_freq"] == 3 and cfg.engine == "trl"
    with pytest.raises(ConfigError, match="unknown key 'actor_lrr' \\(did you mean 'actor_lr'\\?\\)"):
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
    tools = rows[0]["tools"]
    assert isinstance(tools, list) and isinstance(tools[0], dict), "verl hands tools to apply_chat_template: a list"
    assert json.loads(rows[0]["tools_json"]) == header["tools"]


def _generated(tmp_path, stage, *overrides):
    tasks = tmp_path / "tasks"
    tasks.mkdir(exist_ok=True)
    from rl_samples import RELU

    (tasks / "relu.py").write_text(RELU)
    extra = [f"tasks={tasks}"] if stage != "rft" else [f"trajectories={tmp_path / 'none'}"]
    cfg = load_stage_config(config_path(stage), extra + [f"output_dir={tmp_path / stage}", *overrides])
    result = run_stage(cfg, dry_run=True)
    return yaml.safe_load(open(result.files["verl_config"]).read()), cfg


def test_rft_token_budget_and_sequence_parallel_hold_a_131k_sample(tmp_path):
    """verl asserts max_token_len_per_gpu * sp_size >= the longest sample; its default budget is 8,192."""
    generated, cfg = _generated(tmp_path, "rft")
    sp = generated["engine"]["ulysses_sequence_parallel_size"]
    assert cfg.max_length == 131_072 and sp == 4
    assert generated["data"]["max_token_len_per_gpu"] * sp >= 131_072
    assert generated["data"]["max_token_len_per_gpu"] == 32_768
    assert generated["model"]["use_remove_padding"] is True  # verl's SP needs it


def test_ppo_budgets_and_sequence_parallel_hold_prompt_plus_response(tmp_path):
    generated, _ = _generated(tmp_path, "ppo")
    context = 16_384 + 114_688
    actor, critic = generated["actor_rollout_ref"]["actor"], generated["critic"]
    ref, rollout = generated["actor_rollout_ref"]["ref"], generated["actor_rollout_ref"]["rollout"]
    for section, key in ((actor, "ppo_max_token_len_per_gpu"), (critic, "ppo_max_token_len_per_gpu"),
                         (critic, "forward_max_token_len_per_gpu"), (ref, "log_prob_max_token_len_per_gpu"),
                         (rollout, "log_prob_max_token_len_per_gpu")):
        sp = section.get("ulysses_sequence_parallel_size", actor["ulysses_sequence_parallel_size"])
        assert section[key] * sp >= context, key
    assert actor["ulysses_sequence_parallel_size"] == critic["ulysses_sequence_parallel_size"] == 4
    with pytest.raises(ConfigError, match="sequence_parallel=3 must be >= 1 and divide cluster.gpus_per_node=8"):
        _generated(tmp_path, "ppo", "sequence_parallel=3")


def test_critic_stage_never_updates_the_actor(tmp_path):
    """verl updates the actor at step s (counted from 1) when critic_warmup <= s."""
    generated, cfg = _generated(tmp_path, "critic")
    warmup = generated["trainer"]["critic_warmup"]
    steps = generated["trainer"]["total_training_steps"]
    assert steps == cfg.total_steps == 50
    assert [s for s in range(1, steps + 1) if warmup <= s] == []
    assert generated["trainer"]["use_v1"] is True


def test_paths_reach_verl_absolute(tmp_path, monkeypatch):
    """verl's workers run on other nodes in other folders: every path it reads must be absolute."""
    monkeypatch.chdir(tmp_path)
    generated, _ = _generated(tmp_path, "ppo", "output_dir=runs/rl/ppo")
    values = [generated["data"]["train_files"], generated["data"]["val_files"],
              generated["actor_rollout_ref"]["model"]["path"], generated["critic"]["model"]["path"],
              generated["trainer"]["default_local_dir"],
              generated["actor_rollout_ref"]["rollout"]["agent"]["agent_loop_config_path"]]
    assert all(v.startswith("/") for v in values), values
    assert generated["actor_rollout_ref"]["model"]["path"] == str(tmp_path / "runs/rl/rft/actor")
    warm, _ = _generated(tmp_path, "warmup")
    assert warm["actor_rollout_ref"]["model"]["path"] == "Qwen/Qwen3-8B"  # a hub id stays a hub id
    rft, _ = _generated(tmp_path, "rft", "output_dir=runs/rl/rft")
    assert rft["model"]["path"] == str(tmp_path / "runs/rl/warmup/actor")
    assert rft["data"]["train_files"].startswith("/") and rft["trainer"]["default_local_dir"].startswith("/")
    assert rft["data"]["custom_cls"]["path"].startswith("/")


def test_a_verl_stage_is_refused_outside_verls_environment(tmp_path):
    """verl installed without its dependencies imports but cannot train: the launch is refused before it starts."""
    from cuda_agent.rl import verl_env

    if not verl_env.problems():
        pytest.skip("this is verl's environment: the launch would run")
    tasks = tmp_path / "tasks"
    tasks.mkdir()
    from rl_samples import RELU

    (tasks / "relu.py").write_text(RELU)
    cfg = load_stage_config(config_path("warmup"), [f"tasks={tasks}", f"output_dir={tmp_path / 'out'}"])
    with pytest.raises(ConfigError, match=r"not verl's training environment: .*bash scripts/setup.sh --rl"):
        run_stage(cfg)
    assert not (tmp_path / "out" / "checkpoints").exists()


def _file(tmp_path, text: str):
    path = tmp_path / "stage.yaml"
    path.write_text(text)
    return path


def test_a_file_is_checked_against_its_stages_schema_when_loaded(tmp_path):
    shipped = config_path("ppo").read_text()
    with pytest.raises(ConfigError, match=r"stage.yaml: unknown key 'rollout.temprature' \(did you mean "
                                          r"'rollout.temperature'\?\)"):
        load_stage_config(_file(tmp_path, shipped.replace("temperature: 1.0, tensor", "temprature: 1.0, tensor")))
    with pytest.raises(ConfigError, match="stage.yaml: global_batch must be an integer, got 'big'"):
        load_stage_config(_file(tmp_path, shipped.replace("global_batch: 1024", "global_batch: big")))
    with pytest.raises(ConfigError, match="stage.yaml: actor_path is required"):
        load_stage_config(_file(tmp_path, shipped.replace("actor_path: runs/rl/rft/actor\n", "")))
    with pytest.raises(ConfigError, match="stage.yaml: unknown key 'small'"):  # rft has no trl PPO section
        load_stage_config(_file(tmp_path, config_path("rft").read_text() + "small: {ppo_epochs: 2}\n"))
    with pytest.raises(ConfigError, match=r"with the overrides rollout.n=two\): rollout.n must be an integer"):
        load_stage_config(config_path("ppo"), ["rollout.n=two"])


def test_a_key_the_file_leaves_at_its_default_can_be_overridden(tmp_path):
    """rft.yaml names no cluster.master_addr, which a multi-node RFT needs (README, multi-node launch)."""
    traj = [f"trajectories={tmp_path}", f"output_dir={tmp_path / 'rft'}", "cluster.train_nodes=2"]
    cfg = load_stage_config(config_path("rft"), traj + ["cluster.master_addr=head0"])
    assert (cfg.cluster.master_addr, cfg.cluster.master_port) == ("head0", 29500)
    assert "--rdzv_endpoint=head0:29500" in run_stage(cfg, dry_run=True).command
    with pytest.raises(ConfigError, match="cluster.master_addr is required for 2 nodes"):
        run_stage(load_stage_config(config_path("rft"), traj), dry_run=True)


def test_a_setting_a_use_cannot_do_without_is_named_when_null(tmp_path):
    with pytest.raises(ConfigError, match="ppo.yaml: max_prompt_tokens is required here"):
        _generated(tmp_path, "ppo", "max_prompt_tokens=null")  # verl needs the prompt budget; the trl path does not


def test_a_null_mini_batch_is_the_whole_global_batch(tmp_path):
    generated, _ = _generated(tmp_path, "ppo", "mini_batch=null", "global_batch=48")
    assert generated["actor_rollout_ref"]["actor"]["ppo_mini_batch_size"] == generated["critic"]["ppo_mini_batch_size"] == 48


def test_the_agent_loops_section_is_typed_too():
    from cuda_agent.rl.config import LoopSettings
    from cuda_agent.rl.typed import from_mapping

    loop = from_mapping(LoopSettings, {"backend": {"kind": "stand_in"}, "max_turns": 7}, where="verl config")
    assert (loop.max_turns, loop.max_tokens_per_turn, loop.backend) == (7, 8192, {"kind": "stand_in"})
    assert from_mapping(LoopSettings, {}, where="verl config").max_turns is None  # verl's multi_turn decides
    with pytest.raises(ConfigError, match=r"verl config: unknown key 'cuda_agent.max_turn' \(did you mean "
                                          r"'cuda_agent.max_turns'\?\)"):
        from_mapping(LoopSettings, {"max_turn": 7}, where="verl config", prefix="cuda_agent.")
