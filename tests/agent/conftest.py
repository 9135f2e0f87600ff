"""Fixtures for the agent tests: the bundled example task, a session-wide build cache primed by one real nvcc
build (so every episode's build afterwards is a cache hit), and the sandbox mode to use (bubblewrap when it works
here, else the local runner)."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from cuda_agent.agent import AgentEnv, EnvConfig, LocalBackend
from cuda_agent.agent.examples import example_dir, example_task
from cuda_agent.agent.runner import sandbox_available
from cuda_agent.tasks import Task


@pytest.fixture(scope="session")
def task() -> Task:
    return example_task()


@pytest.fixture(scope="session")
def sandbox_mode() -> str:
    return "bwrap" if sandbox_available() else "local"


@pytest.fixture(scope="session")
def slow_kernel() -> str:
    return (example_dir() / "scaled_silu_slow.cu").read_text()


@pytest.fixture(scope="session")
def model_new_text() -> str:
    return (example_dir() / "scaled_silu_model_new.py.txt").read_text()


@pytest.fixture(scope="session")
def build_cache(tmp_path_factory: pytest.TempPathFactory, task: Task, model_new_text: str) -> Path:
    """A build cache holding the example's two kernels, each compiled once by real nvcc."""
    if shutil.which("nvcc") is None and not Path("/usr/local/cuda/bin/nvcc").exists():
        pytest.skip("nvcc is not installed")
    from cuda_agent.compiler import build_workspace
    from cuda_agent.workspace import create_workspace

    cache = tmp_path_factory.mktemp("cache") / "build"  # the layout $CUDA_AGENT_CACHE/build the builder uses
    for name in ("scaled_silu_slow.cu", "scaled_silu_fast.cu"):
        source = (example_dir() / name).read_text()
        ws = create_workspace(task, tmp_path_factory.mktemp("prime") / "ws",
                              solution={"kernels/scaled_silu.cu": source, "model_new.py": model_new_text})
        result = build_workspace(ws.root, cache_dir=cache, arch="90")
        assert result.ok, result.diagnostics
    return cache


@pytest.fixture
def backend(build_cache: Path) -> LocalBackend:
    """Real builds (cached), and verify/profile in the documented no-GPU mode."""
    return LocalBackend(verify="skip", cache_dir=build_cache, arch="90")


@pytest.fixture
def make_env(backend: LocalBackend, sandbox_mode: str):
    envs: list[AgentEnv] = []

    def make(**overrides: object) -> AgentEnv:
        config = EnvConfig(**{"sandbox": sandbox_mode, "verify": "skip", **overrides})  # type: ignore[arg-type]
        env = AgentEnv(config, backend)
        envs.append(env)
        return env

    yield make
    for env in envs:
        env.close()


@pytest.fixture
def files_env(sandbox_mode: str):
    """An environment for tool tests that need no build (no nvcc fixture)."""
    env = AgentEnv(EnvConfig(sandbox="local", verify="skip"), LocalBackend(verify="skip"))
    yield env
    env.close()
