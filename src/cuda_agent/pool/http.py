"""The HTTP service in front of a pool (stdlib only: ``http.server`` and JSON). The API is in docs/http_api.md;
`PoolClient` (in `cuda_agent.pool.client`, re-exported here) speaks it.

What a careless or hostile client cannot do to it: every answer, including a malformed request line, an unknown
method or route, is JSON with a 4xx code; a body is read only up to its declared ``Content-Length`` and only if
that is within the cap (a missing, negative or oversized length is refused before anything is read); a request
whose line, headers and body do not all arrive within ``read_timeout_s`` has its connection closed (a slow
client cannot hold a thread); at most ``max_connections`` connections are served at once (the rest get a 503).
"""
from __future__ import annotations

import hmac
import json
import logging
import re
import socket
import threading
import time
from dataclasses import dataclass
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

from cuda_agent.errors import ConfigError, CudaAgentError, PoolError, StoreError, TaskError, WorkspaceError
from cuda_agent.pool.client import PoolClient
from cuda_agent.pool.service import EvaluationService
from cuda_agent.pool.validation import check_wait_query, check_wait_request, parse_json

log = logging.getLogger(__name__)

__all__ = ["MAX_BODY_BYTES", "PoolClient", "PoolHTTPServer", "ServerLimits", "make_server"]

MAX_BODY_BYTES = 64 * 1024 * 1024
_DIGITS = re.compile(r"[0-9]{1,18}")
ROUTES: dict[str, frozenset[str]] = {
    "/v1/health": frozenset({"GET"}),
    "/v1/evaluations": frozenset({"POST"}),
    "/v1/evaluations/wait": frozenset({"POST"}),
    "/v1/cache-keys": frozenset({"POST"}),
    "/v1/builds": frozenset({"POST"}),
}
_JOB_ROUTE = re.compile(r"/v1/evaluations/[^/]+")


@dataclass(frozen=True)
class ServerLimits:
    """What one client may take from the server.

    Attributes:
        max_body_bytes: the largest request body; a larger ``Content-Length`` is a 413 and nothing is read.
        read_timeout_s: a request's line, headers and body must arrive within this many seconds of the request's
            start (and an idle keep-alive connection is closed after it); slow clients lose their connection.
        max_connections: connections served at once; one more gets a 503 and is closed.
    """

    max_body_bytes: int = MAX_BODY_BYTES
    read_timeout_s: float = 30.0
    max_connections: int = 128


def allowed_methods(path: str) -> frozenset[str] | None:
    """The methods a route takes, or None when there is no such route."""
    if path in ROUTES:
        return ROUTES[path]
    if _JOB_ROUTE.fullmatch(path):
        return frozenset({"GET"})
    return None


class HTTPProblem(Exception):
    """A request the server answers with ``status`` and ``{"error": message}``; ``close``: the connection cannot
    be reused (its body was not read)."""

    def __init__(self, status: int, message: str, *, close: bool = False,
                 headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.close = close
        self.headers = dict(headers or {})


class _Deadlines:
    """Closes connections whose request has not fully arrived in time; one sweeping thread per server."""

    def __init__(self, limit_s: float) -> None:
        self.limit_s = limit_s
        self._lock = threading.Lock()
        self._due: dict[socket.socket, float] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sweep, name="cuda-agent-http-deadlines", daemon=True)
        self._thread.start()

    def start(self, conn: socket.socket) -> None:
        with self._lock:
            self._due[conn] = time.monotonic() + self.limit_s

    def clear(self, conn: socket.socket) -> None:
        with self._lock:
            self._due.pop(conn, None)

    def _sweep(self) -> None:
        while not self._stop.wait(min(0.5, self.limit_s / 4)):
            now = time.monotonic()
            with self._lock:
                late = [conn for conn, due in self._due.items() if due < now]
                for conn in late:
                    del self._due[conn]
            for conn in late:
                try:
                    conn.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def close(self) -> None:
        self._stop.set()


class _Handler(BaseHTTPRequestHandler):
    server: "PoolHTTPServer"
    protocol_version = "HTTP/1.1"
    server_version = "cuda-agent"
    sys_version = ""

    def setup(self) -> None:
        super().setup()
        self.connection.settimeout(self.server.limits.read_timeout_s)

    def handle_one_request(self) -> None:
        self.server.deadlines.start(self.connection)
        super().handle_one_request()

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
        log.debug("%s %s", self.address_string(), format % args)

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        """What http.server sends for requests it cannot parse or methods with no handler: JSON, not HTML."""
        try:
            default = HTTPStatus(code).phrase
        except ValueError:
            default = "error"
        self.close_connection = True
        if getattr(self, "request_version", "HTTP/0.9") == "HTTP/0.9":
            self.request_version = "HTTP/1.1"  # unparsable request lines get a status line too, not a bare body
        self._reply(code, {"error": f"{message or default}{f': {explain}' if explain else ''}"},
                    {"Connection": "close"})

    def _reply(self, status: int, payload: dict[str, Any], headers: dict[str, str] | None = None) -> None:
        body = json.dumps(payload).encode()
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.end_headers()
            if getattr(self, "command", None) != "HEAD":
                self.wfile.write(body)
        except OSError:
            self.close_connection = True

    def _authorised(self) -> bool:
        token = self.server.token
        if not token:
            return True
        given = self.headers.get("Authorization", "")
        return hmac.compare_digest(given.encode("utf-8", "replace"), f"Bearer {token}".encode())

    def _declared_length(self) -> int:
        """The body's declared length. Raises `HTTPProblem` for chunked bodies (501), a missing length (411),
        several or non-numeric lengths (400) and lengths over the cap (413)."""
        if self.headers.get("Transfer-Encoding", "").strip():
            raise HTTPProblem(HTTPStatus.NOT_IMPLEMENTED, "Transfer-Encoding (chunked bodies) is not supported; send "
                                                          "Content-Length", close=True)
        values = [v.strip() for v in self.headers.get_all("Content-Length") or []]
        if not values:
            raise HTTPProblem(HTTPStatus.LENGTH_REQUIRED, "Content-Length is required on a request with a body",
                              close=True)
        if len(set(values)) != 1 or not re.fullmatch(r"[0-9]+", values[0]):
            raise HTTPProblem(HTTPStatus.BAD_REQUEST, f"Content-Length must be one non-negative integer, got "
                                                      f"{', '.join(v[:20] for v in values)}", close=True)
        limit = self.server.limits.max_body_bytes
        if not _DIGITS.fullmatch(values[0]) or int(values[0]) > limit:
            raise HTTPProblem(HTTPStatus.REQUEST_ENTITY_TOO_LARGE, f"request body is {values[0][:20]} bytes; the "
                                                                   f"limit is {limit}", close=True)
        return int(values[0])

    def _body(self) -> Any:
        """The request's JSON body, read only up to its declared length; raises `HTTPProblem` (411 without a
        length, 408 when it does not arrive in time, 400 when it stops short) or `RequestError` (not JSON)."""
        length = self._declared_length()
        chunks: list[bytes] = []
        got = 0
        while got < length:
            try:
                chunk = self.rfile.read1(min(1 << 16, length - got))
            except TimeoutError:
                raise HTTPProblem(HTTPStatus.REQUEST_TIMEOUT, "the request body did not arrive within "
                                                              f"{self.server.limits.read_timeout_s:g} s", close=True)
            except OSError as exc:
                raise HTTPProblem(HTTPStatus.BAD_REQUEST, f"the connection failed while reading the body ({exc})",
                                  close=True) from exc
            if not chunk:
                raise HTTPProblem(HTTPStatus.BAD_REQUEST, f"the request body ended after {got} of {length} bytes",
                                  close=True)
            chunks.append(chunk)
            got += len(chunk)
        self._body_read = True
        self.server.deadlines.clear(self.connection)
        return parse_json(b"".join(chunks))

    def _dispatch(self, method: str) -> None:
        self._body_read = False
        parts = urlsplit(self.path)
        path = parts.path.rstrip("/") or "/"
        try:
            if not self._authorised():
                raise HTTPProblem(HTTPStatus.UNAUTHORIZED, "missing or wrong bearer token (send 'Authorization: "
                                                           "Bearer <token>'; `cuda-agent serve` prints it at start)")
            allowed = allowed_methods(path)
            if allowed is None:
                raise HTTPProblem(HTTPStatus.NOT_FOUND, f"no route {path}; see docs/http_api.md")
            if method not in allowed:
                raise HTTPProblem(HTTPStatus.METHOD_NOT_ALLOWED, f"{method} is not allowed on {path}; use "
                                  f"{', '.join(sorted(allowed))}", headers={"Allow": ", ".join(sorted(allowed))})
            if method == "GET":
                self.server.deadlines.clear(self.connection)
            status, payload = self._route(path, parts.query)
            self._reply(status, payload)
        except HTTPProblem as problem:
            self.close_connection = self.close_connection or problem.close
            self._reply(problem.status, {"error": problem.message}, problem.headers)
        except (ConfigError, TaskError, WorkspaceError) as exc:
            self._reply(HTTPStatus.BAD_REQUEST, {"error": f"{type(exc).__name__}: {exc}"})
        except (StoreError, PoolError) as exc:
            self._reply(HTTPStatus.SERVICE_UNAVAILABLE, {"error": f"{type(exc).__name__}: {exc}"})
        except CudaAgentError as exc:
            self._reply(HTTPStatus.INTERNAL_SERVER_ERROR, {"error": f"{type(exc).__name__}: {exc}"})
        except Exception as exc:  # noqa: BLE001 - the server answers every request
            log.exception("request %s %s failed", method, self.path)
            self._reply(HTTPStatus.INTERNAL_SERVER_ERROR, {"error": f"internal error: {type(exc).__name__}: {exc}"})
        finally:
            self.server.deadlines.clear(self.connection)
            if not self._body_read and self.headers.get("Content-Length", "0").strip() not in ("", "0"):
                self.close_connection = True  # an unread body would be taken for the next request

    def _route(self, path: str, query: str) -> tuple[int, dict[str, Any]]:
        service = self.server.service
        if path == "/v1/health":
            return HTTPStatus.OK, service.health()
        if path == "/v1/evaluations":
            return HTTPStatus.ACCEPTED, service.submit(self._body())
        if path == "/v1/evaluations/wait":
            ids, wait_s = check_wait_request(self._body())
            return HTTPStatus.OK, {"evaluations": service.wait(ids, wait_s)}
        if path == "/v1/cache-keys":
            return HTTPStatus.OK, {"cache_key": service.cache_key(self._body())}
        if path == "/v1/builds":
            return HTTPStatus.OK, service.build(self._body())
        job_id = path.rsplit("/", 1)[1]
        waits = parse_qs(query).get("wait")
        status = service.wait([job_id], check_wait_query(waits[-1]))[0] if waits else service.status(job_id)
        if status is None or status["status"] == "unknown":
            raise HTTPProblem(HTTPStatus.NOT_FOUND, f"no evaluation with id {job_id}")
        return HTTPStatus.OK, status

    def do_GET(self) -> None:  # noqa: N802 - http.server's naming
        self._dispatch("GET")

    def do_POST(self) -> None:  # noqa: N802
        self._dispatch("POST")

    def do_PUT(self) -> None:  # noqa: N802
        self._dispatch("PUT")

    def do_DELETE(self) -> None:  # noqa: N802
        self._dispatch("DELETE")

    def do_PATCH(self) -> None:  # noqa: N802
        self._dispatch("PATCH")

    def do_OPTIONS(self) -> None:  # noqa: N802
        self._dispatch("OPTIONS")

    def do_HEAD(self) -> None:  # noqa: N802
        self._dispatch("HEAD")


class PoolHTTPServer(ThreadingHTTPServer):
    """A threading HTTP server bound to an `EvaluationService` (one thread per connection, at most
    ``limits.max_connections`` at once)."""

    daemon_threads = True
    request_queue_size = 256

    def __init__(self, address: tuple[str, int], service: EvaluationService, token: str | None = None,
                 limits: ServerLimits | None = None) -> None:
        self.limits = limits or ServerLimits()
        self.deadlines = _Deadlines(self.limits.read_timeout_s)
        self._open = 0
        self._open_lock = threading.Lock()
        self.refused = 0
        try:
            super().__init__(address, _Handler)
        except BaseException:
            self.deadlines.close()
            raise
        self.service = service
        self.token = token

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host}:{port}"

    def process_request(self, request: Any, client_address: Any) -> None:
        with self._open_lock:
            full = self._open >= self.limits.max_connections
            if full:
                self.refused += 1
            else:
                self._open += 1
        if full:
            self._refuse(request)
            return
        try:
            super().process_request(request, client_address)
        except BaseException:
            with self._open_lock:
                self._open -= 1
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self.deadlines.clear(request)
            with self._open_lock:
                self._open -= 1

    def _refuse(self, request: socket.socket) -> None:
        body = json.dumps({"error": f"too many open connections (limit {self.limits.max_connections}); retry "
                                    "shortly"}).encode()
        head = (f"HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nContent-Length: {len(body)}"
                "\r\nConnection: close\r\nRetry-After: 1\r\n\r\n").encode()
        try:
            request.settimeout(1.0)
            request.sendall(head + body)
        except OSError:
            pass
        self.shutdown_request(request)

    def server_close(self) -> None:
        self.deadlines.close()
        super().server_close()


def make_server(pool: Any, host: str = "127.0.0.1", port: int = 8000, *, token: str | None = None,
                limits: ServerLimits | None = None) -> PoolHTTPServer:
    """An HTTP server for ``pool`` (port 0 picks a free port); run it with ``serve_forever()``. Without ``token``
    every request is served unauthenticated: `cuda-agent serve` allows that only on loopback, when asked."""
    return PoolHTTPServer((host, port), EvaluationService(pool), token, limits)
