"""Budgets (turns, tokens, wall clock), the episode's end, and context management."""
from __future__ import annotations

from pathlib import Path

import pytest

from cuda_agent.agent import (AgentConfig, EpisodeOverError, Message, ScriptedPolicy, StepInfo, ToolCall, Trajectory,
                              run_episode)
from cuda_agent.agent.context import condense
from cuda_agent.agent.policy import estimate_message_tokens

READ = {"name": "read", "arguments": {"path": "model.py"}}


def test_turn_budget_truncates(files_env, task, tmp_path: Path) -> None:
    files_env.config = type(files_env.config)(**{**files_env.config.__dict__, "max_turns": 3})
    seen: list[StepInfo] = []
    result = run_episode(task, ScriptedPolicy.from_steps([READ] * 6), files_env, trajectory=tmp_path / "t.jsonl",
                         progress=seen.append)
    assert result.reason == "turns" and result.turns == 3
    assert [i.end is not None for i in seen] == [False, False, True]
    assert seen[-1].end is not None and seen[-1].end.reason == "turns"
    assert len(Trajectory.load(tmp_path / "t.jsonl").turns) == 3


def test_turn_budget_counts_every_call_of_a_turn(files_env, task) -> None:
    files_env.config = type(files_env.config)(**{**files_env.config.__dict__, "max_turns": 2,
                                                  "evaluate_on_truncation": False})
    script = ScriptedPolicy.from_steps([{"tool_calls": [READ, READ, READ]}])
    result = run_episode(task, script, files_env)
    assert result.reason == "turns" and result.turns == 2


def test_token_budget_truncates(files_env, task) -> None:
    files_env.reset(task)
    first_prompt = estimate_message_tokens(files_env.initial_messages())
    files_env.config = type(files_env.config)(**{**files_env.config.__dict__, "max_tokens": 2 * first_prompt,
                                                  "evaluate_on_truncation": False})
    result = run_episode(task, ScriptedPolicy.from_steps([READ] * 10), files_env)
    assert result.reason == "tokens" and result.turns == 2
    assert result.usage.total_tokens >= 2 * first_prompt and result.usage.calls == 2


def test_wall_clock_budget_truncates(files_env, task) -> None:
    files_env.config = type(files_env.config)(**{**files_env.config.__dict__, "max_wall_s": 1.0,
                                                  "evaluate_on_truncation": False})
    sleep = {"name": "bash", "arguments": {"command": "sleep 0.7"}}
    result = run_episode(task, ScriptedPolicy.from_steps([sleep] * 10), files_env)
    assert result.reason == "wall" and result.turns == 2 and result.elapsed_s >= 1.0


def test_no_step_after_the_end_or_before_reset(files_env, task) -> None:
    with pytest.raises(EpisodeOverError, match="reset"):
        files_env.step(ToolCall("read", {"path": "model.py"}))
    files_env.reset(task)
    *_, terminated, truncated, info = files_env.step(ToolCall("submit"))
    assert terminated and not truncated and info.end is not None and info.end.reason == "submitted"
    with pytest.raises(EpisodeOverError, match="ended"):
        files_env.step(ToolCall("read", {"path": "model.py"}))


def test_script_exhaustion_ends_with_policy_error(files_env, task) -> None:
    result = run_episode(task, ScriptedPolicy.from_steps([READ]), files_env)
    assert result.reason == "policy_error" and "all were played" in result.message and result.turns == 1


def _conversation(turns: int, output_chars: int) -> list[Message]:
    messages = [Message("system", "S" * 400), Message("user", "task " * 100)]
    for n in range(turns):
        call = ToolCall("read", {"path": f"f{n}"}, id=f"c{n}")
        messages.append(Message("assistant", f"turn {n}", (call,)))
        messages.append(Message("tool", f"out{n} " + "x" * output_chars, tool_call_id=f"c{n}", name="read"))
    return messages


def test_condense_keeps_head_and_recent_turns() -> None:
    messages = _conversation(20, 4000)
    config = AgentConfig(context_tokens=20_000, condense_at=0.8, keep_recent=3, condensed_chars=100)
    assert estimate_message_tokens(messages) > 16_000
    small = condense(messages, config)
    assert small[:2] == messages[:2]
    assert small[-6:] == messages[-6:]
    assert estimate_message_tokens(small) <= 16_000
    old_tools = [m for m in small[2:-6] if m.role == "tool"]
    assert old_tools and all("condensed" in m.content and len(m.content) < 200 for m in old_tools)
    assert condense(_conversation(2, 10), config) == _conversation(2, 10)


def test_condense_drops_whole_old_turns_when_shortening_is_not_enough() -> None:
    messages = _conversation(200, 100)
    config = AgentConfig(context_tokens=4_000, condense_at=0.8, keep_recent=2, condensed_chars=50)
    small = condense(messages, config)
    assert estimate_message_tokens(small) <= 3_200
    assert "earlier turns were omitted" in small[2].content
    for index, message in enumerate(small):
        if message.role == "tool":
            owner = next(m for m in reversed(small[:index]) if m.role == "assistant")
            assert message.tool_call_id in {c.id for c in owner.tool_calls}


def test_loop_condenses_what_the_policy_sees_but_saves_everything(files_env, task, tmp_path: Path) -> None:
    files_env.reset(task)
    window = estimate_message_tokens(files_env.initial_messages()) + 3000
    big = {"name": "bash", "arguments": {"command": "seq 1 1000"}}
    config = AgentConfig(context_tokens=window, condense_at=1.0, keep_recent=1, condensed_chars=100)
    run_episode(task, ScriptedPolicy.from_steps([big] * 6), files_env, config=config, trajectory=tmp_path / "t.jsonl")
    saved = Trajectory.load(tmp_path / "t.jsonl")
    assert all(turn["usage"]["prompt_tokens"] <= window for turn in saved.turns)
    assert estimate_message_tokens(saved.messages()) > window
    assert all("seq" not in r["observation"] and r["observation"].startswith("1\n")
               for turn in saved.turns for r in turn["results"])


def test_submit_before_anything_built_is_refused_when_asked(backend, task, slow_kernel, model_new_text,
                                                            tmp_path: Path) -> None:
    from cuda_agent.agent import AgentEnv, EnvConfig

    submit = {"name": "submit", "arguments": {}}
    steps = [submit,
             {"name": "write", "arguments": {"path": "kernels/scaled_silu.cu", "content": slow_kernel}},
             {"name": "write", "arguments": {"path": "model_new.py", "content": model_new_text}},
             submit]
    env = AgentEnv(EnvConfig(sandbox="local", verify="skip", submit_requires_build=True), backend)
    result = run_episode(task, ScriptedPolicy.from_steps(steps), env, trajectory=tmp_path / "t.jsonl")
    assert result.reason == "submitted" and result.turns == 4
    saved = Trajectory.load(tmp_path / "t.jsonl")
    first = saved.turns[0]["results"][0]
    assert "submit refused: nothing has built" in first["observation"] and not first["terminated"]
    assert saved.turns[-1]["env"]["builds_ok"] == 1
    # without the option the same first submit ends the episode
    plain = AgentEnv(EnvConfig(sandbox="local", verify="skip"), backend)
    assert run_episode(task, ScriptedPolicy.from_steps(steps), plain).turns == 1
