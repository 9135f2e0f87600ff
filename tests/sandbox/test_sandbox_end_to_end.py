"""A real workspace (KernelBench level 1, ReLU), the agent's commands in the sandbox, `cuda-agent build` through the
broker to a real build whose nvcc runs in a sandbox too."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from cuda_agent.sandbox import Broker, BrokerReply, Sandbox, sandboxed_runner
from cuda_agent.locations import kernelbench_root
from cuda_agent.workspace import PROTECTED_ROOTS
from helpers import RELU_KERNEL

RELU = RELU_KERNEL


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("nvcc") is None and not Path("/usr/local/cuda/bin/nvcc").exists(),
                    reason="needs nvcc")
def test_agent_commands_build_through_the_broker(tmp_path: Path, bwrap_ready: None) -> None:
    root = kernelbench_root()
    if root is None:
        pytest.skip("KernelBench data not found (set CUDA_AGENT_KERNELBENCH)")
    from cuda_agent.compiler import build_workspace
    from cuda_agent.tasks import load_tasks
    from cuda_agent.workspace import create_workspace

    task = list(load_tasks(str(root / "level1" / "19_ReLU.py"), validate=False))[0]
    ws = create_workspace(task, tmp_path / "episode-0")
    cache = tmp_path / "cache"

    def handler(command: str, args: list[str], workspace: Path) -> BrokerReply:
        assert command == "build"
        result = build_workspace(workspace, arch="sm_90", cache_dir=cache,
                                 runner=sandboxed_runner(workspace, extra_rw=[cache]))
        text = f"build ok ({len(result.compiled)} compiled)" if result.ok else result.diagnostics
        return BrokerReply(text, 0 if result.ok else 1)

    with Broker(handler) as broker, Sandbox(ws.root, protected=PROTECTED_ROOTS, broker=broker) as sb:
        sb.write_file("kernels/relu.cu", RELU)
        good = sb.exec("cuda-agent build", timeout=300)
        tamper = sb.exec("echo x >> model.py; rm -f binding.py; echo '#include \"/etc/shadow\"' > kernels/x.cu; "
                         "cuda-agent build", timeout=300)
    assert good.returncode == 0 and good.stdout.startswith("build ok"), good.output
    assert tamper.returncode == 1 and "shadow" in tamper.stdout and "canary" not in tamper.stdout
    ws.verify_protected()
