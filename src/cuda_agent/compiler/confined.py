"""`build_confined`: a workspace build whose compiler runs in the sandbox. Every caller that builds model-written
kernels (the evaluator, the agent's backend, the build pools, `cuda-agent build`) goes through here.

Why: a kernel file is the agent's text, and the compiler reads whatever it names (``#include "/etc/shadow"``, or
another episode's file, would come back in the error messages). Confined, the compiler sees the toolchain, the
workspace read-only and a private staging folder; the trusted caller moves each object into the shared cache with
its SHA-256 (`build.builder`), so no confined process ever writes the cache another build reads.
"""
from __future__ import annotations

import tempfile
from pathlib import Path

from cuda_agent.compiler.builder import BuildResult, build_workspace
from cuda_agent.sandbox import sandboxed_runner
from cuda_agent.sandbox.process import require_sandbox


def build_confined(root: str | Path, *, arch: str | None = None, cache_dir: str | Path | None = None,
                   jobs: int | None = None, allow_unsandboxed: bool = False) -> BuildResult:
    """`build_workspace` with the compiler confined. Raises SandboxError when no sandbox can be made here, unless
    ``allow_unsandboxed`` (the explicit opt-out for code you wrote yourself), and BuildError when the toolchain is
    missing; compiler errors come back in the result, as always."""
    root = Path(root).resolve()
    if not require_sandbox(allow_unsandboxed):
        return build_workspace(root, arch=arch, cache_dir=cache_dir, jobs=jobs)
    with tempfile.TemporaryDirectory(prefix="cuda-agent-stage-") as staging:
        runner = sandboxed_runner(root, extra_rw=[staging], readonly_workspace=True)
        return build_workspace(root, arch=arch, cache_dir=cache_dir, jobs=jobs, runner=runner, staging=staging)
