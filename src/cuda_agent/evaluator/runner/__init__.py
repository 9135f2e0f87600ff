"""The candidate side: code that runs inside the sandboxed candidate process.

Standalone on purpose: these modules import only the standard library and torch, never ``cuda_agent``, because the
sandbox shows the candidate's process this folder (copied, read-only) and nothing of the project's source. The
trusted side (``cuda_agent.evaluator.judge``) imports ``channel`` and ``shm`` from here too, so both ends speak one
protocol. The staged copy also holds ``kernel_abi`` (`cuda_agent.kernel_abi`, the workspace kernel ABI, which the
compiler shares), so ``serve`` loads a workspace library from ``.kernel_abi`` there and only there: in this checkout
the runner is run from its staged copy (`cuda_agent.evaluator.judge.candidate.runner_copy`).
"""
