"""Build pool and exclusive GPU pool: local backend (default), Ray backend, and the HTTP service's client.

Importing this package imports neither Ray nor torch.
"""
from cuda_agent.pool.base import JobTiming, Pool, PoolStats
from cuda_agent.pool.builds import BuildPool
from cuda_agent.pool.evaluators import FAULTS, Evaluator, RealEvaluator, StandInEvaluator, is_fatal_gpu_error
from cuda_agent.pool.job import JOB_KINDS, EvalJob, SolutionSnapshot, new_job_id
from cuda_agent.pool.local import LocalPool, detect_gpus

__all__ = [
    "FAULTS",
    "JOB_KINDS",
    "BuildPool",
    "EvalJob",
    "Evaluator",
    "JobTiming",
    "LocalPool",
    "Pool",
    "PoolClient",
    "PoolStats",
    "RayPool",
    "RealEvaluator",
    "SolutionSnapshot",
    "StandInEvaluator",
    "detect_gpus",
    "is_fatal_gpu_error",
    "new_job_id",
    "resume_run",
    "run_jobs",
]


def __getattr__(name: str):  # noqa: ANN202 - lazy exports keep `import cuda_agent.pool` light
    if name == "RayPool":
        from cuda_agent.pool.ray_pool import RayPool

        return RayPool
    if name == "PoolClient":
        from cuda_agent.pool.client import PoolClient

        return PoolClient
    if name in ("run_jobs", "resume_run"):
        from cuda_agent.pool import runs

        return getattr(runs, name)
    raise AttributeError(f"module 'cuda_agent.pool' has no attribute {name!r}")
