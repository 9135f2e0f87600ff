"""`PoolClient`: a `Pool` on the other side of HTTP (docs/http_api.md), so rollout workers on other machines use a
remote pool like a local one."""
from __future__ import annotations

import asyncio
import json
import os
import threading
import time
import urllib.error
import urllib.request
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

from cuda_agent.compiler import BuildResult
from cuda_agent.errors import ConfigError, PoolError
from cuda_agent.evaluator.result import EvalResult
from cuda_agent.pool.base import PoolStats
from cuda_agent.pool.job import EvalJob, SolutionSnapshot, workspace_root
from cuda_agent.pool.validation import MAX_WAIT_IDS, MAX_WAIT_S
from cuda_agent.workspace import Workspace

TOKEN_ENV = "CUDA_AGENT_SERVE_TOKEN"


class PoolClient:
    """A `Pool` on the other side of HTTP. ``token``: the server's bearer token (default: $CUDA_AGENT_SERVE_TOKEN).

    ``submit`` posts the job (its snapshot travels base64-encoded) and returns a future; one background thread
    long-polls the server for every pending job in batches and resolves the futures. Connection errors are retried
    for ``retry_s`` seconds (a restarting server), after which pending futures fail with `PoolError`.
    """

    def __init__(self, url: str, *, token: str | None = None, timeout_s: float = 60.0, poll_wait_s: float = 20.0,
                 retry_s: float = 120.0, build_workers: int = 8) -> None:
        self.url = url.rstrip("/")
        self.token = token if token is not None else os.environ.get(TOKEN_ENV) or None
        self.timeout_s = timeout_s
        self.poll_wait_s = min(max(0.0, poll_wait_s), MAX_WAIT_S)  # the server refuses longer waits
        self.retry_s = retry_s
        self._pending: dict[str, Future[EvalResult]] = {}
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._closed = False
        self._poller: threading.Thread | None = None
        self._builds = ThreadPoolExecutor(max_workers=build_workers, thread_name_prefix="pool-client-build")
        self.store = None

    # ---- transport ----------------------------------------------------------------------------------------------

    def _request(self, method: str, path: str, body: Any = None, timeout_s: float | None = None) -> dict[str, Any]:
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(self.url + path, data=data, method=method)
        request.add_header("Content-Type", "application/json")
        if self.token:
            request.add_header("Authorization", f"Bearer {self.token}")
        try:
            with urllib.request.urlopen(request, timeout=timeout_s or self.timeout_s) as response:
                return json.loads(response.read() or b"{}")
        except urllib.error.HTTPError as exc:
            try:
                message = json.loads(exc.read()).get("error", "")
            except ValueError:
                message = exc.reason
            if exc.code == 401:
                raise ConfigError(f"{method} {path}: HTTP 401: {message}; pass the token `cuda-agent serve` printed "
                                  "(token= or CUDA_AGENT_SERVE_TOKEN)") from exc
            if 400 <= exc.code < 500:
                raise ConfigError(f"{method} {path}: HTTP {exc.code}: {message}") from exc
            raise PoolError(f"{method} {path}: HTTP {exc.code}: {message}") from exc

    # ---- Pool protocol ------------------------------------------------------------------------------------------

    def submit(self, job: EvalJob) -> "Future[EvalResult]":
        """Post ``job`` to the server; raises `ConfigError` if the server rejects it, `PoolError` if it is
        unreachable or cannot take it."""
        if self._closed:
            raise PoolError("the pool client is closed; create a new one")
        try:
            status = self._request("POST", "/v1/evaluations", job.to_dict())
        except (urllib.error.URLError, OSError) as exc:
            raise PoolError(f"cannot reach the pool service at {self.url}: {exc}") from exc
        future: Future[EvalResult] = Future()
        if not self._resolve(future, status):
            with self._lock:
                self._pending[status["id"]] = future
                if self._poller is None:
                    self._poller = threading.Thread(target=self._poll, name="pool-client-poll", daemon=True)
                    self._poller.start()
            self._wake.set()
        return future

    def evaluate(self, job: EvalJob) -> EvalResult:
        return self.submit(job).result()

    async def aevaluate(self, job: EvalJob) -> EvalResult:
        loop = asyncio.get_running_loop()
        future = await loop.run_in_executor(None, self.submit, job)
        return await asyncio.wrap_future(future)

    def submit_build(self, workspace: "str | Path | Workspace") -> "Future[BuildResult]":
        """Build a workspace's agent files on the server (compiler diagnostics come back; the library stays there)."""
        ws = Workspace.open(workspace_root(workspace))
        body = {"task": ws.task.to_dict(), "solution": SolutionSnapshot.from_files(ws.solution_files()).to_dict()}
        return self._builds.submit(self._build, body)

    def _build(self, body: dict[str, Any]) -> BuildResult:
        data = self._request("POST", "/v1/builds", body, timeout_s=max(self.timeout_s, 600.0))
        return BuildResult.from_dict(data, local=False)

    def cache_key(self, job: EvalJob) -> str:
        return str(self._request("POST", "/v1/cache-keys", job.to_dict())["cache_key"])

    def health(self) -> dict[str, Any]:
        return self._request("GET", "/v1/health")

    def stats(self) -> PoolStats:
        data = self.health()
        fields = PoolStats.__dataclass_fields__
        return PoolStats(**{k: data[k] for k in fields if k in data})

    @property
    def gpu_name(self) -> str:
        return str(self.health().get("gpu_name", ""))

    def close(self) -> None:
        """Stop polling; futures still pending fail with `PoolError` (the jobs keep running on the server)."""
        self._closed = True
        self._wake.set()
        if self._poller is not None:
            self._poller.join(timeout=self.poll_wait_s + self.timeout_s)
        self._fail_pending("the pool client was closed before the result arrived")
        self._builds.shutdown(wait=False, cancel_futures=True)

    def __enter__(self) -> "PoolClient":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- polling ------------------------------------------------------------------------------------------------

    @staticmethod
    def _resolve(future: Future[EvalResult], status: dict[str, Any]) -> bool:
        state = status.get("status")
        if state == "done":
            future.set_result(EvalResult.from_dict(status["result"]))
            return True
        if state in ("failed", "unknown"):
            future.set_exception(PoolError(f"evaluation {status.get('id')} failed on the server: {status.get('error')}"))
            return True
        return False

    def _fail_pending(self, reason: str) -> None:
        with self._lock:
            pending, self._pending = self._pending, {}
        for future in pending.values():
            if not future.done():
                future.set_exception(PoolError(reason))

    def _poll(self) -> None:
        failing_since: float | None = None
        while not self._closed:
            with self._lock:
                ids = list(self._pending)[:MAX_WAIT_IDS]
            if not ids:
                self._wake.wait(1.0)
                self._wake.clear()
                with self._lock:
                    if not self._pending:
                        self._poller = None
                        return
                continue
            try:
                answer = self._request("POST", "/v1/evaluations/wait", {"ids": ids, "wait_s": self.poll_wait_s},
                                       timeout_s=self.poll_wait_s + self.timeout_s)
                failing_since = None
            except ConfigError as exc:
                self._fail_pending(f"the pool service refused to report on the jobs: {exc}")
                with self._lock:
                    self._poller = None
                return
            except (urllib.error.URLError, OSError, PoolError) as exc:
                failing_since = failing_since or time.monotonic()
                if time.monotonic() - failing_since > self.retry_s:
                    self._fail_pending(f"lost the pool service at {self.url} for {self.retry_s:.0f} s: {exc}")
                    with self._lock:
                        self._poller = None
                    return
                time.sleep(1.0)
                continue
            for status in answer.get("evaluations", []):
                with self._lock:
                    future = self._pending.get(status["id"])
                if future is not None and self._resolve(future, status):
                    with self._lock:
                        self._pending.pop(status["id"], None)
