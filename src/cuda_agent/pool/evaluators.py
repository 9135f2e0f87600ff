"""What a GPU worker runs for each job: the real evaluator, or the stand-in (a feature score: nothing compiled or run).

Both run inside a pool worker process (pinned to one GPU by ``CUDA_VISIBLE_DEVICES``), travel there pickled, and
return the result as a plain dict in `EvalResult.to_dict()` form: the worker never needs to import torch for the
stand-in, so 64 stand-in workers start in a second.
"""
from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from cuda_agent.evaluator.reward_schedule import REWARD_INCORRECT, continuous_reward, discrete_reward
from cuda_agent.pool.job import SINGLE_FILE_NAME, EvalJob

FAULTS = ("crash", "hang", "broken", "error")
STANDIN_FILE = "standin.json"

_FATAL_GPU_PATTERNS = (
    "illegal memory access",
    "unspecified launch failure",
    "device-side assert",
    "illegal instruction",
    "misaligned address",
    "launch timed out",
    "uncorrectable ecc",
    "cudaerrorillegaladdress",
    "hardware stack error",
    "gpu is lost",
    "cuda error: an illegal",
)


def is_fatal_gpu_error(result: dict[str, Any]) -> bool:
    """True when a result's reason or log shows an error after which a CUDA context is unusable (an illegal memory
    access, a device-side assert, a launch failure): the worker that saw it is replaced before the next job."""
    text = f"{result.get('reason', '')}\n{result.get('log', '')}".lower()
    return any(pattern in text for pattern in _FATAL_GPU_PATTERNS)


@runtime_checkable
class Evaluator(Protocol):
    """Runs one job inside a GPU worker process."""

    def identity(self) -> dict[str, Any]:
        """What distinguishes this evaluator's results (part of the cache key)."""

    def gpu_name(self) -> str:
        """The GPU model the results are for (part of the cache key); called in the pool's process."""

    def evaluate(self, job: EvalJob, workdir: Path) -> dict[str, Any]:
        """Evaluate ``job`` using ``workdir`` (an empty private folder) and return an `EvalResult` dict."""

    def health_check(self) -> str | None:
        """None when the worker's GPU is usable, else the reason it is not (run when a worker is replaced)."""

    def prepare(self) -> None:
        """Warm up inside the worker process before it reports ready (import, start helpers)."""


def query_gpu_names() -> list[str]:
    """GPU model names from nvidia-smi (in CUDA_VISIBLE_DEVICES order is not guaranteed); empty without one."""
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"], capture_output=True,
                             text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return []
    return [line.strip() for line in out.stdout.splitlines() if line.strip()]


_WARM: dict[str, Any] = {}


def _warm_worker() -> Any:
    """This worker process's evaluation fork server, started on first use."""
    if "worker" not in _WARM:
        from cuda_agent.evaluator import WarmWorker

        worker = WarmWorker()
        worker.start()
        _WARM["worker"] = worker
    return _WARM["worker"]


@dataclass(frozen=True)
class RealEvaluator:
    """The real thing: `cuda_agent.evaluator.evaluate` on the worker's GPU, each evaluation in its own process.

    The job's snapshot is written to a private folder first (a workspace is rebuilt from the task, so its protected
    files come from the task, not the agent). ``kind`` sets the config's profiling flags. With ``warm`` (the
    default) the worker keeps the evaluator's fork server (`cuda_agent.evaluator.isolation.WarmWorker`): torch is
    imported once per worker, and each evaluation is still a fresh forked process that alone owns its CUDA context.
    """

    health_timeout_s: float = 120.0
    warm: bool = True

    def identity(self) -> dict[str, Any]:
        return {"evaluator": "real"}

    def prepare(self) -> None:
        """Start the fork server before the first job, so its start-up does not count against a job's deadline."""
        if self.warm:
            _warm_worker()

    def gpu_name(self) -> str:
        names = query_gpu_names()
        return names[0] if names else "no-gpu"

    def evaluate(self, job: EvalJob, workdir: Path) -> dict[str, Any]:
        from cuda_agent.evaluator.config import EvalConfig

        config = EvalConfig.for_kind(job.kind, EvalConfig.from_dict(job.config_dict()))
        solution = job.solution.materialize(job.task, workdir)
        from cuda_agent.evaluator import evaluate

        warm = _warm_worker() if self.warm else None
        return evaluate(job.task, solution, config, worker=warm).to_dict()

    def health_check(self) -> str | None:
        probe = "import torch; x = torch.ones(1 << 20, device='cuda'); torch.cuda.synchronize(); print(float(x.sum()))"
        try:
            out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                                 timeout=self.health_timeout_s)
        except subprocess.TimeoutExpired:
            return f"GPU health probe did not finish within {self.health_timeout_s:.0f} s"
        if out.returncode != 0:
            return f"GPU health probe failed (exit {out.returncode}): {out.stderr.strip()[-500:]}"
        return None


MAX_ORPHANS = 100
ORPHAN_LIFETIME_S = 0.05


def _check_orphans(count: Any) -> None:
    if isinstance(count, bool) or not isinstance(count, int) or not 0 <= count <= MAX_ORPHANS:
        raise ValueError(f"orphans must be a whole number from 0 to {MAX_ORPHANS}, got {count!r}")


def _leave_orphan() -> None:
    """Fork a child that forks a grandchild and exits at once: the grandchild, re-parented to the nearest
    subreaper, lives ORPHAN_LIFETIME_S and exits, a zombie until that subreaper reaps it."""
    child = os.fork()
    if child == 0:
        try:
            if os.fork() == 0:
                os.setsid()
                time.sleep(ORPHAN_LIFETIME_S)
        finally:
            os._exit(0)
    os.waitpid(child, 0)


STANDIN_NOTE = "stand-in: nothing was compiled or run; the reward is a feature score of the solution's text"

_MODEL_NEW = re.compile(r"^class\s+ModelNew\b", re.MULTILINE)
_FAST_MEMORY = re.compile(r"__shared__|\bfloat4\b|\bhalf2\b")

# Feature level -> (made-up speedup over eager, over torch.compile, what the reason says). The reward schedule turns
# them into the paper's 2 (beats eager only) and 3 (beats both); untimed levels have no speedups.
_STANDIN_LEVELS: dict[str, tuple[float | None, float | None, str]] = {
    "no_model_new": (None, None, "the solution defines no ModelNew (no `class ModelNew` at the top level)"),
    "model_new": (None, None, "ModelNew is defined, but no __global__ kernel registered with CA_EXPORT"),
    "kernel": (1.2, 1.0, "a __global__ kernel registered with CA_EXPORT; made-up speedups 1.2x eager, 1.0x compile"),
    "tuned_kernel": (1.5, 1.2, "a __global__ kernel registered with CA_EXPORT that uses shared memory or vector "
                     "loads; made-up speedups 1.5x eager, 1.2x compile"),
}


def standin_level(files: dict[str, bytes], solution_kind: str) -> str:
    """The stand-in's feature level of a solution (a key of ``_STANDIN_LEVELS``), from its text alone.

    ``files`` is a `SolutionSnapshot`'s: a workspace's ``model_new.py`` and ``kernels/*.cu``, or a single file
    (``solution.py``) that holds both ``ModelNew`` and its CUDA source."""
    text = {path: content.decode(errors="replace") for path, content in files.items()}
    if solution_kind == "file":
        model_new = kernels = text.get(SINGLE_FILE_NAME, "")
    else:
        model_new = text.get("model_new.py", "")
        kernels = "\n".join(body for path, body in sorted(text.items()) if path.endswith(".cu"))
    if not _MODEL_NEW.search(model_new):
        return "no_model_new"
    if "__global__" not in kernels or "CA_EXPORT(" not in kernels:
        return "model_new"
    return "tuned_kernel" if _FAST_MEMORY.search(kernels) else "kernel"


@dataclass(frozen=True)
class StandInEvaluator:
    """Stand-in GPU work for CPU tests, CPU smoke runs of RL training, and capacity planning: NOT an evaluation.

    Each job sleeps ``seconds`` (the GPU time it stands for), records where and when it ran, and returns a
    deterministic verdict on the paper's -1/1/2/3 scale read from visible features of the solution's text (nothing
    is compiled or run; every reason and note says "stand-in"). The score gives a CPU RL run a learning signal that
    follows what a real kernel needs, and says nothing about whether the kernel works or is fast:

    - -1, stage ``incorrect``: no ``class ModelNew`` (in ``model_new.py``, or in a single-file solution);
    - 1, stage ``correct``: ModelNew, but no ``.cu`` source (the single file itself for a single-file solution) with a
      ``__global__`` function registered with ``CA_EXPORT``;
    - 2, stage ``timed``: such a kernel (made-up speedups that beat eager PyTorch only);
    - 3, stage ``timed``: such a kernel that also uses shared memory or vector loads (``float4``, ``half2``; made-up
      speedups that beat both eager and ``torch.compile``).

    Rewards come from the reward schedule (`discrete_reward`) applied to the made-up speedups. A ``verify`` job
    times nothing, so a solution with ModelNew gets ``correct``, reward 1, as from the real evaluator.

    A solution may carry ``standin.json`` (``{"seconds": 0.5, "fault": "crash"}``) to change that one job (at the
    solution's top level or under ``kernels/``, where a workspace snapshot keeps it). Faults simulate what real GPU
    work does wrong:

    - ``crash``: the worker process dies by SIGSEGV mid-job (a segfault in a kernel launch, a driver abort);
    - ``hang``: the job never returns (a kernel stuck in an endless loop);
    - ``broken``: the job returns an illegal-memory-access error, after which the worker's CUDA context is unusable;
    - ``error``: the evaluator itself raises (a bug on our side, not the candidate's).

    ``orphans`` (or ``"orphans": N`` in ``standin.json``) makes each job leave N short-lived processes whose parent
    exits first, as a real evaluation does when its sandbox's bubblewrap monitor dies before the process inside:
    they end up with the nearest child subreaper (`cuda_agent.procs`), which must reap them.

    Attributes:
        seconds: default duration of a job.
        log_path: where each job appends one JSON line: job id, GPU (``CUDA_VISIBLE_DEVICES``), pid, start and end
            (``time.time()``), fault. Lines are written with single appends, safe across processes.
        fault: a fault for every job (None: none).
        gpu: the GPU name reported for cache keys.
        orphans: processes each job leaves behind for a subreaper (see above; 0 to 100).
    """

    seconds: float = 0.1
    log_path: str | None = None
    fault: str | None = None
    gpu: str = "stand-in"
    orphans: int = 0
    needs_workdir = False

    def __post_init__(self) -> None:
        if self.fault is not None and self.fault not in FAULTS:
            raise ValueError(f"fault must be one of {FAULTS} or None, got {self.fault!r}")
        if self.seconds < 0:
            raise ValueError(f"seconds must be >= 0, got {self.seconds}")
        _check_orphans(self.orphans)

    def identity(self) -> dict[str, Any]:
        return {"evaluator": "stand-in", "seconds": self.seconds, "fault": self.fault}

    def gpu_name(self) -> str:
        return self.gpu

    def health_check(self) -> str | None:
        return None

    def prepare(self) -> None:
        return None

    def _plan(self, job: EvalJob) -> tuple[float, str | None, int]:
        files = job.solution.file_map()
        raw = files.get(STANDIN_FILE, files.get(f"kernels/{STANDIN_FILE}"))
        if raw is None:
            return self.seconds, self.fault, self.orphans
        spec = json.loads(raw)
        fault = spec.get("fault", self.fault)
        if fault is not None and fault not in FAULTS:
            raise ValueError(f"{STANDIN_FILE}: fault must be one of {FAULTS}, got {fault!r}")
        orphans = spec.get("orphans", self.orphans)
        _check_orphans(orphans)
        return float(spec.get("seconds", self.seconds)), fault, orphans

    def _record(self, **fields: Any) -> None:
        if not self.log_path:
            return
        line = (json.dumps(fields) + "\n").encode()
        fd = os.open(self.log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, line)
        finally:
            os.close(fd)

    def evaluate(self, job: EvalJob, workdir: Path) -> dict[str, Any]:
        seconds, fault, orphans = self._plan(job)
        for _ in range(orphans):
            _leave_orphan()
        gpu = os.environ.get("CUDA_VISIBLE_DEVICES", "")
        start = time.time()
        base = {"job_id": job.job_id, "task_id": job.task.id, "gpu": gpu, "pid": os.getpid(), "start": start,
                "fault": fault}
        if fault in ("crash", "hang"):
            self._record(**base, end=None)
            if fault == "crash":
                time.sleep(min(seconds, 0.05))
                os.kill(os.getpid(), signal.SIGSEGV)
            while True:
                time.sleep(3600)
        if fault == "error":
            self._record(**base, end=time.time())
            raise RuntimeError("stand-in evaluator failure (simulated bug in the evaluator)")
        time.sleep(seconds)
        end = time.time()
        self._record(**base, end=end)
        if fault == "broken":
            return {"task_id": job.task.id, "stage": "runtime_error", "correct": False, "reward": REWARD_INCORRECT,
                    "reason": "CUDA error: an illegal memory access was encountered (stand-in)",
                    "notes": [STANDIN_NOTE], "device": f"stand-in:{gpu}", "total_seconds": end - start}
        level = standin_level(job.solution.file_map(), job.solution.kind)
        return {"task_id": job.task.id, "device": f"stand-in:{gpu}", "total_seconds": end - start,
                "notes": [STANDIN_NOTE], **_standin_verdict(level, timed=job.kind != "verify"),
                "extra": {"standin": {"start": start, "end": end, "gpu": gpu, "level": level}}}


def _standin_verdict(level: str, *, timed: bool) -> dict[str, Any]:
    """The `EvalResult` fields of a feature level: stage, correctness, made-up speedups and the schedule's rewards."""
    speedup_eager, speedup_compile, why = _STANDIN_LEVELS[level]
    correct = level != "no_model_new"
    if not timed:
        speedup_eager = speedup_compile = None
    stage = "timed" if speedup_compile is not None else "correct" if correct else "incorrect"
    # compile time / candidate time is the made-up speedup over compile; 1.0 (correct, untimed) or -1 (incorrect)
    # otherwise, as `cuda_agent.evaluator.result.continuous` gives.
    compile_ratio = speedup_compile if speedup_compile is not None else 1.0
    return {"stage": stage, "correct": correct, "reason": f"stand-in evaluation (nothing compiled or run): {why}",
            "speedup_eager": speedup_eager, "speedup_compile": speedup_compile,
            "reward": discrete_reward(correct, speedup_eager, speedup_compile),
            "continuous_reward": continuous_reward(correct, compile_ratio, 1.0)}
