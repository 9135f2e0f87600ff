"""Crash and resume: a real episode process killed with SIGKILL mid-episode, then resumed from its trajectory."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cuda_agent.agent import AgentEnv, EnvConfig, LocalBackend, ScriptedPolicy, Trajectory, run_episode
from cuda_agent.agent.examples import example_dir
from cuda_agent.agent.trajectory import TrajectoryError

pytestmark = pytest.mark.slow

_CHILD = """
import sys
from pathlib import Path
from cuda_agent.agent import AgentEnv, EnvConfig, LocalBackend, ScriptedPolicy, run_episode
from cuda_agent.agent.examples import example_task
script, trajectory, root, cache, sandbox = sys.argv[1:6]
env = AgentEnv(EnvConfig(sandbox=sandbox, verify="skip", workspace_root=Path(root)),
               LocalBackend(verify="skip", cache_dir=Path(cache), arch="90"))
run_episode(example_task(), ScriptedPolicy.from_file(script), env, trajectory=Path(trajectory))
"""


def _script(tmp_path: Path) -> Path:
    steps = [
        {"name": "write", "arguments": {"path": "kernels/scaled_silu.cu",
                                        "content": (example_dir() / "scaled_silu_slow.cu").read_text()}},
        {"name": "write", "arguments": {"path": "model_new.py",
                                        "content": (example_dir() / "scaled_silu_model_new.py.txt").read_text()}},
        {"name": "build"},
    ]
    steps += [{"name": "bash", "arguments": {"command": f"echo step{n} >> log.txt; sleep 0.4"}} for n in range(10)]
    steps += [{"name": "verify"}, {"name": "submit"}]
    path = tmp_path / "script.json"
    path.write_text(json.dumps(steps))
    return path


def _turn_records(path: Path) -> int:
    if not path.exists():
        return 0
    return sum(1 for line in path.read_text().splitlines() if '"type": "turn"' in line)


def test_resume_after_sigkill(tmp_path: Path, task, build_cache: Path, sandbox_mode: str) -> None:
    script, trajectory, root = _script(tmp_path), tmp_path / "t.jsonl", tmp_path / "episodes"
    env_vars = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(__file__).parents[2] / "src"),
                                                            os.environ.get("PYTHONPATH", "")])}
    child = subprocess.Popen([sys.executable, "-c", _CHILD, str(script), str(trajectory), str(root), str(build_cache),
                              sandbox_mode], env=env_vars, start_new_session=True)
    deadline = time.monotonic() + 120
    while _turn_records(trajectory) < 6 and time.monotonic() < deadline and child.poll() is None:
        time.sleep(0.05)
    assert child.poll() is None, "the episode ended before it could be killed"
    os.killpg(child.pid, signal.SIGKILL)
    child.wait()
    killed_at = _turn_records(trajectory)
    assert 6 <= killed_at < 15
    before = Trajectory.load(trajectory)
    assert before.end is None
    workspace = Path(before.header["workspace"])
    assert (workspace / "kernels" / "scaled_silu.cu").is_file()

    with open(trajectory, "ab") as handle:  # a torn record, as a kill during a write would leave
        handle.write(b'{"type": "turn", "time": "20')

    env = AgentEnv(EnvConfig(sandbox=sandbox_mode, verify="skip", workspace_root=root),
                   LocalBackend(verify="skip", cache_dir=build_cache, arch="90"))
    result = run_episode(task, ScriptedPolicy.from_file(script), env, trajectory=trajectory, resume=True)
    assert result.reason == "submitted" and result.turns == 15 and result.workspace == workspace

    after = Trajectory.load(trajectory)
    assert len(after.turns) == 15 and after.end is not None
    assert [t["env"]["turns"] for t in after.turns] == list(range(1, 16))
    calls = [m.tool_calls[0].name for m in after.messages() if m.role == "assistant"]
    assert calls == ["write", "write", "build"] + ["bash"] * 10 + ["verify", "submit"]
    steps = (workspace / "log.txt").read_text().split()
    assert steps[-1] == "step9" and sorted(set(steps)) == sorted(f"step{n}" for n in range(10))
    with pytest.raises(TrajectoryError, match="already ended"):
        run_episode(task, ScriptedPolicy.from_file(script), env, trajectory=trajectory, resume=True)


def test_resume_refuses_another_task(tmp_path: Path, task, files_env) -> None:
    from dataclasses import replace

    trajectory = tmp_path / "t.jsonl"
    run_episode(task, ScriptedPolicy.from_steps([{"name": "read", "arguments": {"path": "model.py"}}]), files_env,
                trajectory=trajectory)
    lines = trajectory.read_text().splitlines()
    trajectory.write_text("\n".join(lines[:-1]) + "\n")  # drop the end record: an unfinished episode
    other = replace(task, id="other", code=task.code.replace("2.0", "3.0"))
    with pytest.raises(TrajectoryError, match="saved for task"):
        run_episode(other, ScriptedPolicy.from_steps([]), files_env, trajectory=trajectory, resume=True)
