"""`RayPool`: the GPU pool across a Ray cluster. Ray is imported only when a `RayPool` is made (extra ``ray``).

Each GPU is one actor holding ``num_gpus=1`` (Ray sets its ``CUDA_VISIBLE_DEVICES``); inside it a `WorkerProcess`
runs the evaluations, so a crash, a hang or a broken CUDA context is handled exactly as in `LocalPool` (the
actor replaces its worker). One driver thread per actor feeds it one job at a time from a shared queue, which
keeps each GPU exclusive; an actor that dies (a lost node, a killed process) is replaced and its job reported
failed. Builds run as Ray tasks needing CPUs only, so they land on CPU nodes.

On a real cluster every node needs cuda-agent importable (installed, or a ``runtime_env``).
"""
from __future__ import annotations

import base64
import logging
import pickle
import queue
import threading
import time
from concurrent.futures import Future
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Mapping

from cuda_agent.errors import ConfigError, PoolError
from cuda_agent.pool.base import JobBook, JobTiming, PoolStats, QueuedPool
from cuda_agent.pool.evaluators import Evaluator, RealEvaluator
from cuda_agent.pool.job import EvalJob, SolutionSnapshot, workspace_root
from cuda_agent.pool.worker_process import WorkerFailure, WorkerReply

if TYPE_CHECKING:
    from cuda_agent.compiler.builder import BuildResult
    from cuda_agent.workspace import Workspace

log = logging.getLogger(__name__)

_STOP = object()
_ACTOR_GRACE_S = 60.0


def import_ray() -> Any:
    """Import Ray or raise `ConfigError` saying how to install it."""
    try:
        import ray
    except ImportError as exc:
        raise ConfigError("the Ray backend needs Ray: pip install 'cuda-agent[ray]' (or use the local backend)") from exc
    return ray


class GpuActorBody:
    """The body of a GPU actor (wrapped with ``ray.remote`` at pool creation): one worker process on its GPU."""

    def __init__(self, evaluator_blob: str, health_check_on_replace: bool) -> None:
        import os

        from cuda_agent.pool.worker_process import WorkerProcess

        self._evaluator = pickle.loads(base64.b64decode(evaluator_blob))
        self._health = health_check_on_replace
        self._make = lambda health: WorkerProcess(None, self._evaluator, health_check=health)
        self.gpu = os.environ.get("CUDA_VISIBLE_DEVICES", "")
        self.worker = self._make(False)
        self.worker.start()

    def info(self) -> dict[str, Any]:
        import os

        import ray

        return {"gpu": self.gpu, "node": ray.get_runtime_context().get_node_id(), "pid": os.getpid(),
                "worker_pid": self.worker.pid}

    def run(self, job: dict[str, Any], timeout_s: float) -> dict[str, Any]:
        parsed = EvalJob.from_dict(job)
        out: dict[str, Any]
        try:
            reply = self.worker.run(parsed, timeout_s)
            out = {"reply": reply.__dict__}
            replace = reply.broken
        except WorkerFailure as failure:
            out = {"failure": {"stage": failure.stage, "reason": failure.reason, "started": failure.started}}
            replace = True
        if replace:
            self.worker.kill()
            self.worker = self._make(self._health)
            try:
                self.worker.start()
                out["replaced"] = True
            except PoolError as exc:
                out["dead"] = str(exc)
        return out

    def stop(self) -> None:
        self.worker.stop()


def _remote_build(task: dict[str, Any], solution: dict[str, Any], cache_dir: str | None,
                  arch: str | None) -> dict[str, Any]:
    import shutil
    import tempfile

    from cuda_agent.compiler.confined import build_confined
    from cuda_agent.tasks.task import Task

    scratch = Path(tempfile.mkdtemp(prefix="cuda-agent-build-"))
    try:
        root = SolutionSnapshot.from_dict(solution).materialize(Task.from_dict(task), scratch)
        data = build_confined(root, arch=arch, cache_dir=cache_dir).to_dict()
        data["library"] = None
        return data
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def check_same_cluster(address: str | None, connected: str) -> None:
    """Refuse ``address`` when it names another cluster than ``connected`` (``ip:port`` of the GCS this process is
    in). Raises `ConfigError`."""
    if address in (None, "", "auto"):
        return
    wanted = address.removeprefix("ray://").removeprefix("http://").rstrip("/")
    if wanted != connected:
        raise ConfigError(f"this process is already in the Ray cluster at {connected} and cannot join {address}; "
                          "reach a pool on another cluster through `cuda-agent serve` (backend kind http)")


def _gpu_capacity(resources: Mapping[str, float], gpu_resources: Mapping[str, float] | None) -> int:
    """How many one-GPU actors fit: the cluster's GPUs, bounded by each custom resource an actor also needs."""
    count = int(resources.get("GPU", 0))
    for name, amount in (gpu_resources or {}).items():
        count = min(count, int(resources.get(name, 0) // amount)) if amount > 0 else count
    return count


class RayPool(QueuedPool):
    """GPU actors across a Ray cluster, fed from one queue; builds as CPU tasks.

    Args:
        address: the cluster (None: join ``RAY_ADDRESS`` or start a local one). If this process is already in a
            Ray cluster (inside a verl worker, say), ``address`` must be None, ``"auto"`` or that cluster's own
            address: one process cannot join a second cluster (use `PoolClient` and ``cuda-agent serve``).
        num_gpus: how many GPU actors (default: every GPU the cluster has, or every unit of ``gpu_resources``
            when given). Inside a Ray actor (a verl worker) it must be given, or ``gpu_resources`` set: the
            default would take the training GPUs.
        gpu_resources: custom Ray resources each GPU actor also needs, e.g. ``{"eval_gpu": 1}`` with the
            evaluation nodes started as ``ray start --resources='{"eval_gpu": 8}'``, so actors land there only.
        evaluator: what each job runs (default `RealEvaluator()`).
        store: a `Store` for the cache and records (on the driver).
        eval_timeout_s: outer limit per job (default: the job's, else its config's ``timeout_s`` + 60 s).
        build_cache_dir, build_arch, build_resources: where builds keep objects, which arch, and extra Ray
            resources a build task needs (e.g. ``{"cpu_node": 0.01}`` to pin builds to CPU nodes).
        init_kwargs: passed to ``ray.init`` when this pool starts Ray.

    Raises `ConfigError` without Ray, for a second cluster's address, or for no GPU count inside a Ray actor;
    `PoolError` when the cluster has too few GPUs.
    """

    backend = "ray"

    def __init__(self, address: str | None = None, *, num_gpus: int | None = None,
                 evaluator: Evaluator | None = None, store: Any | None = None, eval_timeout_s: float | None = None,
                 health_check_on_replace: bool | None = None, build_cache_dir: str | None = None,
                 build_arch: str | None = None, build_resources: Mapping[str, float] | None = None,
                 init_kwargs: Mapping[str, Any] | None = None, gpu_resources: Mapping[str, float] | None = None,
                 on_complete: Callable[[JobTiming], None] | None = None) -> None:
        ray = import_ray()
        self._ray = ray
        if ray.is_initialized():
            context = ray.get_runtime_context()
            check_same_cluster(address, context.gcs_address)
            if context.get_actor_id() is not None and num_gpus is None and not gpu_resources:
                raise ConfigError("RayPool inside a Ray actor (a training job's worker) needs num_gpus or "
                                  "gpu_resources; the default, every GPU of the cluster, would take the training GPUs")
        else:
            ray.init(address=address, **dict(init_kwargs or {}))
        available = _gpu_capacity(ray.cluster_resources(), gpu_resources)
        count = num_gpus if num_gpus is not None else available
        if count <= 0 or count > available:
            raise PoolError(f"the Ray cluster has {available} GPUs for evaluation; asked for {count}. Add GPU nodes "
                            "or lower num_gpus")
        self.evaluator: Evaluator = evaluator or RealEvaluator()
        self.eval_timeout_s = eval_timeout_s
        health = isinstance(self.evaluator, RealEvaluator) if health_check_on_replace is None \
            else health_check_on_replace
        self._blob = base64.b64encode(pickle.dumps(self.evaluator)).decode()
        self._actor_cls = ray.remote(num_gpus=1, num_cpus=0, max_concurrency=1,
                                     resources=dict(gpu_resources or {}))(GpuActorBody)
        self._health = health
        self._build_fn = ray.remote(num_cpus=1)(_remote_build)
        self._build_options = {"resources": dict(build_resources)} if build_resources else {}
        self.build_cache_dir = build_cache_dir
        self.build_arch = build_arch
        self._book = JobBook(self.evaluator, store, self.evaluator.gpu_name(), on_complete)
        self._queue: queue.Queue[Any] = queue.Queue()
        self._lock = threading.Lock()
        self._closed = False
        self._actors: list[Any] = [self._new_actor() for _ in range(count)]
        self._labels: list[str] = [""] * count
        self._dead: set[int] = set()
        self._running: dict[str, int] = {}
        self._threads = [threading.Thread(target=self._slot, args=(i,), daemon=True, name=f"ray-gpu-{i}")
                         for i in range(count)]
        for thread in self._threads:
            thread.start()

    def _new_actor(self) -> Any:
        return self._actor_cls.remote(self._blob, self._health)

    def _label(self, index: int) -> str:
        info = self._ray.get(self._actors[index].info.remote(), timeout=300)
        return f"{info['node'][:8]}:{info['gpu']}"

    @property
    def store(self) -> Any | None:
        return self._book.store

    @property
    def gpu_name(self) -> str:
        return self._book.gpu_name

    @property
    def gpus(self) -> list[str]:
        return list(self._labels)

    def actors(self) -> list[Any]:
        """The GPU actor handles (for inspection and fault drills)."""
        return list(self._actors)

    def actor_running(self, job_id: str) -> Any | None:
        """The actor running ``job_id`` now, or None (for fault drills: kill it and watch the job fail over)."""
        index = self._running.get(job_id)
        return None if index is None else self._actors[index]

    def wait_ready(self, timeout_s: float = 300.0) -> None:
        deadline = time.monotonic() + timeout_s
        while any(not label for i, label in enumerate(self._labels) if i not in self._dead):
            if time.monotonic() > deadline:
                raise PoolError(f"GPU actors not ready within {timeout_s:.0f} s")
            time.sleep(0.05)

    def _slot(self, index: int) -> None:
        ray = self._ray
        try:
            self._labels[index] = self._label(index)
        except Exception as exc:  # noqa: BLE001 - an actor that cannot start takes its GPU out
            log.error("GPU actor %d did not start: %s", index, exc)
            self._dead.add(index)
            return
        while True:
            item = self._queue.get()
            if item is _STOP:
                break
            job, future, submitted = item
            if not future.set_running_or_notify_cancel():
                continue
            timeout = self._book.timeout_for(job, self.eval_timeout_s)
            self._book.running(+1)
            self._running[job.job_id] = index
            replace_actor = False
            try:
                out = ray.get(self._actors[index].run.remote(job.to_dict(), timeout), timeout=timeout + _ACTOR_GRACE_S)
                if "reply" in out:
                    outcome: WorkerReply | WorkerFailure = WorkerReply(**out["reply"])
                else:
                    failure = out["failure"]
                    outcome = WorkerFailure(failure["stage"], failure["reason"], failure.get("started"))
                if out.get("replaced"):
                    self._book.replaced()
                replace_actor = "dead" in out
            except ray.exceptions.GetTimeoutError:
                outcome = WorkerFailure("timeout", f"the GPU actor on {self._labels[index]} gave no answer within "
                                                   f"{timeout + _ACTOR_GRACE_S:.0f} s; it was killed and replaced")
                replace_actor = True
            except ray.exceptions.RayError as exc:
                outcome = WorkerFailure("crashed", f"the GPU actor on {self._labels[index]} died during the job "
                                                   f"({type(exc).__name__}); it was replaced. {str(exc)[:300]}")
                replace_actor = True
            finally:
                self._book.running(-1)
                self._running.pop(job.job_id, None)
            try:
                self._book.complete(job, future, submitted, self._labels[index], outcome)
            except Exception as exc:  # noqa: BLE001 - never leave a future unresolved
                if not future.done():
                    future.set_exception(PoolError(f"job {job.job_id}: could not record its result: {exc}"))
            if replace_actor:
                self._replace_actor(index)
        try:
            ray.get(self._actors[index].stop.remote(), timeout=60)
        except Exception:  # noqa: BLE001 - best effort at shutdown
            pass
        ray.kill(self._actors[index])

    def _replace_actor(self, index: int) -> None:
        try:
            self._ray.kill(self._actors[index])
        except Exception:  # noqa: BLE001 - it may be gone already
            pass
        self._book.replaced()
        self._actors[index] = self._new_actor()
        try:
            self._labels[index] = self._label(index)
        except Exception as exc:  # noqa: BLE001
            log.error("replacement GPU actor %d did not start: %s", index, exc)

    def _check_accepting(self) -> None:
        with self._lock:
            if self._closed:
                raise PoolError("the pool is closed; create a new one")

    def submit_build(self, workspace: "str | Path | Workspace") -> "Future[BuildResult]":
        """Build a workspace's agent files in a Ray CPU task; the `BuildResult`'s library stays on that node."""
        from cuda_agent.workspace import Workspace

        ws = Workspace.open(workspace_root(workspace))
        snapshot = SolutionSnapshot.from_files(ws.solution_files())
        ref = self._build_fn.options(**self._build_options).remote(ws.task.to_dict(), snapshot.to_dict(),
                                                                   self.build_cache_dir, self.build_arch)
        result: "Future[BuildResult]" = Future()

        def convert(raw: Future[Any]) -> None:
            from cuda_agent.compiler import BuildResult

            try:
                data = raw.result()
                result.set_result(BuildResult.from_dict(data, local=False))
            except Exception as exc:  # noqa: BLE001 - surfaced through the future
                result.set_exception(PoolError(f"remote build failed: {exc}"))

        ref.future().add_done_callback(convert)
        return result

    def stats(self) -> PoolStats:
        c = self._book.counters
        return PoolStats(self.backend, len(self._actors) - len(self._dead), self._queue.qsize(), c.running,
                         c.submitted, c.completed, c.failed, c.cached, c.replaced_workers, self.gpu_name,
                         {"gpus": self.gpus})

    def close(self, wait: bool = True) -> None:
        """Finish queued jobs, stop the actors (Ray itself stays up)."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        for _ in self._threads:
            self._queue.put(_STOP)
        if wait:
            for thread in self._threads:
                thread.join()

    def __enter__(self) -> "RayPool":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
