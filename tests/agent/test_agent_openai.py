"""`OpenAIPolicy` (through the openai SDK) against a local OpenAI-compatible server (stdlib http.server on
127.0.0.1) that plays scripted replies: tool calls, retries after 429 and 5xx, errors that must not be retried, and a whole episode."""
from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from cuda_agent.agent import ContextOverflowError, OpenAIConfig, OpenAIPolicy, Trajectory, run_episode
from cuda_agent.agent.types import Message
from cuda_agent.errors import ConfigError, PolicyError


def completion(content: str = "", calls: list[tuple[str, Any]] = (), prompt: int = 100, done: int = 20) -> dict:
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if calls:
        message["tool_calls"] = [
            {"id": f"call_{i}", "type": "function",
             "function": {"name": name, "arguments": args if isinstance(args, str) else json.dumps(args)}}
            for i, (name, args) in enumerate(calls)
        ]
    return {"id": "x", "object": "chat.completion", "choices": [{"index": 0, "message": message}],
            "usage": {"prompt_tokens": prompt, "completion_tokens": done, "total_tokens": prompt + done}}


class ScriptedServer:
    """Answers each POST /v1/chat/completions with the next (status, headers, body) and records the requests."""

    def __init__(self, replies: list[tuple[int, dict[str, str], Any]]) -> None:
        self.replies = list(replies)
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's name)
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                outer.requests.append(body)
                outer.headers.append({k.lower(): v for k, v in self.headers.items()})  # names are case-blind
                status, headers, reply = outer.replies.pop(0) if outer.replies else (500, {}, {"error": "no more"})
                data = (reply if isinstance(reply, str) else json.dumps(reply)).encode()
                self.send_response(status)
                for key, value in {"Content-Type": "application/json", **headers}.items():
                    self.send_header(key, value)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def serve():
    servers: list[ScriptedServer] = []

    def make(replies: list[tuple[int, dict[str, str], Any]]) -> ScriptedServer:
        servers.append(ScriptedServer(replies))
        return servers[-1]

    yield make
    for server in servers:
        server.close()


def policy_for(url: str, sleeps: list[float], **overrides: Any) -> OpenAIPolicy:
    config = OpenAIConfig(base_url=url, model="test-model", api_key="sk-local", backoff_s=0.01, **overrides)
    return OpenAIPolicy(config, sleep=sleeps.append)


MESSAGES = [Message("system", "s"), Message("user", "u")]
TOOLS = [{"type": "function", "function": {"name": "read", "parameters": {"type": "object", "properties": {}}}}]


def test_429_then_success_is_retried_and_accounted(serve) -> None:
    server = serve([(429, {"Retry-After": "0.05"}, {"error": "slow down"}),
                    (200, {}, completion("thinking", [("read", {"path": "model.py"})], prompt=1000, done=50))])
    sleeps: list[float] = []
    policy = policy_for(server.url, sleeps, price_prompt=2.0, price_completion=10.0)
    turn = policy.query(MESSAGES, TOOLS)
    assert len(server.requests) == 2 and len(sleeps) == 1 and sleeps[0] >= 0.05
    assert turn.content == "thinking" and turn.tool_calls[0].name == "read"
    assert turn.tool_calls[0].parsed_arguments() == {"path": "model.py"} and turn.tool_calls[0].id == "call_0"
    assert (turn.usage.prompt_tokens, turn.usage.completion_tokens, turn.usage.calls) == (1000, 50, 1)
    assert turn.usage.cost == pytest.approx((1000 * 2.0 + 50 * 10.0) / 1e6)
    request = server.requests[-1]
    assert request["model"] == "test-model" and request["tools"] == TOOLS and request["tool_choice"] == "auto"
    assert request["messages"] == [{"role": "system", "content": "s"}, {"role": "user", "content": "u"}]
    assert server.headers[-1]["authorization"] == "Bearer sk-local"


def test_5xx_backoff_grows_exponentially(serve) -> None:
    server = serve([(500, {}, "oops"), (502, {}, "bad gateway"), (503, {}, "busy"), (200, {}, completion("ok"))])
    sleeps: list[float] = []
    turn = policy_for(server.url, sleeps).query(MESSAGES, TOOLS)
    assert turn.content == "ok" and turn.tool_calls == () and len(server.requests) == 4
    assert len(sleeps) == 3 and sleeps[0] < sleeps[2]
    assert all(0.005 <= s <= 0.04 * 2 for s in sleeps)


def test_client_errors_are_not_retried(serve) -> None:
    server = serve([(401, {}, {"error": {"message": "invalid key"}})])
    sleeps: list[float] = []
    with pytest.raises(PolicyError, match="HTTP 401.*invalid key"):
        policy_for(server.url, sleeps).query(MESSAGES, TOOLS)
    assert len(server.requests) == 1 and sleeps == []


def test_context_overflow_is_its_own_error(serve) -> None:
    server = serve([(400, {}, {"error": {"message": "This model's maximum context length is 8192 tokens"}})])
    with pytest.raises(ContextOverflowError):
        policy_for(server.url, []).query(MESSAGES, TOOLS)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_an_address_nothing_listens_on_fails_at_once() -> None:
    """A refused connection to an endpoint that never answered is a wrong address: no minute of retries."""
    sleeps: list[float] = []
    with pytest.raises(PolicyError, match="connection refused.*--base-url"):
        policy_for(f"http://127.0.0.1:{_free_port()}/v1", sleeps, max_retries=2).query(MESSAGES, TOOLS)
    assert sleeps == []


def test_gives_up_after_retries_when_a_server_that_answered_goes_away(serve) -> None:
    """Once the endpoint has answered, a refused connection is a server restarting: it is retried."""
    server = serve([(200, {}, completion("ok"))])
    sleeps: list[float] = []
    policy = policy_for(server.url, sleeps, max_retries=2)
    assert policy.query(MESSAGES, TOOLS).content == "ok"
    server.close()
    with pytest.raises(PolicyError, match="gave up after 3 attempts"):
        policy.query(MESSAGES, TOOLS)
    assert len(sleeps) == 2


def test_config_from_flags_and_environment(monkeypatch) -> None:
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.delenv("CUDA_AGENT_MODEL", raising=False)
    with pytest.raises(ConfigError, match="OPENAI_BASE_URL.*CUDA_AGENT_MODEL"):
        OpenAIConfig.from_env()
    monkeypatch.setenv("OPENAI_BASE_URL", "http://env:1/v1/")
    monkeypatch.setenv("CUDA_AGENT_MODEL", "env-model")
    monkeypatch.setenv("OPENAI_API_KEY", "env-key")
    config = OpenAIConfig.from_env()
    assert (config.base_url, config.model, config.api_key) == ("http://env:1/v1", "env-model", "env-key")
    assert OpenAIConfig.from_env(model="flag-model").model == "flag-model"


def test_episode_against_the_server(serve, files_env, task, tmp_path: Path) -> None:
    server = serve([
        (200, {}, completion("I will read the task.", [("read", {"path": "model.py"})])),
        (429, {"Retry-After": "0"}, {"error": "rate limited"}),
        (200, {}, completion("", [("write", '{"path": "kernels/a.cu", "content": ')])),
        (200, {}, completion("Let me think without tools.")),
        (200, {}, completion("", [("glob", {"pattern": "kernels/*"}), ("submit", {})])),
    ])
    sleeps: list[float] = []
    result = run_episode(task, policy_for(server.url, sleeps), files_env, trajectory=tmp_path / "t.jsonl")
    assert result.reason == "submitted" and result.turns == 5 and len(sleeps) == 1
    assert result.usage.calls == 4 and result.usage.prompt_tokens == 400
    saved = Trajectory.load(tmp_path / "t.jsonl")
    observations = [r["observation"] for t in saved.turns for r in t["results"]]
    assert "class Model" in observations[0]
    assert observations[1].startswith("error:") and "not valid JSON" in observations[1]
    assert "no tool call" in observations[2]
    assert observations[3] == "no files match kernels/*"
    last = server.requests[-1]["messages"]
    assert [m["role"] for m in last] == ["system", "user", "assistant", "tool", "assistant", "tool", "assistant",
                                         "user"]
    assert last[3]["tool_call_id"] == "call_0" and "class Model" in last[3]["content"]
    assert {t["function"]["name"] for t in server.requests[0]["tools"]} >= {"bash", "write", "edit", "submit"}


# ---- what a real small model does (llama.cpp serving a 1.5B model): tool calls as text, broken JSON, cut-off
# replies, empty turns, a context that overflows ----

def text_completion(content: str, finish: str = "stop", done: int = 20) -> dict:
    reply = completion(content, done=done)
    reply["choices"][0]["finish_reason"] = finish
    return reply


def test_tool_calls_written_as_text_are_parsed(serve) -> None:
    server = serve([(200, {}, text_completion(
        'Let me look.\n<tool_call>\n{"name": "read", "arguments": {"path": "model.py"}}\n</tool_call>\n'
        '<tool_call>\n{"name": "glob", "arguments": {"pattern": "kernels/*"}}\n</tool_call>'))])
    turn = policy_for(server.url, []).query(MESSAGES, TOOLS)
    assert turn.content == "Let me look."
    assert [c.name for c in turn.tool_calls] == ["read", "glob"]
    assert turn.tool_calls[0].parsed_arguments() == {"path": "model.py"} and turn.finish_reason == "stop"
    assert len({c.id for c in turn.tool_calls}) == 2


def test_structured_tool_calls_win_over_text(serve) -> None:
    reply = completion('<tool_call>{"name": "bash", "arguments": {}}</tool_call>', [("read", {"path": "a"})])
    server = serve([(200, {}, reply)])
    turn = policy_for(server.url, []).query(MESSAGES, TOOLS)
    assert [c.name for c in turn.tool_calls] == ["read"]


def test_llama_cpp_overflow_message_is_a_context_overflow(serve) -> None:
    server = serve([(400, {}, {"error": {"message": "Requested tokens (17000) exceed context window of 16384"}})])
    with pytest.raises(ContextOverflowError):
        policy_for(server.url, []).query(MESSAGES, TOOLS)


def test_a_real_models_mistakes_end_in_trajectory_entries(serve, files_env, task, tmp_path: Path) -> None:
    overflow = (400, {}, {"error": {"message": "Requested tokens (20000) exceed context window of 16384"}})
    server = serve([
        (200, {}, text_completion('<tool_call>\n{"name": "read", "arguments": {"path": "model.py",}}\n</tool_call>')),
        (200, {}, text_completion('<tool_call>\n{"name": "compile_kernel", "arguments": {}}\n</tool_call>')),
        (200, {}, text_completion('<tool_call>\n{"name": "write", "arguments": {"path": "model_new.py", "content": '
                                  '"import torch\\nclass ModelNew', finish="length", done=2048)),
        (200, {}, text_completion("")),
        (200, {}, text_completion("I think the kernel should use shared memory and " * 40, finish="length")),
        (200, {}, completion("", [("write", {"path": "model_new.py", "content": "import torch\n"})])),
        overflow, overflow,
    ])
    result = run_episode(task, policy_for(server.url, []), files_env, trajectory=tmp_path / "t.jsonl")
    assert result.reason == "context_overflow" and "context" in result.message
    assert result.turns == 6 and result.malformed_tool_calls == 3
    saved = Trajectory.load(tmp_path / "t.jsonl")
    results = [t["results"][0] for t in saved.turns]
    observations = [r["observation"] for r in results]
    assert "not valid JSON" in observations[0] and results[0]["info"]["malformed"] is True
    assert "unknown tool 'compile_kernel'" in observations[1] and results[1]["info"]["malformed"] is True
    assert "not valid JSON" in observations[2] and "cut off" in observations[2]
    assert saved.turns[2]["finish_reason"] == "length"
    assert "no tool call" in observations[3] and "malformed" not in results[3]["info"]
    assert "cut off before any tool call" in observations[4] and "malformed" not in results[4]["info"]
    assert results[5]["info"]["ok"] is True and results[5]["info"]["tool"] == "write"
    assert saved.turns[-1]["env"]["malformed_calls"] == 3
    assert saved.end is not None and saved.end["reason"] == "context_overflow" and saved.end["malformed_tool_calls"] == 3
    assert len(server.requests) == 8  # the overflow was retried once, condensed harder, then the episode ended


def test_final_state_is_saved_for_offline_scoring(serve, files_env, task, tmp_path: Path) -> None:
    from cuda_agent.agent import write_outputs

    server = serve([
        (200, {}, completion("", [("write", {"path": "kernels/k.cu", "content": "// kernel\n"})])),
        (200, {}, completion("", [("write", {"path": "model_new.py", "content": "class ModelNew: pass\n"})])),
        (200, {}, completion("", [("submit", {})])),
    ])
    files_env.config = type(files_env.config)(**{**files_env.config.__dict__, "keep_workspace": True})
    result = run_episode(task, policy_for(server.url, []), files_env, trajectory=tmp_path / "t.jsonl")
    assert result.reason == "submitted" and result.best is None
    paths = write_outputs(result, tmp_path / "out")
    final = paths["final"]
    assert final == tmp_path / "out" / "final" / task.id.replace("/", "_")
    assert (final / "model_new.py").read_text() == "class ModelNew: pass\n"
    assert (final / "kernels" / "k.cu").read_text() == "// kernel\n"
    assert "malformed tool calls (answered with an error): 0" in paths["report"].read_text()


def test_tool_calls_written_as_json_blocks_are_parsed(serve) -> None:
    server = serve([
        (200, {}, text_completion('```json\n{\n  "name": "read",\n  "arguments": {"path": "model.py"}\n}\n```')),
        (200, {}, text_completion('Plan:\n```python\nconfig = {"name": "x", "arguments": 1}\n```\nNext I build.')),
        (200, {}, text_completion('```json\n{"name": "write", "arguments": {"path": "a.cu", "content": "__global',
                                  finish="length")),
    ])
    policy = policy_for(server.url, [])
    first = policy.query(MESSAGES, TOOLS)
    assert [c.name for c in first.tool_calls] == ["read"] and first.content == ""
    assert first.tool_calls[0].parsed_arguments() == {"path": "model.py"}
    second = policy.query(MESSAGES, TOOLS)  # code that merely contains such keys is not a call
    assert second.tool_calls == () and "config = " in second.content
    third = policy.query(MESSAGES, TOOLS)  # cut off inside the block: a call the environment will reject
    assert [c.name for c in third.tool_calls] == ["write"] and third.finish_reason == "length"
    assert isinstance(third.tool_calls[0].arguments, str)


def test_json_block_with_arguments_beside_a_known_tool_name(serve) -> None:
    server = serve([(200, {}, text_completion('```json\n{"name": "read", "path": "model.py"}\n```')),
                    (200, {}, text_completion('```json\n{"name": "grep", "pattern": "x"}\n```'))])
    policy = policy_for(server.url, [])
    (call,) = policy.query(MESSAGES, TOOLS).tool_calls  # TOOLS offers read
    assert call.name == "read" and call.parsed_arguments() == {"path": "model.py"}
    assert policy.query(MESSAGES, TOOLS).tool_calls == ()  # grep is not offered: left as text


def test_the_task_composer_speaks_through_the_same_client(serve) -> None:
    """`synth`'s composer and the agent's policy share one client: the same retries, the same errors."""
    from cuda_agent.synth import OpenAIChatClient

    server = serve([(503, {"Retry-After": "0"}, "busy"), (200, {}, completion("```python\nclass Model: pass\n```")),
                    (404, {}, {"error": {"message": "no such model"}})])
    client = OpenAIChatClient(server.url, "composer-model", max_retries=1)
    client.endpoint.sleep = lambda _: None
    assert client.chat([{"role": "user", "content": "fuse relu and gelu"}]) == "```python\nclass Model: pass\n```"
    assert server.requests[-1]["model"] == "composer-model" and server.requests[-1]["max_tokens"] == 2048
    with pytest.raises(PolicyError, match="HTTP 404.*no such model"):
        client.chat([{"role": "user", "content": "again"}])
    assert len(server.requests) == 3


def test_the_sdk_is_imported_only_by_a_request() -> None:
    """``import cuda_agent`` and its packages never need the openai SDK; only talking to an endpoint does."""
    script = ("import sys, cuda_agent, cuda_agent.agent, cuda_agent.evaluator, cuda_agent.synth, cuda_agent.llm_client\n"
              "assert 'openai' not in sys.modules, 'imported openai'\nprint('ok')")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2] / "src")})
    assert done.stdout.strip() == "ok", done.stderr[-2000:]
