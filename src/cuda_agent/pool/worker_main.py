"""The GPU worker process: ``python -m cuda_agent.pool.worker_main``, pinned to one GPU by its environment.

Protocol (JSON lines): it prints ``{"op": "ready", ...}`` once, then for each ``{"op": "eval", "job": {...}}`` on
stdin prints one ``{"op": "result", ...}``; ``{"op": "stop"}`` or end of input ends it. Its real stdout is kept
for the protocol; anything else printed goes to stderr. After a result that shows a broken CUDA context it exits,
and the pool starts a fresh worker. It dies with its parent (PR_SET_PDEATHSIG), so no orphan keeps a GPU.
"""
from __future__ import annotations

import base64
import ctypes
import json
import os
import pickle
import signal
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any, TextIO

EVALUATOR_ENV = "CUDA_AGENT_POOL_EVALUATOR"
HEALTH_ENV = "CUDA_AGENT_POOL_HEALTH_CHECK"
_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    try:
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):
        pass


def _send(out: TextIO, message: dict[str, Any]) -> None:
    out.write(json.dumps(message, default=str) + "\n")
    out.flush()


def main() -> int:
    protocol = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    _die_with_parent()
    from cuda_agent.pool.evaluators import is_fatal_gpu_error
    from cuda_agent.pool.job import EvalJob

    evaluator = pickle.loads(base64.b64decode(os.environ[EVALUATOR_ENV]))
    gpu = os.environ.get("CUDA_VISIBLE_DEVICES", "")
    problem = evaluator.health_check() if os.environ.get(HEALTH_ENV) == "1" else None
    if problem is None:
        try:
            evaluator.prepare()
        except Exception as exc:  # noqa: BLE001 - reported to the pool as an unhealthy worker
            problem = f"the evaluator could not prepare: {type(exc).__name__}: {exc}"
    _send(protocol, {"op": "ready", "pid": os.getpid(), "gpu": gpu, "healthy": problem is None, "reason": problem})
    if problem is not None:
        return 3
    for line in sys.stdin:
        message = json.loads(line)
        if message.get("op") != "eval":
            break
        job = EvalJob.from_dict(message["job"])
        result: dict[str, Any] | None = None
        error: str | None = None
        started = time.time()
        try:
            if getattr(evaluator, "needs_workdir", True):
                with tempfile.TemporaryDirectory(prefix="cuda-agent-job-") as tmp:
                    result = evaluator.evaluate(job, Path(tmp))
            else:
                result = evaluator.evaluate(job, Path(tempfile.gettempdir()))
        except Exception as exc:  # noqa: BLE001 - any evaluator failure is reported, never fatal to the pool
            error = f"{type(exc).__name__}: {exc}\n{traceback.format_exc()[-2000:]}"
        finished = time.time()
        broken = result is not None and is_fatal_gpu_error(result)
        _send(protocol, {"op": "result", "job_id": job.job_id, "result": result, "error": error, "started": started,
                         "finished": finished, "broken": broken, "pid": os.getpid(), "gpu": gpu})
        if broken:
            return 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
