"""The HTTP service on 127.0.0.1 with a stand-in pool, and `PoolClient` speaking to it."""
from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Iterator

import pytest
from pool_helpers import STANDIN_MODEL_NEW, overlapping_pairs, read_log, standin_job

from cuda_agent.errors import ConfigError, PoolError
from cuda_agent.pool import EvalJob, LocalPool, PoolClient, StandInEvaluator
from cuda_agent.pool.http import PoolHTTPServer, make_server
from cuda_agent.procs import ORPHAN_GRACE_S, descendants
from cuda_agent.store import Store
from cuda_agent.tasks import Task

SRC = str(Path(__file__).resolve().parents[2] / "src")


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[PoolHTTPServer, Path]]:
    tmp = tmp_path_factory.mktemp("http")
    log = tmp / "runs.jsonl"
    store = Store.open(f"sqlite:///{tmp / 'store.db'}")
    pool = LocalPool(gpus=["0", "1"], evaluator=StandInEvaluator(seconds=0.05, log_path=str(log)), store=store,
                     eval_timeout_s=5)
    server = make_server(pool, "127.0.0.1", 0, token="secret")
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True)
    thread.start()
    yield server, log
    server.shutdown()
    server.server_close()
    server.service.close()
    store.close()


def _raw(url: str, method: str = "GET", body: bytes | None = None, token: str | None = "secret") -> tuple[int, dict]:
    request = urllib.request.Request(url, data=body, method=method)
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def test_client_runs_jobs_and_gpus_stay_exclusive(served: tuple[PoolHTTPServer, Path], task: Task) -> None:
    server, log = served
    with PoolClient(server.url, token="secret", poll_wait_s=2) as client:
        jobs = [standin_job(task, tag=f"client-{i}") for i in range(12)]
        results = [f.result(timeout=60) for f in [client.submit(job) for job in jobs]]
        crash = client.submit(standin_job(task, fault="crash")).result(timeout=60)
        assert client.health()["ok"] is True
    assert all(r.correct for r in results)
    assert {r.extra["pool"]["job_id"] for r in results} == {j.job_id for j in jobs}
    assert crash.stage == "crashed" and "SIGSEGV" in crash.reason
    assert overlapping_pairs(read_log(log)) == []


def test_asyncio_clients_and_status_endpoint(served: tuple[PoolHTTPServer, Path], task: Task) -> None:
    server, _ = served
    client = PoolClient(server.url, token="secret", poll_wait_s=2)

    async def main() -> list[str]:
        results = await asyncio.gather(*(client.aevaluate(standin_job(task, tag=f"a{i}")) for i in range(16)))
        return [r.stage for r in results]

    assert asyncio.run(main()) == ["timed"] * 16
    job = standin_job(task, tag="status")
    code, queued = _raw(f"{server.url}/v1/evaluations", "POST", json.dumps(job.to_dict()).encode())
    assert code == 202 and queued["id"] == job.job_id and queued["status"] in ("queued", "running", "done")
    code, done = _raw(f"{server.url}/v1/evaluations/{job.job_id}?wait=20")
    assert code == 200 and done["status"] == "done" and done["result"]["stage"] == "timed"
    assert client.cache_key(job) == server.service.pool.cache_key(job)
    client.close()


def test_errors_are_json_with_the_right_codes(served: tuple[PoolHTTPServer, Path], task: Task) -> None:
    server, _ = served
    assert _raw(f"{server.url}/v1/health", token=None)[0] == 401
    assert _raw(f"{server.url}/v1/health", token="wrong")[0] == 401
    code, body = _raw(f"{server.url}/v1/evaluations", "POST", b"{not json")
    assert code == 400 and "not JSON" in body["error"]
    code, body = _raw(f"{server.url}/v1/evaluations", "POST", json.dumps({"task": task.to_dict()}).encode())
    assert code == 400 and "solution" in body["error"]
    bad_kind = {**standin_job(task).to_dict(), "kind": "everything"}
    assert _raw(f"{server.url}/v1/evaluations", "POST", json.dumps(bad_kind).encode())[0] == 400
    bad_config = {**standin_job(task).to_dict(), "config": {"n_trials": 1}}
    code, body = _raw(f"{server.url}/v1/evaluations", "POST", json.dumps(bad_config).encode())
    assert code == 400 and "n_trials" in body["error"]
    for allowance in (-1.0, 2 * 86400.0):  # the judge's allowance for its own first measurements: [0, 1 day]
        bad_config = {**standin_job(task).to_dict(), "config": {"judge_allowance_s": allowance}}
        code, body = _raw(f"{server.url}/v1/evaluations", "POST", json.dumps(bad_config).encode())
        assert code == 400 and "judge_allowance_s" in body["error"], body
    assert _raw(f"{server.url}/v1/evaluations/nope")[0] == 404
    assert _raw(f"{server.url}/v1/nothing-here")[0] == 404
    with PoolClient(server.url, token="secret") as client, pytest.raises(ConfigError, match="HTTP 400"):
        client.submit(standin_job(task, job_id="dup")).result(timeout=30)
        client.submit(standin_job(task, job_id="dup"))



@pytest.mark.gpu
def test_serve_with_the_real_evaluator_leaves_no_zombie() -> None:
    """The same with real evaluations on a GPU: each one's sandbox leaves its process to the server."""
    from test_pool_gpu import MODEL_NEW, RELU_CU, TASK

    real = Task(id="gpu/relu", code=TASK, name="relu")
    with _serve("--gpus", "0", "--store", "none", "--token", "secret") as (proc, url, _):
        with PoolClient(url, token="secret") as client:
            jobs = [EvalJob.create(real, {"model_new.py": f"{MODEL_NEW}# {i}\n", "kernels/relu.cu": RELU_CU},
                                   kind="verify") for i in range(20)]
            results = [client.submit(job).result(timeout=900) for job in jobs]
        assert all(r.correct for r in results), [(r.stage, r.reason) for r in results if not r.correct]
        deadline = time.monotonic() + 3 * ORPHAN_GRACE_S
        while _zombies(proc.pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert _zombies(proc.pid) == []

@pytest.mark.parametrize("where", ["file solution", "workspace solution", "task.path", "task.id", "task.name"])
@pytest.mark.parametrize("char", ["\x00", "\n", "\x1b", "\x7f"])
def test_names_with_control_characters_are_refused(served: tuple[PoolHTTPServer, Path], task: Task, where: str,
                                                   char: str) -> None:
    """A NUL in a file name once got a 202 and ended as a server traceback inside the result: every field that
    names a file or a task is refused with a 400 whose one-line reason names the field, and nothing is queued."""
    server, _ = served
    bad = f"ker{char}nel"
    solution: dict[str, object] = {"kind": "workspace", "encoding": "text", "files": {"model_new.py": "# x\n"}}
    task_fields = task.to_dict()
    if where == "file solution":
        solution = {"kind": "file", "encoding": "text", "files": {f"{bad}.py": "# x\n"}}
    elif where == "workspace solution":
        solution["files"] = {"model_new.py": "# x\n", f"kernels/{bad}.cu": "// x\n"}  # type: ignore[index]
    else:
        task_fields[where.split(".")[1]] = bad
    field = "solution.files path" if "solution" in where else where
    job_id = f"control-{where.replace(' ', '-')}-{ord(char)}"
    for route, body in (("evaluations", {"task": task_fields, "solution": solution, "job_id": job_id}),
                        ("builds", {"task": task_fields, "solution": solution})):
        code, answer = _raw(f"{server.url}/v1/{route}", "POST", json.dumps(body).encode())
        assert code == 400, (route, answer)
        assert field in answer["error"] and "control character" in answer["error"], answer
        assert "\n" not in answer["error"] and "Traceback" not in answer["error"]
    assert _raw(f"{server.url}/v1/evaluations/{job_id}")[0] == 404


def test_unreachable_server_is_a_pool_error(task: Task) -> None:
    with PoolClient("http://127.0.0.1:9", timeout_s=2) as client, pytest.raises(PoolError, match="cannot reach"):
        client.submit(standin_job(task))


@contextlib.contextmanager
def _serve(*args: str) -> Iterator[tuple[subprocess.Popen[str], str, str | None]]:
    """`cuda-agent serve --port 0 ARGS` as a user starts it; yields the process, its URL and the token it printed
    (None when given one). Ends it with SIGTERM."""
    proc = subprocess.Popen([sys.executable, "-m", "cuda_agent.cli.main", "serve", "--port", "0", *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": SRC})
    try:
        assert proc.stdout is not None
        line, token = "", None
        for _ in range(50):
            line = proc.stdout.readline()
            if line.startswith("token: "):
                token = line.split()[1]
            if "listening on" in line or not line:
                break
        assert "listening on http://127.0.0.1:" in line, proc.stderr.read() if proc.stderr else line
        yield proc, line.split("listening on ", 1)[1].split()[0], token
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)


@pytest.mark.slow
def test_serve_command_starts_answers_and_stops(tmp_path: Path, task: Task) -> None:
    with _serve("--standin", "0.01", "--gpus", "0,1,2", "--store", f"sqlite:///{tmp_path / 'serve.db'}") as (
            proc, url, token):
        assert token, "without --token the server makes one and prints it"
        assert _raw(f"{url}/v1/health", token=None)[0] == 401
        with PoolClient(url, token=token) as client:
            assert client.health()["workers"] == 3
            assert client.submit(standin_job(task)).result(timeout=60).correct
    assert proc.returncode == 0
    with Store.open(f"sqlite:///{tmp_path / 'serve.db'}") as store:
        assert store.count() == 1


def _zombies(root: int) -> list[int]:
    found = []
    for pid in descendants(root):
        try:
            with open(f"/proc/{pid}/stat") as fh:
                if fh.read().rsplit(")", 1)[1].split()[0] == "Z":
                    found.append(pid)
        except OSError:
            continue
    return found


@pytest.mark.slow
def test_serve_reaps_the_processes_it_adopts(task: Task) -> None:
    """Each stand-in job leaves a process whose parent exits first, as a real evaluation does when its sandbox's
    bubblewrap monitor dies before the process inside: the server, their subreaper, must reap every one."""
    with _serve("--standin", "0.01", "--gpus", "0,1", "--store", "none", "--token", "secret") as (proc, url, _):
        with PoolClient(url, token="secret") as client:
            jobs = [EvalJob.create(task, {"model_new.py": f"# {i}\n{STANDIN_MODEL_NEW}",
                                          "standin.json": '{"orphans": 1}'}) for i in range(20)]
            assert all(client.submit(job).result(timeout=60).correct for job in jobs)
        deadline = time.monotonic() + 3 * ORPHAN_GRACE_S
        while _zombies(proc.pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert _zombies(proc.pid) == []
        assert proc.poll() is None
    assert proc.returncode == 0
