"""Tools: schemas from signatures, confinement to the workspace, protected files, exact edits, trimming, and
invalid calls that become error observations (and count as turns) instead of crashing."""
from __future__ import annotations

import json
import os

import pytest

from cuda_agent.agent import AgentEnv, ToolCall, ToolRegistry, trim
from cuda_agent.agent.files import ToolError, WorkspaceFiles
from cuda_agent.sandbox import TrustedLocalShell
from cuda_agent.workspace import PROTECTED_ROOTS


def test_every_tool_has_a_schema_built_from_its_signature() -> None:
    schemas = {s["function"]["name"]: s["function"] for s in ToolRegistry().schemas()}
    assert set(schemas) == {"bash", "read", "write", "edit", "multi_edit", "glob", "grep", "build", "verify",
                            "profile", "submit"}
    edit = schemas["edit"]["parameters"]
    assert edit["required"] == ["path", "old_string", "new_string"]
    assert edit["properties"]["replace_all"] == {"type": "boolean", "default": False,
                                                 "description": "replace every occurrence instead of requiring exactly one."}
    assert schemas["bash"]["parameters"]["properties"]["timeout"]["type"] == "integer"
    assert schemas["multi_edit"]["parameters"]["properties"]["edits"]["type"] == "array"
    assert schemas["submit"]["parameters"]["properties"] == {}
    assert all(s["description"] for s in schemas.values())
    json.dumps(schemas)


def test_paths_cannot_leave_the_workspace(tmp_path) -> None:
    root = tmp_path / "ws"
    (root / "kernels").mkdir(parents=True)
    (tmp_path / "secret.txt").write_text("do not read")
    os.symlink(tmp_path / "secret.txt", root / "kernels" / "link.cu")
    files = WorkspaceFiles(TrustedLocalShell(root, protected=PROTECTED_ROOTS))
    for bad in ("../secret.txt", str(tmp_path / "secret.txt"), "kernels/link.cu", "kernels/../../secret.txt"):
        with pytest.raises(ToolError, match="outside the workspace"):
            files.read(bad)
        with pytest.raises(ToolError, match="outside the workspace"):
            files.write(bad, "x")
    assert (tmp_path / "secret.txt").read_text() == "do not read"
    with pytest.raises(ToolError):
        files.glob("../*")


def test_protected_files_are_read_only(files_env: AgentEnv, task) -> None:
    files_env.reset(task)
    for path in ("model.py", "binding.py", "include/cuda_agent.h", "SKILL.md", ".cuda_agent/manifest.json"):
        obs, *_ , info = files_env.step(ToolCall("write", {"path": path, "content": "pwned"}))
        assert not info.ok and "protected" in obs, path
    obs, *_ , info = files_env.step(ToolCall("edit", {"path": "model.py", "old_string": "Model", "new_string": "M"}))
    assert "protected" in obs
    assert files_env.files is not None
    assert "torch.sigmoid" in files_env.files.read("model.py")
    from cuda_agent.workspace import Workspace

    Workspace.open(files_env.workspace).verify_protected()


def test_edit_requires_a_unique_exact_match(tmp_path) -> None:
    files = WorkspaceFiles(TrustedLocalShell(tmp_path, protected=PROTECTED_ROOTS))
    files.write("kernels/a.cu", "int a = 1;\nint b = 1;\n")
    with pytest.raises(ToolError, match="occurs 2 times"):
        files.edit("kernels/a.cu", "= 1;", "= 2;")
    with pytest.raises(ToolError, match="not found"):
        files.edit("kernels/a.cu", "int c", "int d")
    files.edit("kernels/a.cu", "int b = 1;", "int b = 2;")
    assert (tmp_path / "kernels/a.cu").read_text() == "int a = 1;\nint b = 2;\n"
    files.edit("kernels/a.cu", "int", "long", replace_all=True)
    assert (tmp_path / "kernels/a.cu").read_text() == "long a = 1;\nlong b = 2;\n"


def test_multi_edit_is_all_or_nothing(tmp_path) -> None:
    files = WorkspaceFiles(TrustedLocalShell(tmp_path, protected=PROTECTED_ROOTS))
    files.write("model_new.py", "alpha\nbeta\ngamma\n")
    with pytest.raises(ToolError, match="edit 2 of 2.*no edit was applied"):
        files.multi_edit("model_new.py", [{"old_string": "alpha", "new_string": "A"},
                                          {"old_string": "missing", "new_string": "B"}])
    assert (tmp_path / "model_new.py").read_text() == "alpha\nbeta\ngamma\n"
    files.multi_edit("model_new.py", [{"old_string": "alpha", "new_string": "A"},
                                      {"old_string": "A\nbeta", "new_string": "A\nB"}])
    assert (tmp_path / "model_new.py").read_text() == "A\nB\ngamma\n"


def test_read_glob_grep(tmp_path) -> None:
    files = WorkspaceFiles(TrustedLocalShell(tmp_path, protected=PROTECTED_ROOTS))
    files.write("kernels/a.cu", "\n".join(f"line {i}" for i in range(1, 11)))
    files.write("kernels/b.cuh", "__global__ void k();\n")
    assert files.read("kernels/a.cu", offset=3, limit=2).splitlines() == ["3\tline 3", "4\tline 4",
                                                                          "[... 6 more lines; read again with offset=5]"]
    assert files.glob("kernels/*") == "kernels/a.cu\nkernels/b.cuh"
    assert files.grep(r"__global__", include="*.cuh") == "kernels/b.cuh:1: __global__ void k();"
    assert files.grep("line 1\\d") == "kernels/a.cu:10: line 10"
    with pytest.raises(ToolError, match="bad regular expression"):
        files.grep("(")


def test_trim_keeps_head_and_tail_with_a_note() -> None:
    text = "".join(f"{i:04d}\n" for i in range(2000))
    out = trim(text, 1000)
    assert out.startswith("0000\n") and out.endswith("1999\n")
    assert "output trimmed" in out and f"of {len(text)} characters" in out
    assert len(out) < 1300
    assert trim("short", 1000) == "short"


def test_long_tool_output_is_trimmed_to_the_budget(files_env: AgentEnv, task) -> None:
    files_env.config = type(files_env.config)(**{**files_env.config.__dict__, "output_chars": 500})
    files_env.reset(task)
    obs, *_ = files_env.step(ToolCall("bash", {"command": "seq 1 5000"}))
    assert "output trimmed" in obs and obs.startswith("1\n2\n") and obs.rstrip().endswith("5000")
    assert len(obs) < 800


@pytest.mark.parametrize("call, expected", [
    (ToolCall("rm_rf", {}), "unknown tool 'rm_rf'"),
    (ToolCall("write", '{"path": "kernels/a.cu", "content": '), "not valid JSON"),
    (ToolCall("write", '["kernels/a.cu"]'), "must be a JSON object"),
    (ToolCall("write", {"path": "kernels/a.cu"}), "missing required argument(s) content"),
    (ToolCall("read", {"path": "model.py", "offset": "3"}), "'offset' must be integer"),
    (ToolCall("read", {"path": "model.py", "colour": "red"}), "unknown argument(s) colour"),
    (ToolCall("", "{}"), "no tool call"),
    ({"function": {"name": "read", "arguments": "{bad"}, "id": "x"}, "not valid JSON"),
])
def test_invalid_calls_become_error_observations_and_count(files_env: AgentEnv, task, call, expected) -> None:
    files_env.reset(task)
    obs, reward, terminated, truncated, info = files_env.step(call)
    assert obs.startswith("error:") and expected in obs
    assert (reward, terminated, truncated) == (0.0, False, False)
    assert info.ok is False and files_env.turns == 1
    obs, *_ , info = files_env.step(ToolCall("read", {"path": "model.py"}))
    assert info.ok and "class Model" in obs and files_env.turns == 2


def test_bash_timeout_kills_the_command(files_env: AgentEnv, task) -> None:
    files_env.reset(task)
    obs, *_ = files_env.step(ToolCall("bash", {"command": "echo start; sleep 30; echo never", "timeout": 1}))
    assert "start" in obs and "never" not in obs and "killed after 1 s" in obs


def test_bash_sees_no_api_keys(files_env: AgentEnv, task, monkeypatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-secret")
    files_env.reset(task)
    obs, *_ = files_env.step(ToolCall("bash", {"command": "env"}))
    assert "sk-test-secret" not in obs


def test_profile_breakdown_reaches_the_evaluator_config_and_the_agent_reads_it(files_env: AgentEnv, task) -> None:
    """`profile --breakdown` (tool argument or typed in bash) asks the evaluator for per-kernel times; other
    arguments are refused with what the command takes, instead of being ignored."""
    from cuda_agent.agent.backend import render_result
    from cuda_agent.evaluator import EvalConfig, EvalResult

    schema = {s["function"]["name"]: s["function"] for s in ToolRegistry().schemas()}["profile"]
    assert schema["parameters"]["properties"]["breakdown"]["type"] == "boolean"
    assert EvalConfig.for_kind("profile", None, breakdown=True).kernel_breakdown is True
    assert EvalConfig.for_kind("profile", None).kernel_breakdown is False
    assert EvalConfig.for_kind("verify", None, breakdown=True).kernel_breakdown is False

    files_env.reset(task)
    text, code = files_env.handle_command("verify", ["--breakdown"])
    assert code == 2 and "verify takes no arguments" in text
    text, code = files_env.handle_command("profile", ["--fast"])
    assert code == 2 and "--breakdown" in text
    text, code = files_env.handle_command("profile", ["--breakdown"])
    assert "unknown argument" not in text and "build FAILED" in text  # accepted: it went on to build (no kernels yet)

    rows = [{"name": "relu_vec4(float4 const*, float4*, long)", "total_us": 3000.0, "calls": 1},
            {"name": "relu_scalar", "total_us": 1000.0, "calls": 2}]
    compiled = [{"name": "triton_poi_fused_relu_0", "total_us": 2900.0, "calls": 1}]
    shown = render_result(EvalResult(task_id="t", stage="timed", correct=True, kernel_breakdown=tuple(rows),
                                     compile_kernel_breakdown=tuple(compiled)), "profile")
    assert "your kernels per call" in shown
    assert " 75.0%    3000.00     1  other             relu_vec4(float4 const*, float4*, long)" in shown
    assert " 25.0%    1000.00     2  other             relu_scalar" in shown
    ours, theirs = shown.split("torch.compile's kernels per call")
    assert "triton_poi_fused_relu_0" in theirs and "triton" not in ours
    assert "100.0%    2900.00     1  pytorch           triton_poi_fused_relu_0" in theirs
