"""The real verl agent loop class (verl's `AgentLoopBase`) driven by the scripted generation server, and the
generated stage configs composed by Hydra against verl's own config tree. Skipped where verl is not installed."""
import asyncio
import json

import pytest

from rl_samples import KERNEL, MODEL_NEW, call_text

verl = pytest.importorskip("verl", reason="verl is not installed (pip install verl)")
pytest.importorskip("transformers")
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def hf_tokenizer():
    from tiny_model import build_tokenizer

    return build_tokenizer([KERNEL, MODEL_NEW, call_text("read", path="model.py"), "def forward(self, x): relu"] * 5,
                           vocab_size=400)


def make_loop(tokenizer, server, tmp_path, response_length=4096, max_turns=10):
    from omegaconf import OmegaConf
    from verl.experimental.agent_loop.agent_loop import DictConfigWrap, _agent_loop_registry
    from verl.utils.dataset.rl_dataset import RLHFDataset

    from cuda_agent.rl.verl_agent_loop import CudaAgentLoop

    assert _agent_loop_registry["cuda_agent"]["_target_"] == "cuda_agent.rl.verl_agent_loop.CudaAgentLoop"
    config = OmegaConf.create({
        "actor_rollout_ref": {"rollout": {"prompt_length": 20000, "response_length": response_length,
                                          "multi_turn": {"max_assistant_turns": max_turns}}},
        "data": {},
        "cuda_agent": {"backend": {"kind": "stand_in"},
                       "env": {"sandbox": "local", "workspace_root": str(tmp_path / "ws")}},
    })
    return CudaAgentLoop(trainer_config=DictConfigWrap(config), server_manager=server, tokenizer=tokenizer,
                         processor=None, dataset_cls=RLHFDataset, data_config=DictConfigWrap(config.data))


def test_agent_loop_returns_ids_masks_turns_and_reward(hf_tokenizer, task, tmp_path):
    from verl.experimental.agent_loop.agent_loop import AgentLoopOutput

    from cuda_agent.rl.data import task_rows
    from cuda_agent.rl.scripted import ScriptedGenerationServer

    turns = [call_text("read", path="model.py"), call_text("write", path="kernels/k.cu", content=KERNEL),
             call_text("write", path="model_new.py", content=MODEL_NEW), call_text("submit")]
    server = ScriptedGenerationServer([turns], hf_tokenizer, logprob=-1.0)
    loop = make_loop(hf_tokenizer, server, tmp_path)
    row = task_rows([task], "cuda_agent")[0]
    output = asyncio.run(loop.run({"temperature": 1.0}, **row))
    assert isinstance(output, AgentLoopOutput)
    model_ids = [i for i, m in zip(output.response_ids, output.response_mask) if m == 1]
    assert model_ids == sum((hf_tokenizer.encode(t, add_special_tokens=False) for t in turns), [])
    assert len(output.response_ids) == len(output.response_mask) == len(output.response_logprobs)
    assert all((lp == -1.0) == (m == 1) for lp, m in zip(output.response_logprobs, output.response_mask))
    assert output.num_turns == 4 + 3 + 1
    # the stand-in's feature score: ModelNew and a __global__ kernel registered with CA_EXPORT
    assert output.reward_score == 2.0 and output.extra_fields["end_reason"] == "submitted"
    assert server.calls[0].prompt_ids == output.prompt_ids
    # verl's own conversion puts the reward on the last response token
    as_dict = output.as_dict()
    assert as_dict["rm_scores"][-1].item() == 2.0 and as_dict["rm_scores"][:-1].abs().sum().item() == 0


def test_environment_is_closed_even_when_generation_fails(hf_tokenizer, task, tmp_path, monkeypatch):
    from cuda_agent.errors import PolicyError
    from cuda_agent.rl import verl_agent_loop
    from cuda_agent.rl.data import task_rows
    from cuda_agent.rl.envfactory import make_env
    from cuda_agent.rl.scripted import ScriptedGenerationServer

    closed = []

    def tracking_env(settings):
        env = make_env(settings)
        original = env.close
        env.close = lambda: (closed.append(True), original())[1]
        return env

    monkeypatch.setattr(verl_agent_loop, "make_env", tracking_env)
    server = ScriptedGenerationServer([[call_text("read", path="model.py")]], hf_tokenizer)  # one turn only
    loop = make_loop(hf_tokenizer, server, tmp_path)
    with pytest.raises(PolicyError):
        asyncio.run(loop.run({}, **task_rows([task], "cuda_agent")[0]))
    assert closed == [True]


def test_response_length_and_turn_limits_from_verl_config(hf_tokenizer, task, tmp_path):
    from cuda_agent.rl.data import task_rows
    from cuda_agent.rl.scripted import ScriptedGenerationServer

    server = ScriptedGenerationServer([[call_text("read", path="model.py")] * 6], hf_tokenizer)
    loop = make_loop(hf_tokenizer, server, tmp_path, response_length=50000, max_turns=3)
    output = asyncio.run(loop.run({}, **task_rows([task], "cuda_agent")[0]))
    assert output.extra_fields["assistant_turns"] == 3 and output.extra_fields["end_reason"] == "turn_limit"
    server = ScriptedGenerationServer([[call_text("read", path="model.py")] * 6], hf_tokenizer)
    loop = make_loop(hf_tokenizer, server, tmp_path, response_length=64)
    output = asyncio.run(loop.run({}, **task_rows([task], "cuda_agent")[0]))
    assert len(output.response_ids) <= 64 and output.extra_fields["end_reason"] == "length"
    assert output.response_mask[-1] == 1  # verl's reward goes on the last token: a model token


@pytest.mark.parametrize("stage", ["warmup", "critic", "ppo", "rft"])
def test_generated_configs_compose_with_verl(stage, tmp_path):
    from hydra import compose, initialize_config_dir

    from cuda_agent.rl.config import load_stage_config
    from cuda_agent.locations import rl_config_path as config_path
    from cuda_agent.rl import verl_config

    cfg = load_stage_config(config_path(stage), ["actor_lr=1e-6", "verl.trainer.seed_marker=7"])
    train = tmp_path / "t.parquet"
    tree = (verl_config.sft_config(cfg, tmp_path, train) if stage == "rft"
            else verl_config.ppo_config(cfg, tmp_path, train))
    path = verl_config.write_config(tree, tmp_path, f"verl_{stage}")
    with initialize_config_dir(config_dir=str(tmp_path), version_base=None):
        composed = compose(config_name=path.stem)
    assert composed.trainer.seed_marker == 7
    if stage == "rft":
        assert composed.optim.lr == 1e-6 and composed.data.messages_key == "messages"
        return
    actor = composed.actor_rollout_ref.actor
    assert (actor.clip_ratio_low, actor.clip_ratio_high, actor.loss_agg_mode) == (0.2, 0.28, "token-mean")
    assert actor.optim.lr == 1e-6 and composed.critic.optim.lr == 6e-6
    assert (composed.algorithm.gamma, composed.algorithm.lam, composed.algorithm.adv_estimator) == (1.0, 0.95, "gae")
    assert composed.data.train_batch_size == 1024
    context = composed.data.max_prompt_length + composed.data.max_response_length
    rollout = composed.actor_rollout_ref.rollout
    if stage == "warmup":
        assert context == 32768 and rollout.agent.default_agent_loop == "single_turn_agent"
        assert composed.reward.custom_reward_function.name == "compute_score"
    else:
        assert context == 131072 and rollout.agent.default_agent_loop == "cuda_agent"
        assert rollout.multi_turn.max_assistant_turns == 150 and composed.cuda_agent.max_turns == 150
        registry = json.dumps(open(rollout.agent.agent_loop_config_path).read())
        assert "cuda_agent.rl.verl_agent_loop.CudaAgentLoop" in registry
    # verl updates the actor at step s (from 1) when critic_warmup <= s: the critic stage never does
    assert composed.trainer.critic_warmup == (composed.trainer.total_training_steps + 1 if stage == "critic" else 0)
