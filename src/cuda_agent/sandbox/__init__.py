"""The agent sandbox: each episode's commands run under bubblewrap with no network, the workspace read-write,
toolchains read-only, protected files read-only, everything else invisible, and limits; escape attempts are
recorded. ``cuda-agent build|verify|profile|submit`` inside reach the host through a `Broker`. `TrustedLocalShell` has
the same verbs and protocol without any confinement, for trusted use only."""
from cuda_agent.sandbox._limits import ExecResult, SandboxLimits, Violation
from cuda_agent.sandbox._probe import check_sandbox, sandbox_available
from cuda_agent.sandbox.broker import Broker, BrokerReply
from cuda_agent.sandbox.overhead import measure_overhead_ms
from cuda_agent.sandbox.runner import BUILD_LIMITS, sandboxed_runner
from cuda_agent.sandbox.sandbox import Sandbox
from cuda_agent.sandbox.trusted_local import TrustedLocalShell

__all__ = [
    "BUILD_LIMITS",
    "Broker",
    "BrokerReply",
    "ExecResult",
    "Sandbox",
    "SandboxLimits",
    "TrustedLocalShell",
    "Violation",
    "check_sandbox",
    "measure_overhead_ms",
    "sandbox_available",
    "sandboxed_runner",
]
