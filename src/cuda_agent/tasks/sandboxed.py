"""Validate untrusted task code in the sandbox, never in this process.

Why: validating a task means executing it (its module body, ``get_init_inputs``, ``Model(...)``, ``get_inputs``),
and task code from a folder someone sent, a parquet row or a hub dataset is code from strangers: a row could
write files, read secrets or hang just by being listed. So every task is dry-run (`cuda_agent.tasks.validate.
dry_run`, on PyTorch's meta device) inside one bubblewrap sandbox (`cuda_agent.sandbox.Sandbox`: no network, a
scratch workspace, the host's files out of sight, resource limits), each task in a forked process of its own
with a time limit: a task that hangs is killed and reported, the others still load.

The sandbox sees the cuda_agent package read-only (so the dry run is the same code as in-process validation) and
the Python environment (for torch). A task's verdict is advisory: a task that passes here is still executed only
in the evaluator's isolated process later.
"""
from __future__ import annotations

import json
import logging
import math
import os
import shlex
import sys
import tempfile
from pathlib import Path
from typing import Sequence

from cuda_agent.errors import SandboxError, TaskError
from cuda_agent.sandbox import Sandbox, SandboxLimits, check_sandbox

log = logging.getLogger(__name__)

TIME_LIMIT_ENV = "CUDA_AGENT_TASK_TIME_LIMIT_S"
DEFAULT_TIME_LIMIT_S = 30.0
STARTUP_ALLOWANCE_S = 240.0
MAX_OUTPUT_BYTES = 64 << 20

RUNNER = r'''
import ctypes, json, os, select, signal, sys, time
ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE 0: the tasks cannot trace this runner or read its fds
src, limit, parallel = sys.argv[1], float(sys.argv[2]), int(sys.argv[3])
sys.path.insert(0, src)
import torch  # noqa: F401  (once, before the forks)
from cuda_agent.tasks.validate import dry_run
WARMUP = """
import torch, torch.nn as nn, torch.nn.functional as F
class Model(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.conv = nn.Conv2d(3, n, 3); self.bn = nn.BatchNorm2d(n); self.fc = nn.Linear(n, n)
    def forward(self, x):
        return self.fc(F.relu(self.bn(self.conv(x))).mean((2, 3)))
def get_inputs():
    return [torch.randn(2, 3, 8, 8)]
def get_init_inputs():
    return [4]
"""
dry_run(WARMUP, "warm-up")  # our own code: imports what PyTorch loads lazily once, not in every fork
jobs = json.load(open("tasks.json"))
out = os.fdopen(os.dup(1), "w")
null = os.open(os.devnull, os.O_RDWR)

def report(origin, error):
    out.write(json.dumps({"origin": origin, "error": error}) + "\n")
    out.flush()

def run_child(job, w):
    os.setpgid(0, 0)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    try:
        with open(job["file"], encoding="utf-8") as fh:
            dry_run(fh.read(), job["origin"])
        message = {"error": None}
    except BaseException as exc:
        message = {"error": str(exc) or type(exc).__name__}
    os.write(w, json.dumps(message).encode()[:60000])
    os._exit(0)

running = {}
pending = list(jobs)
while pending or running:
    while pending and len(running) < parallel:
        job = pending.pop(0)
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(r)
            run_child(job, w)
        os.close(w)
        running[pid] = (job, r, time.monotonic(), bytearray())
    ready, _, _ = select.select([v[1] for v in running.values()], [], [], 0.1)
    for pid, (job, r, started, buf) in list(running.items()):
        if r in ready:
            chunk = os.read(r, 65536)
            buf.extend(chunk)
            if chunk:
                continue
        elif time.monotonic() - started < limit:
            continue
        else:
            try:
                os.killpg(pid, signal.SIGKILL)
            except OSError:
                os.kill(pid, signal.SIGKILL)
            report(job["origin"], f"{job['origin']}: validation did not finish within {limit:g} s and was killed "
                                  "(does get_inputs, get_init_inputs or Model hang?)")
            os.waitpid(pid, 0)
            os.close(r)
            del running[pid]
            continue
        _, status = os.waitpid(pid, 0)
        os.close(r)
        del running[pid]
        try:
            report(job["origin"], json.loads(bytes(buf))["error"])
        except ValueError:
            how = f"signal {-os.waitstatus_to_exitcode(status)}" if os.WIFSIGNALED(status) else \
                f"exit code {os.waitstatus_to_exitcode(status)}"
            report(job["origin"], f"{job['origin']}: validation crashed ({how})")
'''


def default_time_limit() -> float:
    """Seconds each task's dry run may take: ``$CUDA_AGENT_TASK_TIME_LIMIT_S`` or `DEFAULT_TIME_LIMIT_S`."""
    raw = os.environ.get(TIME_LIMIT_ENV)
    if not raw:
        return DEFAULT_TIME_LIMIT_S
    return check_time_limit(raw, TIME_LIMIT_ENV)


def check_time_limit(value: float | str, name: str) -> float:
    """A per-task time limit: a finite number of seconds in (0, 3600]; raises `TaskError` naming ``name``."""
    try:
        seconds = float(value)
    except ValueError as exc:
        raise TaskError(f"{name} must be a number of seconds, got {value!r}") from exc
    if not math.isfinite(seconds) or not 0 < seconds <= 3600:
        raise TaskError(f"{name} must be finite and in (0, 3600] seconds, got {value!r}")
    return seconds


def validate_in_sandbox(items: Sequence[tuple[str, str]], *, time_limit_s: float | None = None,
                        parallel: int | None = None) -> dict[str, str | None]:
    """Dry-run each ``(origin, code)`` in the sandbox; return ``{origin: None}`` for a usable task and
    ``{origin: reason}`` for one that is not (its error, a hang killed at ``time_limit_s``, a crash).

    Raises `TaskError` when the sandbox cannot run here (bubblewrap missing or refused): untrusted task code is
    then not executed at all; load with ``validate=False`` to check syntax only."""
    if not items:
        return {}
    limit = check_time_limit(time_limit_s, "time_limit_s") if time_limit_s is not None else default_time_limit()
    workers = max(1, parallel or min(4, os.cpu_count() or 1))
    try:
        check_sandbox()
    except SandboxError as exc:
        raise TaskError(f"task code is validated only inside the sandbox, which cannot run here: {exc}; or skip "
                        "the dry run (syntax is still checked) with validate=False / --no-validate") from exc
    package = Path(__file__).resolve().parents[1]
    budget = STARTUP_ALLOWANCE_S + limit * (math.ceil(len(items) / workers) + 1)
    limits = SandboxLimits(timeout_s=budget, max_processes=1024, max_output_bytes=MAX_OUTPUT_BYTES,
                           output_kill_bytes=2 * MAX_OUTPUT_BYTES, disk_quota_bytes=1 << 30)
    with tempfile.TemporaryDirectory(prefix="cuda-agent-taskcheck-") as tmp:
        workspace = Path(tmp) / "ws"
        (workspace / "tasks").mkdir(parents=True)
        jobs = []
        for n, (origin, code) in enumerate(items):
            name = f"tasks/{n:06d}.py"
            (workspace / name).write_text(code, encoding="utf-8")
            jobs.append({"origin": origin, "file": name})
        (workspace / "tasks.json").write_text(json.dumps(jobs))
        (workspace / "runner.py").write_text(RUNNER)
        command = shlex.join([sys.executable, "-B", "runner.py", str(package.parent), f"{limit}",
                              str(workers)])
        try:
            with Sandbox(workspace, limits=limits, protected=(), extra_ro=[package]) as sandbox:
                result = sandbox.exec(command)
        except SandboxError as exc:
            raise TaskError(f"could not start the sandbox to validate tasks: {exc}") from exc
    verdicts = _read_verdicts(result.stdout)
    for violation in result.violations:
        log.warning("task validation sandbox: %s (%s): %s", violation.kind, violation.evidence, violation.detail)
    missing = [origin for origin, _ in items if origin not in verdicts]
    if missing:
        why = "it ran out of time" if result.timed_out else f"it exited with {result.returncode}"
        tail = result.stderr.strip().splitlines()[-1:] or [""]
        for origin in missing:
            verdicts[origin] = f"{origin}: the validation sandbox gave no verdict ({why}; {tail[0][:300]})"
    return verdicts


def _read_verdicts(stdout: str) -> dict[str, str | None]:
    verdicts: dict[str, str | None] = {}
    for line in stdout.splitlines():
        try:
            entry = json.loads(line)
            verdicts[str(entry["origin"])] = None if entry["error"] is None else str(entry["error"])
        except (ValueError, KeyError, TypeError):
            continue
    return verdicts
