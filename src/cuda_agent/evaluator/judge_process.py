"""The judge's process: runs one evaluation (``--job``), or serves many as a warm fork server (``--serve SOCKET``).

The judge runs no candidate code (the candidate has its own sandboxed process, `cuda_agent.evaluator.runner`), so its
result can travel back plainly. The fork server imports torch and the judge once, never initialises CUDA, and forks
a fresh judge per evaluation in a session of its own, which starts in milliseconds with everything imported and
owns its GPU context alone.
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import sys
import threading
from typing import Any

import torch  # noqa: F401  (imported once, before any fork)
from cuda_agent.evaluator.judge import pipeline


def _preload() -> None:
    """Import what the first evaluation would otherwise import lazily (torch._dynamo alone takes seconds), without
    initialising CUDA, so that forked judges start warm."""
    import torch._dynamo  # noqa: F401
    import torch.profiler  # noqa: F401
    import torch.testing  # noqa: F401, F811

    import cuda_agent.evaluator.baselines  # noqa: F401
    import cuda_agent.evaluator.profile  # noqa: F401
    import cuda_agent.evaluator.speed_of_light  # noqa: F401, F811
    from cuda_agent.evaluator.judge.candidate import runner_copy

    runner_copy()


def _apply_env(env: dict[str, str] | None) -> None:
    if env:
        os.environ.update({str(k): str(v) for k, v in env.items()})


def _reply(job: dict[str, Any]) -> dict[str, Any]:
    """The evaluation's result and the baseline records it measured (the trusted caller checks and stores them)."""
    from cuda_agent.evaluator.baselines import handed_back

    result = pipeline.run_job(job)
    return {"result": result, "baselines": handed_back()}


def run_file_job(job_path: str, result_path: str) -> int:
    """Evaluate the job in ``job_path`` and write the reply (`_reply`) to ``result_path``."""
    with open(job_path) as fh:
        payload = json.load(fh)
    _apply_env(payload.get("env"))
    reply = _reply(payload["job"])
    tmp = result_path + ".tmp"
    with open(tmp, "w") as fh:
        json.dump(reply, fh)
    os.replace(tmp, result_path)
    return 0


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


def _serve_one(conn: socket.socket, listener: socket.socket, spare: Any) -> None:
    """In the forked judge: a session of its own, the evaluation (adopting the server's spare candidate process),
    its result on the connection."""
    from cuda_agent.evaluator.judge.candidate import offer_spare

    listener.close()
    os.setsid()
    offer_spare(spare)
    code = 1
    try:
        request = _read_request(conn)
        _send(conn, {"pid": os.getpid(), "candidate_pgid": spare.pgid if spare is not None else None})
        log_path = request.get("log_path")
        if log_path:
            fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            os.dup2(fd, 1)
            os.dup2(fd, 2)
        _apply_env(request.get("env"))
        _send(conn, _reply(request["job"]))
        code = 0
    except BaseException as exc:  # noqa: BLE001 - report, then exit
        try:
            _send(conn, {"error": f"{type(exc).__name__}: {exc}"})
        except OSError:
            pass
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


SPARES = 2  # the default number of spare candidate processes (`serve`'s ``spares``)


def _spare_processes(spare: Any) -> set[int]:
    """The processes of a spare (`candidate.Spare`) the server started: the candidate's and its compile broker's."""
    if spare is None:
        return set()
    return {pid for pid in (spare.pgid, spare.broker_pgid) if pid is not None}


def _new_spare() -> Any:
    """A spare candidate process for the next evaluation; None where no sandbox can be made (each evaluation then
    starts its own, or refuses)."""
    from cuda_agent.evaluator.judge.candidate import make_spare
    from cuda_agent.sandbox.process import gpu_device_nodes

    try:
        return make_spare(gpu=bool(gpu_device_nodes()))
    except Exception as exc:  # noqa: BLE001 - evaluations start their own then
        sys.stderr.write(f"no spare candidate process: {exc}\n")
        return None


def _end_with_parent() -> None:
    """Exit, with every judge forked from here, once the process that started this server is gone: its end of our
    stdin (a pipe) closes however it ended, SIGKILL included, when it had no chance to stop us. The watching thread
    reads the raw descriptor, so a judge forked while it waits inherits no Python lock it holds."""
    def watch() -> None:
        try:
            while os.read(0, 4096):
                pass
        except OSError:
            pass
        # In its sandbox the server is bubblewrap's command, in the group of the namespace's init (pid 1), where
        # killpg would mean "every process"; its own end ends the namespace's init, and the kernel then kills every
        # process of the namespace (the judges and the candidates' sandboxes).
        if os.getpgrp() == os.getpid():
            os.killpg(os.getpgrp(), signal.SIGKILL)
        os.kill(os.getpid(), signal.SIGKILL)

    threading.Thread(target=watch, daemon=True, name="end-with-parent").start()


def _children() -> list[int]:
    found: list[int] = []
    for path in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{path}/children") as fh:
                found += [int(x) for x in fh.read().split()]
        except (OSError, ValueError):
            continue
    return found


def _sweep(judges: dict[int, set[int]], keep: set[int]) -> None:
    """Kill every child of the server that is neither a running judge nor a spare candidate process or its compile
    broker (``judges`` maps a running judge to what it adopted; ``keep``: the spares' processes): what a judge
    left behind (a process of the task's code that started a session of its own outlives the judge's group, and
    comes here, the server being the subreaper). Rationale: judges share this sandbox's uid and PID namespace, so a
    leftover could otherwise trace the next judge."""
    for pid in list(judges):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            del judges[pid]
    running = set(judges) | keep | {pid for adopted in judges.values() for pid in adopted}
    for child in _children():
        if child in running:
            continue
        try:
            os.killpg(child, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        try:
            os.kill(child, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def _ignore_children() -> None:
    """Let the kernel reap this server's children as they exit from now on, and reap those that already have.

    Rationale: the server is a subreaper, so the sandbox probe's bubblewrap init, whose monitor may exit first, is
    adopted here; ignoring SIGCHLD reaps only the children that exit afterwards, and one that had exited before
    stayed a zombie for the server's whole life (one warm worker in two)."""
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def serve(socket_path: str, *, end_with_parent: bool = False, spares_wanted: int = SPARES) -> None:
    """The warm worker's fork server: a judge forked per connection, ``spares_wanted`` spare candidate processes
    kept started ahead (0: none; every evaluation starts its own)."""
    import ctypes

    if end_with_parent:
        _end_with_parent()
    ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER: judges' orphans come here
    _preload()
    if torch.cuda.is_initialized():
        raise RuntimeError("the warm worker initialised CUDA before forking; forked evaluations could not use it")
    from cuda_agent.sandbox import sandbox_available

    sandbox_available("userns")  # probed (and remembered for the judges) while children can still be waited for
    _ignore_children()  # judges and spare candidate processes are reaped automatically
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(socket_path)
    os.chmod(socket_path, 0o600)
    listener.listen(64)
    # Rationale (speed): a candidate process needs seconds to import torch; evaluations arriving back to back each
    # adopt one started ahead of time, oldest first.
    spares = [s for s in (_new_spare() for _ in range(spares_wanted)) if s is not None]
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    judges: dict[int, set[int]] = {}  # running judge -> the spare's processes it adopted
    while True:
        conn, _ = listener.accept()
        # Rationale: a spare's compile broker is the server's child too; swept, every Triton kernel of the
        # evaluation that adopts the spare fails ("the compile broker is gone": all three Triton cases on the H200,
        # 2026-12-04)
        _sweep(judges, {pid for s in spares for pid in _spare_processes(s)})
        spare = spares.pop(0) if spares else None
        pid = os.fork()
        if pid == 0:
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            for other in spares:
                os.close(other.sock_fd)
                os.close(other.status_fd)
            _serve_one(conn, listener, spare)
        conn.close()
        judges[pid] = _spare_processes(spare)
        if spare is not None:
            os.close(spare.sock_fd)  # the judge owns it now
            os.close(spare.status_fd)
        fresh = _new_spare() if spares_wanted else None
        if fresh is not None:
            spares.append(fresh)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m cuda_agent.evaluator.judge_process")
    parser.add_argument("--job")
    parser.add_argument("--result")
    parser.add_argument("--serve")
    parser.add_argument("--end-with-parent", action="store_true",
                        help="with --serve: stop when stdin (a pipe from the starting process) closes")
    parser.add_argument("--spares", type=int, default=SPARES,
                        help="with --serve: spare candidate processes kept started ahead (0: none)")
    args = parser.parse_args(argv)
    if args.spares < 0:
        parser.error("--spares must be 0 or more")
    if args.serve:
        serve(args.serve, end_with_parent=args.end_with_parent, spares_wanted=args.spares)
        return 0
    if not (args.job and args.result):
        parser.error("give --job JOB.json --result RESULT.json, or --serve SOCKET")
    return run_file_job(args.job, args.result)


if __name__ == "__main__":
    sys.exit(main())
