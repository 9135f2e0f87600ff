"""Probes a careless or hostile client makes against one running `cuda-agent serve`: bad numbers in every numeric
field, wrong types, broken Content-Length, unknown methods and routes, no token, slow and many clients, a worker
killed mid-job. Each returns what it saw or raises `ProbeFailed`; afterwards the server must still evaluate."""
from __future__ import annotations

import json
import os
import signal
import socket
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable

from fault_probes.base import Ledger, expect, job_body
from fault_probes.server import HOST, ServeProcess, response_json

# The shared server these probes run against is started with these limits (slow clients and the cap rely on them).
READ_TIMEOUT_S = 2.0
MAX_CONNECTIONS = 64
SERVER_ARGS = ("--read-timeout", str(READ_TIMEOUT_S), "--max-connections", str(MAX_CONNECTIONS))

# Where each numeric field of a job request lives (path of keys from the body).
NUMERIC_FIELDS: tuple[tuple[str, ...], ...] = (
    ("timeout_s",), ("task", "level"),
    *(("config", name) for name in ("timeout_s", "n_trials", "warmup", "reps", "atol", "rtol", "speed_threshold",
                                     "sol_tolerance", "baseline_drift_limit", "max_log_chars", "seed")),
)
BAD_NUMBERS: dict[str, tuple[Any, ...]] = {
    "nan_and_infinity": (float("nan"), float("inf"), float("-inf")),
    "negative": (-1, -0.5, -1e9),
    "huge": (1e308, 10**40, 2**64),
}


def _with(body: dict[str, Any], path: tuple[str, ...], value: Any) -> dict[str, Any]:
    target = body
    for key in path[:-1]:
        target = target.setdefault(key, {})
    target[path[-1]] = value
    return body


def _post_raw(server: ServeProcess, body: dict[str, Any]) -> Any:
    return server.request("POST", "/v1/evaluations", raw_body=json.dumps(body).encode())  # NaN stays NaN


def _still_serves(server: ServeProcess, ledger: Ledger) -> None:
    """The server still evaluates: health ok and a fresh job finishes correctly."""
    health = server.health()
    expect(health["status"] == "ok", f"health after the probe: {health['status']} {health['problems']}")
    reply = ledger.submit(server, job_body(seconds=0.01))
    expect(reply.status == 202, f"a normal job after the probe got {reply.status}: {reply.body[:200]!r}")
    status = server.wait_for(reply.json["id"], 60)
    expect(status.get("status") == "done" and status["result"]["correct"], f"a normal job after the probe: {status}")


def bad_numbers(kind: str) -> Callable[[ServeProcess, Ledger], str]:
    """A probe sending each value of ``BAD_NUMBERS[kind]`` in every numeric field: each must be a 400 naming it."""

    def probe(server: ServeProcess, ledger: Ledger) -> str:
        sent = 0
        for path in NUMERIC_FIELDS:
            for value in BAD_NUMBERS[kind]:
                reply = _post_raw(server, _with(job_body(), path, value))
                sent += 1
                name = ".".join(path)
                expect(reply.status == 400, f"{name}={value!r}: HTTP {reply.status} {reply.body[:200]!r}")
                expect(name in reply.error, f"{name}={value!r}: the error does not name the field: {reply.error}")
        for value in BAD_NUMBERS[kind]:
            reply = server.request("POST", "/v1/evaluations/wait",
                                   raw_body=json.dumps({"ids": ["x"], "wait_s": value}).encode())
            expect(reply.status == 400 and "wait_s" in reply.error, f"wait_s={value!r}: {reply.status} {reply.error}")
            query = "nan" if value != value else str(value)
            reply = server.request("GET", f"/v1/evaluations/x?wait={query}")
            expect(reply.status == 400 and "wait" in reply.error, f"?wait={query}: {reply.status} {reply.error}")
            sent += 2
        _still_serves(server, ledger)
        return f"{sent} requests with {kind.replace('_', ' ')} numbers: each a 400 naming the field"

    return probe


def wrong_types(server: ServeProcess, ledger: Ledger) -> str:
    cases = [
        (("timeout_s",), "300"), (("config", "n_trials"), True), (("config", "timeout_s"), [1]),
        (("config",), ["not", "an", "object"]), (("config", "build_cache_dir"), "/etc"),
        (("config", "arch"), "90; touch /tmp/x"), (("config", "mode"), 5), (("config", "unknown_knob"), 1),
        (("task", "code"), 42), (("task", "ops"), "relu"), (("solution", "files"), []), (("kind",), None),
        (("force",), "yes"), (("job_id",), "../../etc"), (("surprise",), 1),
    ]
    for path, value in cases:
        reply = _post_raw(server, _with(job_body(), path, value))
        expect(reply.status == 400 and reply.error, f"{'.'.join(path)}={value!r}: {reply.status} {reply.body[:200]!r}")
    for raw in (b"{not json", b"[" * 100_000, b"\xff\xfe{}", b"null", b"[]"):
        reply = server.request("POST", "/v1/evaluations", raw_body=raw)
        expect(reply.status == 400 and reply.error, f"body {raw[:12]!r}: {reply.status} {reply.body[:200]!r}")
    body = job_body()
    first = ledger.submit(server, body)
    again = server.request("POST", "/v1/evaluations", body)
    expect(first.status == 202 and again.status == 400 and "already in use" in again.error,
           f"reusing a job id: {first.status}, then {again.status} {again.error}")
    _still_serves(server, ledger)
    return f"{len(cases) + 5} mistyped or malformed bodies and a reused job id: each a 400 with a reason"


def _expect_fast_json(server: ServeProcess, data: bytes, status: int, what: str, within_s: float = 5.0) -> str:
    raw, seconds = server.raw(data, wait_s=within_s + 10)
    code, body = response_json(raw)
    expect(code == status and isinstance(body, dict) and body.get("error"),
           f"{what}: expected {status} JSON, got {raw[:200]!r}")
    expect(seconds < within_s, f"{what}: the answer took {seconds:.1f} s (the server waited for data)")
    return f"{what}: {status} in {seconds:.2f} s"


def content_length(server: ServeProcess, ledger: Ledger) -> str:
    auth = f"Authorization: Bearer {server.token}\r\n".encode() if server.token else b""
    head = b"POST /v1/evaluations HTTP/1.1\r\nHost: x\r\n" + auth + b"Content-Type: application/json\r\n"
    seen = [
        _expect_fast_json(server, head + b"Content-Length: -1\r\n\r\n{}", 400, "Content-Length -1"),
        _expect_fast_json(server, head + b"Content-Length: 1e3\r\n\r\n{}", 400, "Content-Length 1e3"),
        _expect_fast_json(server, head + b"Content-Length: 2\r\nContent-Length: 3\r\n\r\n{}", 400, "two lengths"),
        _expect_fast_json(server, head + b"\r\n{}", 411, "no Content-Length"),
        _expect_fast_json(server, head + b"Content-Length: 104857600\r\n\r\n" + b"x" * 65536, 413, "100 MiB declared"),
        _expect_fast_json(server, head + b"Content-Length: 99999999999999999999999\r\n\r\n", 413, "23-digit length"),
        _expect_fast_json(server, head + b"Transfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n", 501, "chunked"),
    ]
    short, seconds = server.raw(head + b"Content-Length: 100\r\n\r\n{\"task\"", wait_s=30)
    code, _ = response_json(short)
    expect(code in (408, 0) and seconds < 20, f"a body that stops short: {short[:120]!r} after {seconds:.1f} s")
    seen.append(f"a body that stops short: connection closed after {seconds:.1f} s")
    _still_serves(server, ledger)
    return "; ".join(seen)


def methods_and_routes(server: ServeProcess, ledger: Ledger) -> str:
    auth = f"Authorization: Bearer {server.token}\r\n".encode() if server.token else b""
    seen = [
        _expect_fast_json(server, b"BREW /v1/health HTTP/1.1\r\nHost: x\r\n" + auth + b"\r\n", 501, "method BREW"),
        _expect_fast_json(server, b"GET /v1/health HTTP/7.1\r\nHost: x\r\n\r\n", 505, "HTTP/7.1"),
        _expect_fast_json(server, b"GET /" + b"a" * 70_000 + b" HTTP/1.1\r\n\r\n", 414, "a 70 kB request line"),
        _expect_fast_json(server, b"GET /v1/health HTTP/1.1\r\n" + b"X: y\r\n" * 200 + b"\r\n", 431, "200 headers"),
    ]
    for method, path, status in (("DELETE", "/v1/health", 405), ("GET", "/v1/evaluations", 405),
                                 ("PUT", "/v1/builds", 405), ("GET", "/v1/nothing", 404),
                                 ("POST", "/v2/evaluations", 404), ("GET", "/v1/evaluations/no-such-job", 404)):
        reply = server.request(method, path, body={} if method != "GET" else None)
        expect(reply.status == status and reply.error, f"{method} {path}: {reply.status} {reply.body[:200]!r}")
        if status == 405:
            expect("Allow" in reply.headers, f"{method} {path}: 405 without an Allow header")
        seen.append(f"{method} {path}: {status}")
    _still_serves(server, ledger)
    return "; ".join(seen)


def authentication(server: ServeProcess, ledger: Ledger) -> str:
    expect(server.token is not None, "the server runs without a token")
    for method, path in (("GET", "/v1/health"), ("POST", "/v1/evaluations"), ("GET", "/v1/nothing"),
                         ("POST", "/v1/builds"), ("DELETE", "/v1/health")):
        for token in (None, "wrong", server.token + "x", ""):
            reply = server.request(method, path, body=job_body() if method == "POST" else None, token=token)
            expect(reply.status == 401 and reply.error, f"{method} {path} with token {token!r}: {reply.status}")
    raw, _ = server.raw(b"GET /v1/health HTTP/1.1\r\nAuthorization: Bearer \xff\xfe\r\n\r\n", wait_s=10)
    expect(response_json(raw)[0] == 401, f"a non-ASCII token: {raw[:120]!r}")
    _still_serves(server, ledger)
    return "every route answers 401 JSON without the right bearer token"


def slow_clients(server: ServeProcess, ledger: Ledger, *, count: int = 24,
                 read_timeout_s: float = READ_TIMEOUT_S) -> str:
    """Slowloris: ``count`` connections trickle a header byte at a time; each must be closed by the server once
    ``read_timeout_s`` has passed, while ordinary requests are answered meanwhile."""
    closed_after: list[float] = []
    lock = threading.Lock()

    def trickle() -> None:
        started = time.monotonic()
        with socket.create_connection((HOST, server.port), timeout=read_timeout_s * 10) as sock:
            sock.sendall(b"GET /v1/health HTTP/1.1\r\nHost: x\r\n")
            try:
                for _ in range(int(read_timeout_s * 20)):
                    sock.sendall(b"X")
                    sock.settimeout(0.5)
                    try:
                        if sock.recv(4096) == b"":
                            break
                    except TimeoutError:
                        continue
                    break
            except (BrokenPipeError, ConnectionResetError):
                pass
        with lock:
            closed_after.append(time.monotonic() - started)

    threads = [threading.Thread(target=trickle, daemon=True) for _ in range(count)]
    for thread in threads:
        thread.start()
    time.sleep(0.5)
    started = time.monotonic()
    health = server.health()
    answered_in = time.monotonic() - started
    for thread in threads:
        thread.join(read_timeout_s * 12)
    expect(len(closed_after) == count, f"{count - len(closed_after)} slow connections were still open")
    worst = max(closed_after)
    expect(worst < read_timeout_s + 3, f"a slow client held its connection for {worst:.1f} s")
    expect(answered_in < 2 and health["ok"], f"health took {answered_in:.1f} s while slow clients waited")
    _still_serves(server, ledger)
    return f"{count} slow clients closed after at most {worst:.1f} s; health answered in {answered_in:.2f} s"


def many_clients(server: ServeProcess, ledger: Ledger, *, count: int = 200) -> str:
    """``count`` clients at once, half submitting jobs: each gets a JSON answer (2xx, or 503 when over the
    connection cap), none hangs, and every accepted job finishes."""

    def one(i: int) -> int:
        if i % 2:
            return server.request("GET", "/v1/health", timeout_s=60).status
        return ledger.submit(server, job_body(seconds=0.01), timeout_s=60).status

    statuses: list[int] = []
    with ThreadPoolExecutor(max_workers=count) as pool:
        for future in [pool.submit(one, i) for i in range(count)]:
            try:
                statuses.append(future.result(timeout=120))
            except (ConnectionError, OSError):
                statuses.append(-1)
    bad = [s for s in statuses if s not in (200, 202, 503, -1)]
    expect(not bad, f"unexpected answers under load: {sorted(set(bad))}")
    expect(statuses.count(-1) <= count // 10, f"{statuses.count(-1)} of {count} connections failed outright")
    lost = ledger.settle_live(server, 180)
    expect(not lost, f"{len(lost)} accepted jobs never finished")
    _still_serves(server, ledger)
    counts = {s: statuses.count(s) for s in sorted(set(statuses))}
    return f"{count} concurrent clients: answers {counts}; every accepted job finished"


def connection_cap(server: ServeProcess, ledger: Ledger, *, cap: int = MAX_CONNECTIONS,
                   read_timeout_s: float = READ_TIMEOUT_S) -> str:
    """``cap`` idle connections fill the server; the next one gets a 503 JSON at once, and once the idle ones are
    closed by the read timeout the server answers again."""
    idle = [socket.create_connection((HOST, server.port), timeout=10) for _ in range(cap)]
    try:
        time.sleep(0.3)
        started = time.monotonic()
        reply = server.request("GET", "/v1/health", timeout_s=10)
        took = time.monotonic() - started
        expect(reply.status == 503 and "too many open connections" in reply.error,
               f"connection {cap + 1}: {reply.status} {reply.body[:200]!r}")
        expect(took < 3, f"the refusal took {took:.1f} s")
        time.sleep(read_timeout_s + 1.5)
        health = server.health()
        expect(health["ok"], f"health once the idle connections timed out: {health}")
    finally:
        for sock in idle:
            sock.close()
    _still_serves(server, ledger)
    return f"{cap} idle connections: connection {cap + 1} got 503 JSON in {took:.2f} s; served again after the " \
           "idle ones timed out"


def worker_killed(server: ServeProcess, ledger: Ledger) -> str:
    """SIGKILL a GPU worker in the middle of a job: that job ends ``crashed`` with a reason, the worker is
    replaced, later jobs run."""
    before = server.health()["replaced_workers"]
    workers = server.workers()
    expect(bool(workers), "no worker processes found below the server")
    replies = [ledger.submit(server, job_body(seconds=4.0)) for _ in workers]
    expect(all(r.status == 202 for r in replies), f"long jobs refused: {[r.status for r in replies]}")
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and server.health()["running"] < len(workers):
        time.sleep(0.1)
    victim = workers[0]
    signal_sent = time.monotonic()
    os.kill(victim, signal.SIGKILL)
    statuses = [server.wait_for(r.json["id"], 60) for r in replies]
    crashed = [s for s in statuses if s.get("result", {}) and s["result"]["stage"] == "crashed"]
    expect(len(crashed) == 1, f"expected one crashed job, got {[s.get('result', {}).get('stage') for s in statuses]}")
    reason = crashed[0]["result"]["reason"]
    expect("SIGKILL" in reason and "replaced" in reason, f"the crashed job's reason: {reason}")
    expect(time.monotonic() - signal_sent < 30, "the crash was noticed late")
    health = server.health()
    expect(health["replaced_workers"] >= before + 1 and health["workers"] == len(workers),
           f"after the kill: {health['workers']} workers, {health['replaced_workers']} replaced")
    expect(victim not in server.workers(), "the killed worker is still listed")
    _still_serves(server, ledger)
    return f"worker {victim} killed mid-job: its job ended crashed ({reason[:80]}...), a new worker took over"


HTTP_PROBES: dict[str, Callable[[ServeProcess, Ledger], str]] = {
    "nan_and_infinity_in_every_numeric_field": bad_numbers("nan_and_infinity"),
    "negative_numbers_in_every_numeric_field": bad_numbers("negative"),
    "huge_numbers_in_every_numeric_field": bad_numbers("huge"),
    "wrong_types_and_malformed_bodies": wrong_types,
    "content_length_negative_missing_oversized": content_length,
    "unknown_methods_versions_and_routes": methods_and_routes,
    "no_or_wrong_token": authentication,
    "slow_clients": slow_clients,
    "many_concurrent_clients": many_clients,
    "connection_cap": connection_cap,
    "worker_sigkilled_mid_job": worker_killed,
}
