"""The HTTP service on 127.0.0.1 with a stand-in pool, and `PoolClient` speaking to it."""
from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from pathlib import Path
from typing import Iterator

import pytest
from pool_helpers import overlapping_pairs, read_log, standin_job

from cuda_agent.errors import ConfigError, PoolError
from cuda_agent.pool import LocalPool, PoolClient, StandInEvaluator
from cuda_agent.pool.http import PoolHTTPServer, make_server
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
    assert _raw(f"{server.url}/v1/evaluations/nope")[0] == 404
    assert _raw(f"{server.url}/v1/nothing-here")[0] == 404
    with PoolClient(server.url, token="secret") as client, pytest.raises(ConfigError, match="HTTP 400"):
        client.submit(standin_job(task, job_id="dup")).result(timeout=30)
        client.submit(standin_job(task, job_id="dup"))


def test_unreachable_server_is_a_pool_error(task: Task) -> None:
    with PoolClient("http://127.0.0.1:9", timeout_s=2) as client, pytest.raises(PoolError, match="cannot reach"):
        client.submit(standin_job(task))


@pytest.mark.slow
def test_serve_command_starts_answers_and_stops(tmp_path: Path, task: Task) -> None:
    script = ("import typer; from cuda_agent.cli.serve import register; app = typer.Typer(); register(app); "
              "app.command('noop')(lambda: None); app()")
    proc = subprocess.Popen(
        [sys.executable, "-c", script, "serve", "--port", "0", "--standin", "0.01", "--gpus", "0,1,2",
         "--store", f"sqlite:///{tmp_path / 'serve.db'}"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": SRC})
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
        url = line.split("listening on ", 1)[1].split()[0]
        assert token, "without --token the server makes one and prints it"
        assert _raw(f"{url}/v1/health", token=None)[0] == 401
        with PoolClient(url, token=token) as client:
            assert client.health()["workers"] == 3
            assert client.submit(standin_job(task)).result(timeout=60).correct
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
    assert proc.returncode == 0
    with Store.open(f"sqlite:///{tmp_path / 'serve.db'}") as store:
        assert store.count() == 1
