"""Whole episodes with the scripted policy, through the real sandbox (bubblewrap where it works, else the local
runner) and real nvcc builds; verification in the documented no-GPU mode."""
from __future__ import annotations

from pathlib import Path

import pytest

from cuda_agent.agent import ScriptedPolicy, StepInfo, Trajectory, run_episode
from cuda_agent.agent.backend import SKIPPED_MESSAGE
from cuda_agent.agent.examples import example_dir, example_script_path

pytestmark = pytest.mark.slow


def test_bundled_example_episode(make_env, task, tmp_path: Path) -> None:
    env = make_env(workspace_root=tmp_path / "episodes")
    seen: list[StepInfo] = []
    result = run_episode(task, ScriptedPolicy.from_file(example_script_path()), env,
                         trajectory=tmp_path / "t.jsonl", progress=seen.append)
    assert result.reason == "submitted" and result.turns == 10
    assert [i.tool for i in seen] == ["read", "write", "write", "bash", "verify", "profile", "write", "build",
                                      "profile", "submit"]
    assert all(i.ok for i in seen), [i.error for i in seen if not i.ok]
    assert seen[3].build is not None and seen[3].build.ok and seen[7].build is not None and seen[7].build.ok
    assert [e.stage for e in result.evaluations] == ["skipped"] * 4
    assert result.reward == 0.0 and result.reward_available is False and result.best is None
    assert seen[-1].end is not None and seen[-1].end.reason == "submitted"
    fast = (example_dir() / "scaled_silu_fast.cu").read_text()
    assert result.workspace is not None
    assert (result.workspace / "kernels" / "scaled_silu.cu").read_text() == fast

    saved = Trajectory.load(tmp_path / "t.jsonl")
    assert len(saved.turns) == 9 and saved.end is not None and saved.end["reason"] == "submitted"
    messages = saved.messages()
    assert [m.role for m in messages[:2]] == ["system", "user"] and "SKILL" in messages[0].content
    assert sum(m.role == "assistant" for m in messages) == 9 and sum(m.role == "tool" for m in messages) == 10
    bash_result = saved.turns[2]["results"][0]
    assert "build OK" in bash_result["observation"]
    assert SKIPPED_MESSAGE in saved.turns[3]["results"][0]["observation"]


def test_compiler_errors_reach_the_agent_with_file_and_line(make_env, task, tmp_path: Path) -> None:
    broken = '#include "cuda_agent.h"\n__global__ void k(float* x) { x[0] = undefined_name; }\n'
    script = ScriptedPolicy.from_steps([
        {"name": "write", "arguments": {"path": "kernels/broken.cu", "content": broken}},
        {"name": "build"},
        {"name": "verify"},
        {"name": "bash", "arguments": {"command": "cuda-agent profile; echo exit=$?"}},
        {"name": "submit"},
    ])
    seen: list[StepInfo] = []
    result = run_episode(task, script, make_env(), trajectory=tmp_path / "t.jsonl", progress=seen.append)
    observations = [r["observation"] for t in Trajectory.load(tmp_path / "t.jsonl").turns for r in t["results"]]
    assert "build FAILED" in observations[1] and "broken.cu:2" in observations[1]
    assert "undefined_name" in observations[1]
    assert "build FAILED" in observations[2] and "exit=1" in observations[3]
    assert [e.stage for e in result.evaluations] == ["build_failed"] * 3
    assert result.reason == "submitted" and result.best is None
    assert result.reward == -1.0 and result.reward_available, "a failed build is -1 even without a GPU"


def test_agent_can_edit_tool_written_files_from_bash(make_env, task) -> None:
    env = make_env()
    env.reset(task)
    env.step({"name": "write", "arguments": {"path": "kernels/notes/a.txt", "content": "one\n"}})
    obs, *_ = env.step({"name": "bash", "arguments": {"command": "sed -i s/one/two/ kernels/notes/a.txt && "
                                                                 "echo three >> kernels/notes/a.txt && cat kernels/notes/a.txt"}})
    assert "two\nthree" in obs
    assert env.files is not None and env.files.read("kernels/notes/a.txt").split("\n")[0].endswith("two")


def test_close_frees_a_temporary_workspace(make_env, task) -> None:
    env = make_env()
    env.reset(task)
    workspace = env.workspace
    assert workspace is not None and workspace.is_dir()
    env.close()
    assert not workspace.exists()
