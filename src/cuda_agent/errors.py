"""One error root for everything cuda-agent raises, with narrow subclasses.

Every message says what went wrong, where, and what to do about it: these texts reach users and, through tool
observations, the agent itself.
"""
from __future__ import annotations


class CudaAgentError(Exception):
    """Root of all cuda-agent errors."""


class ConfigError(CudaAgentError):
    """A setting is missing or invalid (a flag, an environment variable, a config file)."""


class TaskError(CudaAgentError):
    """A task file or task set cannot be loaded: bad syntax, missing functions, a failing import or get_inputs."""


class WorkspaceError(CudaAgentError):
    """A workspace is missing, malformed, or cannot be created."""


class ProtectedFileError(WorkspaceError):
    """A protected workspace file was changed, removed or added to."""


class BuildError(CudaAgentError):
    """Compiling or linking a workspace's kernels failed; `diagnostics` holds the readable compiler errors."""

    def __init__(self, message: str, diagnostics: str = "", log: str = "") -> None:
        super().__init__(message)
        self.diagnostics = diagnostics
        self.log = log


class VerificationError(CudaAgentError):
    """A candidate could not be verified (not: was found incorrect; that is a result, not an error)."""


class SandboxError(CudaAgentError):
    """The agent sandbox could not be started or a command could not be run in it."""


class PoolError(CudaAgentError):
    """A build or GPU pool failed to accept or finish a job."""


class RequestError(ConfigError):
    """A request to the HTTP service is malformed: a field is missing, mistyped, out of bounds or not finite."""


class StoreError(CudaAgentError):
    """The results store cannot be opened or written."""


class StoreCorruptError(StoreError):
    """The store's database is damaged: not a database, truncated, or its tables are gone."""


class StorePermissionError(StoreError):
    """The store's database (or its folder) cannot be read or written by this user."""


class StoreMissingError(StoreError):
    """The store's database is not where it should be: its folder cannot be made, or it was removed while open."""


class EvalTimeoutError(CudaAgentError):
    """An evaluation, build or command ran past its time limit."""


class PolicyError(CudaAgentError):
    """The policy (an LLM endpoint or a scripted policy) failed to produce a turn."""


class ContextOverflowError(PolicyError):
    """The endpoint rejected the request because the conversation is longer than the model's context window."""
