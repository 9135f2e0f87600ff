"""The worker process: runs one evaluation (``--job``), or serves many as a warm fork server (``--serve SOCKET``).

The fork server imports torch and the evaluator once, never initialises CUDA, and forks a fresh child per
evaluation: the child starts in milliseconds with everything imported, and owns the GPU context alone. Each
evaluation runs in its own session (process group), so a timeout kills everything it started. Results travel on
the sealed report channel (`cuda_agent.evaluator.report`): the evaluation holds no channel to the trusted side while
candidate code can run, and the trusted side believes one report from the evaluation's own process only.
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import sys
from typing import Any

# Import everything trusted now, before any candidate code can exist in this process.
import torch  # noqa: F401
import cuda_agent.evaluator  # noqa: F401
from cuda_agent.evaluator import pipeline
from cuda_agent.evaluator.checks.audit import audit
from cuda_agent.evaluator.report import WITHHELD_EXIT, ReportInbox, make_sender, wait_for_report


def _preload() -> None:
    """Import what the first evaluation would otherwise import lazily (torch._dynamo alone takes seconds, pulled
    in by the first dispatch mode), without initialising CUDA, so that forked children start warm."""
    import torch._dynamo  # noqa: F401
    import torch.profiler  # noqa: F401
    import torch.testing  # noqa: F401
    import torch.utils.cpp_extension  # noqa: F401  (single-file solutions import it; imported here, not by them)

    # Rationale: these capture trusted primitives (profiler, timers) at import; import them before any candidate.
    import cuda_agent.build.runtime  # noqa: F401
    import cuda_agent.evaluator.baselines  # noqa: F401
    import cuda_agent.evaluator.profile  # noqa: F401
    import cuda_agent.evaluator.speed_of_light  # noqa: F401
    from cuda_agent.evaluator.checks.guard import DispatchGuard

    with torch.no_grad(), DispatchGuard(strict=False, fp32_task=True):
        (torch.ones(4) * 2).sum()


def _apply_env(env: dict[str, str] | None) -> None:
    if env:
        os.environ.update({str(k): str(v) for k, v in env.items()})


def run_file_job(job_path: str) -> int:
    """Evaluate the job in ``job_path`` and report to the address it names (``report_to``)."""
    with open(job_path) as fh:
        payload = json.load(fh)
    return evaluate_and_report(payload["job"], payload.get("env"), str(payload["report_to"]))


def evaluate_and_report(job: dict[str, Any], env: dict[str, str] | None, address: str) -> int:
    """In the evaluation process: run ``job`` and report its result (or the error that stopped it) to ``address``
    on the sealed channel; return the process's exit code (0 once reported, `WITHHELD_EXIT` when unknown Python
    threads made it withhold the report)."""
    _apply_env(env)
    audit()
    send = make_sender()  # Rationale: bound before any candidate code exists in this process.
    threads: list[frozenset[int]] = []  # the Python threads alive when the candidate loaded
    try:
        report = {"result": pipeline.run_job(job, threads)}
    except BaseException as exc:  # noqa: BLE001 - the trusted side must hear why
        report = {"error": f"{type(exc).__name__}: {exc}"}
    return 0 if send(address, report, threads[0] if threads else None) else WITHHELD_EXIT


def _exit_code(pid: int) -> int | None:
    done, status = os.waitpid(pid, os.WNOHANG)
    return os.waitstatus_to_exitcode(status) if done else None


def _send(conn: socket.socket, message: dict[str, Any]) -> None:
    conn.sendall((json.dumps(message) + "\n").encode())


def _read_request(conn: socket.socket) -> dict[str, Any]:
    data = b""
    while not data.endswith(b"\n"):
        chunk = conn.recv(1 << 20)
        if not chunk:
            break
        data += chunk
    return json.loads(data.decode())


def _serve_one(conn: socket.socket, listener: socket.socket) -> None:
    """In the forked supervisor: start a new session, fork the evaluation, report its result and exit status."""
    listener.close()
    os.setsid()
    request = _read_request(conn)
    log_path = request.get("log_path") or f"/tmp/cuda_agent_eval_{os.getpid()}.log"
    _send(conn, {"pid": os.getpid()})
    inbox = ReportInbox()
    address = inbox.address
    child = os.fork()
    if child == 0:
        code = 1
        try:
            # Rationale: no channel to the trusted side while candidate code can run (a forged result written to
            # an inherited socket was believed).
            conn.close()
            inbox.close()
            fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            os.dup2(fd, 1)
            os.dup2(fd, 2)
            code = evaluate_and_report(request["job"], request.get("env"), address)
        except BaseException:  # noqa: BLE001 - nothing to report with; the exit code says it
            pass
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
    _, code = wait_for_report(inbox, child, lambda: _exit_code(child), deadline=float("inf"))
    payload, why = inbox.verdict(child)
    inbox.close()
    try:  # the inbox's verdict; the caller turns it into a result (isolation._from_report)
        _send(conn, {"report": payload, "why": why})
        _send(conn, {"exit": code, "log_path": log_path})
    except OSError:
        pass
    os._exit(0)


def serve(socket_path: str) -> None:
    _preload()
    if torch.cuda.is_initialized():
        raise RuntimeError("the warm worker initialised CUDA before forking; forked evaluations could not use it")
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # supervisors are reaped automatically
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(socket_path)
    os.chmod(socket_path, 0o600)
    listener.listen(64)
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    while True:
        conn, _ = listener.accept()
        pid = os.fork()
        if pid == 0:
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            _serve_one(conn, listener)
        conn.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m cuda_agent.evaluator.worker")
    parser.add_argument("--job")
    parser.add_argument("--serve")
    args = parser.parse_args(argv)
    if args.serve:
        serve(args.serve)
        return 0
    if not args.job:
        parser.error("give --job JOB.json (with report_to), or --serve SOCKET")
    return run_file_job(args.job)


if __name__ == "__main__":
    sys.exit(main())
