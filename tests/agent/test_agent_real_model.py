"""One real agent turn against a real model: Qwen2.5-Coder-1.5B-Instruct (GGUF) served by llama.cpp on 127.0.0.1.

What it guards: the path a real model's reply takes (the server's chat template renders our tool schemas, the model
writes a Hermes ``<tool_call>``, `OpenAIPolicy` reads it back, the environment runs it, the trajectory records it).
A regression anywhere on that path turns the model's call into "no tool call" or a malformed call, and this fails.

Skipped unless the model file (scripts/fetch_test_model.sh, or $CUDA_AGENT_TEST_MODEL) and a Python with
llama-cpp-python[server] ($CUDA_AGENT_LLAMA_PYTHON, or the checkout's .llm-venv) are present. About 2-4 minutes
on a 2-core CPU (loading the model, then reading the ~4k-token system prompt).
"""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from cuda_agent.agent import AgentEnv, EnvConfig, LocalBackend, OpenAIConfig, OpenAIPolicy, Trajectory, run_episode
from cuda_agent.agent.local_server import LocalModelServer, LocalServerConfig, default_model_path, find_llama_python

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]


def _llama_python() -> str | None:
    found = find_llama_python()
    if found is None and not os.environ.get("CUDA_AGENT_LLAMA_PYTHON"):
        local = REPO / ".llm-venv" / "bin" / "python"
        found = str(local) if local.exists() else None
    return found


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory):
    model = default_model_path()
    python = _llama_python()
    if not model.is_file():
        pytest.skip(f"no test model at {model} (scripts/fetch_test_model.sh fetches it)")
    if python is None:
        pytest.skip("llama-cpp-python[server] not found (set CUDA_AGENT_LLAMA_PYTHON)")
    config = LocalServerConfig(model=model, ctx=8192, threads=1, python=python, model_name="qwen-test",
                               log_path=tmp_path_factory.mktemp("llm") / "server.log")
    with LocalModelServer(config) as running:
        yield running
    assert running.proc is None  # stopped with its process group


def test_server_lists_the_model(server: LocalModelServer) -> None:
    assert server.models() == ["qwen-test"]


def test_one_real_agent_turn(server: LocalModelServer, task, tmp_path: Path) -> None:
    policy = OpenAIPolicy(OpenAIConfig(base_url=server.base_url, model=server.model_name, temperature=0.0,
                                       max_completion_tokens=384, timeout_s=900, max_retries=1))
    env = AgentEnv(EnvConfig(max_turns=1, sandbox="local", verify="skip", evaluate_on_truncation=False),
                   LocalBackend(verify="skip"))
    result = run_episode(task, policy, env, trajectory=tmp_path / "t.jsonl")
    assert result.reason == "turns" and result.turns == 1, (result.reason, result.message)
    assert result.usage.calls == 1 and result.usage.completion_tokens > 0
    saved = Trajectory.load(tmp_path / "t.jsonl")
    assert saved.end is not None and saved.end["reason"] == "turns"
    (turn,) = saved.turns
    assistant = turn["messages"][0]
    # the model called a tool and the call came back as a structured call of one of the environment's tools
    calls = assistant.get("tool_calls") or []
    assert calls, f"no tool call parsed from the model's reply: {assistant['content'][:500]!r}"
    known = {schema["function"]["name"] for schema in saved.header["tools"]}
    assert calls[0]["function"]["name"] in known
    assert "<tool_call>" not in assistant["content"]
    assert turn["results"][0]["info"]["tool"] == calls[0]["function"]["name"]
