"""cuda-agent: teach and run LLM agents that write CUDA kernels faster than torch.compile.

Importing this package needs no GPU and imports no heavy optional dependency (Ray, verl, transformers).
"""
from __future__ import annotations

from cuda_agent.errors import (
    BuildError,
    ConfigError,
    CudaAgentError,
    EvalTimeoutError,
    PolicyError,
    PoolError,
    ProtectedFileError,
    SandboxError,
    StoreError,
    TaskError,
    VerificationError,
    WorkspaceError,
)

__version__ = "0.1.0"

__all__ = [
    "BuildError",
    "ConfigError",
    "CudaAgentError",
    "EvalTimeoutError",
    "PolicyError",
    "PoolError",
    "ProtectedFileError",
    "SandboxError",
    "StoreError",
    "TaskError",
    "VerificationError",
    "WorkspaceError",
    "__version__",
]
