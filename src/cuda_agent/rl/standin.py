"""The stand-in backend (``eval.backend: {kind: stand_in}``): launch and test every RL stage on a machine without a GPU.

It is the project's one stand-in evaluator, `cuda_agent.pool.StandInEvaluator` (what ``cuda-agent serve --standin``
and ``cuda-agent bench offline --standin`` run), behind the pool interface in this process, so an episode or a
warm-up reward goes through exactly the code a real pool's result does (`PoolBackend`, `EvalResult`). Its verdict
is deterministic and is NOT an evaluation (nothing is compiled or run): the paper's -1/1/2/3 from visible features
of the solution (no ModelNew -1; ModelNew 1; a ``__global__`` kernel registered with ``CA_EXPORT`` 2; one that also
uses shared memory or vector loads 3; see `StandInEvaluator`), so a CPU smoke run's rewards vary and PPO's
advantages are not all zero. Every result says "stand-in" in its reason and notes; a response without a solution
gets -1 from the reward and the environment, as with the real evaluator. Never for real training.

Two differences from the evaluator in a pool worker, both because it runs inside the trainer's process:

- Builds are reported OK without compiling (no CUDA toolkit needed).
- A ``standin.json`` in the solution is ignored: the policy writes the workspace, and a ``{"fault": "crash"}`` there
  would make a pool worker SIGSEGV, here the trainer. Faults that return a result can be set for every job
  (``{kind: stand_in, fault: broken}``); ``crash`` and ``hang`` are refused.
"""
from __future__ import annotations

from concurrent.futures import Future
from dataclasses import replace
from pathlib import Path
from typing import Any

from cuda_agent.compiler import BuildResult
from cuda_agent.errors import ConfigError
from cuda_agent.evaluator.result import EvalResult
from cuda_agent.pool import EvalJob, StandInEvaluator
from cuda_agent.pool.evaluators import STANDIN_FILE
from cuda_agent.pool.job import SolutionSnapshot

STAND_IN_NOTE = "stand-in backend (no GPU): nothing was compiled; the stand-in evaluator scores visible features"
IN_PROCESS_FAULTS = ("broken", "error")


class StandInPool:
    """`StandInEvaluator` with a pool's ``submit`` / ``submit_build``, evaluating at once in this process.

    ``seconds``: the evaluator's sleep per job (default 0: no simulated GPU time); ``fault``: ``broken`` (an
    illegal-memory-access result) or ``error`` (the evaluator raises) for every job. Raises `ConfigError` for any
    other fault."""

    def __init__(self, seconds: float = 0.0, fault: str | None = None) -> None:
        if fault is not None and fault not in IN_PROCESS_FAULTS:
            raise ConfigError(f"stand_in backend: fault must be one of {', '.join(IN_PROCESS_FAULTS)} in this "
                              f"process, got {fault!r}; crash and hang need a pool worker (cuda-agent serve --standin)")
        self.evaluator = StandInEvaluator(seconds=seconds, fault=fault)

    def submit(self, job: EvalJob) -> Future[EvalResult]:
        future: Future[EvalResult] = Future()
        try:
            plain = self.evaluator.evaluate(_without_fault_requests(job), Path("."))
            future.set_result(EvalResult.from_dict(plain))
        except Exception as exc:  # the simulated evaluator failure reaches the caller as a pool's would
            future.set_exception(exc)
        return future

    def submit_build(self, workspace: Any) -> Future[BuildResult]:
        future: Future[BuildResult] = Future()
        future.set_result(BuildResult(ok=True, library=None, seconds=0.0, log=STAND_IN_NOTE))
        return future


def _without_fault_requests(job: EvalJob) -> EvalJob:
    files = {path: content for path, content in job.solution.files if Path(path).name != STANDIN_FILE}
    return replace(job, solution=SolutionSnapshot.from_files(files, job.solution.kind))
