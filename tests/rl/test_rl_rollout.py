"""The token-level episode on a real `AgentEnv` (local runner, the stand-in evaluator) driven by the scripted server."""
import asyncio

import pytest

from rl_samples import KERNEL, MODEL_NEW, call_text
from cuda_agent.rl.chat import IM_END, ChatFormat
from cuda_agent.rl.envfactory import make_env
from cuda_agent.rl.rollout import RolloutLimits, run_token_episode, tokenize_conversation
from cuda_agent.rl.scripted import ScriptedGenerationServer


def play(task, tokenizer, settings, turns, limits=RolloutLimits(max_turns=20, response_length=200_000), logprob=None):
    server = ScriptedGenerationServer([turns], tokenizer, logprob=logprob)
    env = make_env(settings)
    try:
        episode = asyncio.run(run_token_episode(env, task, server.as_generate_fn("r0"), tokenizer, limits=limits))
    finally:
        env.close()
    return episode, server


def test_ids_masks_turns_and_reward_of_a_submitted_episode(task, tokenizer, env_settings):
    turns = [call_text("read", path="model.py"),
             "Writing the kernel." + call_text("write", path="kernels/k.cu", content=KERNEL),
             call_text("write", path="model_new.py", content=MODEL_NEW),
             call_text("submit", end=False)]  # last turn without <|im_end|>: the episode ends, nothing appended
    episode, server = play(task, tokenizer, env_settings, turns, logprob=-0.5)
    chat = ChatFormat()
    obs = episode.observations
    expected = []
    mask = []
    for i, turn in enumerate(turns):
        ids = tokenizer.encode(turn)
        expected += ids
        mask += [1] * len(ids)
        if i < len(turns) - 1:
            ids = tokenizer.encode(chat.render_observation([obs[i]], close_assistant=False))
            expected += ids
            mask += [0] * len(ids)
    assert episode.response_ids == expected
    assert episode.response_mask == mask
    assert episode.response_logprobs == [(-0.5 if m else 0.0) for m in mask]
    assert episode.assistant_turns == 4 and episode.observation_turns == 3 and episode.num_turns == 8
    assert episode.end_reason == "submitted"
    assert episode.reward == 2.0  # the stand-in's feature score: ModelNew and a __global__ kernel with CA_EXPORT
    # the model saw exactly prompt + everything so far at each turn
    assert [len(c.prompt_ids) for c in server.calls] == [len(episode.prompt_ids) + n for n in
                                                          [0] + [len(episode.response_ids[:i]) for i in
                                                                 _turn_starts(mask)[1:]]]
    assert server.calls[-1].prompt_ids == episode.prompt_ids + episode.response_ids[:_turn_starts(mask)[-1]]


def _turn_starts(mask):
    return [i for i, m in enumerate(mask) if m == 1 and (i == 0 or mask[i - 1] == 0)]


def test_prompt_holds_system_task_and_tool_schemas(task, tokenizer, env_settings):
    episode, _ = play(task, tokenizer, env_settings, [call_text("submit")])
    prompt = tokenizer.decode(episode.prompt_ids)
    assert prompt.startswith("<|im_start|>system\n") and prompt.endswith("<|im_start|>assistant\n")
    assert '"name": "submit"' in prompt and "Task user/relu" in prompt
    assert episode.reward == 1.0  # the stand-in's feature score: the starting model_new.py defines ModelNew, no kernel


def test_turn_without_im_end_gets_it_in_the_observation_masked(task, tokenizer, env_settings):
    episode, _ = play(task, tokenizer, env_settings, [call_text("read", end=False, path="model.py"), call_text("submit")])
    first = len(tokenizer.encode(call_text("read", end=False, path="model.py")))
    assert episode.response_ids[first] == tokenizer.token_id(IM_END)
    assert episode.response_mask[first] == 0


def test_malformed_and_missing_calls_become_error_observations_and_count(task, tokenizer, env_settings):
    turns = ['<tool_call>{"name": "write", "arguments": {"path": "x"</tool_call><|im_end|>', "no call here<|im_end|>",
             call_text("submit")]
    episode, _ = play(task, tokenizer, env_settings, turns)
    assert episode.malformed_calls == 1
    assert episode.observations[0].startswith("error: arguments of 'write'")
    assert episode.observations[1].startswith("error: no tool call")
    assert episode.assistant_turns == 3 and episode.end_reason == "submitted"


def test_turn_limit_cuts_and_takes_the_env_reward(task, tokenizer, env_settings):
    turns = [call_text("read", path="model.py")] * 5
    episode, _ = play(task, tokenizer, env_settings, turns, RolloutLimits(max_turns=2, response_length=100_000))
    assert episode.assistant_turns == 2 and episode.end_reason == "turn_limit"
    assert episode.reward == -1.0  # nothing evaluated in the episode: the env's final reward
    assert episode.response_mask[-1] == 1  # the last turn's observation is dropped: nothing follows it


def test_reward_of_an_episode_cut_after_an_observation_reaches_the_model_tokens_as_on_the_trl_path(
        task, tokenizer, env_settings):
    """verl puts the reward on the last response token (rm_scores[-1]) and its GAE skips mask-0 tokens; the TRL path
    puts it on the last model token. An episode cut by the turn limit right after a tool answer must give both the
    same advantages."""
    import torch

    core_algos = pytest.importorskip("verl.trainer.ppo.core_algos")
    from cuda_agent.rl.critic import gae_targets, outcome_rewards

    turns = [call_text("read", path="model.py")] * 5
    episode, _ = play(task, tokenizer, env_settings, turns, RolloutLimits(max_turns=3, response_length=100_000))
    assert episode.end_reason == "turn_limit" and episode.observation_turns == 2
    mask = torch.tensor([episode.response_mask], dtype=torch.float32)
    values = torch.linspace(-0.5, 0.5, mask.shape[1]).unsqueeze(0)
    verl_rewards = torch.zeros_like(mask)
    verl_rewards[0, -1] = 2.0  # what verl's agent loop does with reward_score
    _, verl_returns = core_algos.compute_gae_advantage_return(verl_rewards, values, mask, torch.tensor(1.0),
                                                              torch.tensor(0.95))  # verl whitens its advantages
    _, our_returns = gae_targets(outcome_rewards(mask, [2.0]), values, mask, 1.0, 0.95)
    model = mask.bool()
    assert torch.allclose(verl_returns[model], our_returns[model], atol=1e-5)
    assert verl_returns[0, -1] == pytest.approx(2.0, abs=1e-5)  # the reward is the last model token's return


def test_length_cut_inside_an_observation_ends_on_a_model_token(task, tokenizer, env_settings):
    first = tokenizer.encode(call_text("read", path="model.py"))
    episode, _ = play(task, tokenizer, env_settings, [call_text("read", path="model.py")] * 3,
                      RolloutLimits(max_turns=10, response_length=len(first) + 5))
    assert episode.end_reason == "length"
    assert episode.response_ids == first and episode.response_mask == [1] * len(first)


def test_response_length_cap(task, tokenizer, env_settings):
    episode, _ = play(task, tokenizer, env_settings, [call_text("read", path="model.py")] * 3,
                      RolloutLimits(max_turns=10, response_length=120))
    assert len(episode.response_ids) == len(episode.response_mask) <= 120
    assert episode.end_reason == "length" and episode.response_mask[-1] == 1


def test_env_budget_truncation_ends_the_episode(task, tokenizer, env_settings):
    settings = {**env_settings, "env": {**env_settings["env"], "max_turns": 2}}
    episode, _ = play(task, tokenizer, settings, [call_text("read", path="model.py")] * 5)
    assert episode.end_reason == "turns" and episode.assistant_turns == 2


def test_saved_conversation_retokenizes_to_the_same_tokens(task, tokenizer, env_settings):
    turns = [call_text("read", path="model.py"), call_text("write", path="model_new.py", content=MODEL_NEW),
             call_text("submit")]
    episode, _ = play(task, tokenizer, env_settings, turns)
    server = ScriptedGenerationServer([turns], tokenizer)
    env = make_env(env_settings)
    try:
        env.reset(task)
        tools = env.tool_schemas()
    finally:
        env.close()
    prompt, response, mask = tokenize_conversation(episode.messages, tools, tokenizer)
    assert prompt == episode.prompt_ids
    assert response == episode.response_ids and mask == episode.response_mask
    assert server.calls == []


def test_scripted_server_refuses_when_spent(tokenizer):
    from cuda_agent.errors import PolicyError

    server = ScriptedGenerationServer([["a"]], tokenizer)
    asyncio.run(server.generate("x", prompt_ids=[], sampling_params={}))
    with pytest.raises(PolicyError, match="only 1 turns"):
        asyncio.run(server.generate("x", prompt_ids=[], sampling_params={}))
    with pytest.raises(PolicyError, match="no script left"):
        asyncio.run(server.generate("y", prompt_ids=[], sampling_params={}))


def test_the_token_loop_and_the_agent_loop_answer_a_turn_alike(task, tokenizer, env_settings):
    """Both loops take the same step (`cuda_agent.agent.tool_turn.run_tool_calls`): the same calls on the same
    environment give the same answers, including the "not run" answer to a call after the one that ended it."""
    from cuda_agent.agent.loop import Agent, AgentExit
    from cuda_agent.agent.policy import ScriptedPolicy
    from cuda_agent.agent.tool_turn import NOT_RUN

    steps = [{"name": "write", "arguments": {"path": "model_new.py", "content": MODEL_NEW}},
             {"tool_calls": [{"name": "read", "arguments": {"path": "model_new.py"}},
                             {"name": "submit", "arguments": {}},
                             {"name": "read", "arguments": {"path": "model.py"}}]}]
    token_turns = [call_text("write", path="model_new.py", content=MODEL_NEW),
                   call_text("read", end=False, path="model_new.py") + call_text("submit", end=False)
                   + call_text("read", path="model.py")]
    episode, _ = play(task, tokenizer, env_settings, token_turns)

    env = make_env(env_settings)
    agent = Agent(ScriptedPolicy.from_steps(steps), env)
    try:
        env.reset(task)
        agent.messages = env.initial_messages()
        with pytest.raises(AgentExit) as ended:
            while True:
                agent.step()
    finally:
        env.close()

    def answers(messages):
        return [(m.role, m.name, m.content) for m in messages if m.role in ("tool", "user")][1:]

    assert answers(episode.messages) == answers(agent.messages)
    assert answers(agent.messages)[-1] == ("tool", "read", NOT_RUN)
    assert ended.value.reason == episode.end_reason == "submitted"
