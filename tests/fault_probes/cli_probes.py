"""Probes of the commands themselves: numeric flags that are not finite, serving without a token off loopback,
and `cuda-agent tasks` given task code that hangs, writes files, or is interrupted by SIGTERM."""
from __future__ import annotations

import os
import secrets
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

from cuda_agent.procs import descendants
from fault_probes.base import Ledger, expect
from fault_probes.server import alive, cmdline, package_parent

GOOD_TASK = '''import torch
import torch.nn as nn

class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x) * {scale}

def get_inputs():
    return [torch.rand(64, 64)]

def get_init_inputs():
    return []
'''


@dataclass(frozen=True)
class Ran:
    """A finished command: exit status, its output (stdout and stderr), seconds, and the pids of processes it
    started that were still alive after it exited."""

    returncode: int
    output: str
    seconds: float
    left: list[int]


def run_cli(args: Sequence[str], *, timeout_s: float = 300.0, signal_after_s: float | None = None,
            sig: int = signal.SIGTERM, after_process: str | None = None, env: dict[str, str] | None = None) -> Ran:
    """Run ``cuda-agent ARGS`` (this checkout's code), watching which processes it starts; with ``signal_after_s``
    send it ``sig`` that many seconds after the start (or, with ``after_process``, after a descendant whose command
    line contains that text appeared). Past ``timeout_s`` it is killed (and that shows in the result)."""
    src = package_parent()
    full_env = {**os.environ, **(env or {})}
    full_env["PYTHONPATH"] = src + (os.pathsep + full_env["PYTHONPATH"] if full_env.get("PYTHONPATH") else "")
    started = time.monotonic()
    proc = subprocess.Popen([sys.executable, "-m", "cuda_agent.cli.main", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, env=full_env)
    seen: set[int] = set()
    signalled = False
    chunks: list[str] = []
    reader = threading.Thread(target=lambda: chunks.append(proc.stdout.read() if proc.stdout else ""), daemon=True)
    reader.start()
    clock = None if after_process else started
    while proc.poll() is None:
        seen.update(descendants(proc.pid))
        if clock is None and any(after_process in cmdline(pid) for pid in seen if alive(pid)):
            clock = time.monotonic()
        elapsed = time.monotonic() - started
        if signal_after_s is not None and not signalled and clock is not None and \
                time.monotonic() - clock >= signal_after_s:
            proc.send_signal(sig)
            signalled = True
        if elapsed > timeout_s:
            proc.kill()
            break
        time.sleep(0.05)
    proc.wait()
    reader.join(30)
    end = time.monotonic() + 5
    left = [pid for pid in seen if alive(pid)]
    while left and time.monotonic() < end:
        time.sleep(0.05)
        left = [pid for pid in left if alive(pid)]
    return Ran(proc.returncode, "".join(chunks), time.monotonic() - started, left)


def bad_flags(workdir: Path, ledger: Ledger) -> str:
    checks = [
        (["eval", "--task", "t.py", "--solution", "s.py", "--timeout", "nan"], "--timeout"),
        (["eval", "--task", "t.py", "--solution", "s.py", "--timeout", "inf"], "--timeout"),
        (["eval", "--task", "t.py", "--solution", "s.py", "--timeout", "-5"], "--timeout"),
        (["serve", "--standin", "nan", "--store", "none", "--port", "0"], "--standin"),
        (["serve", "--standin", "0", "--store", "none", "--port", "0", "--read-timeout", "inf"], "--read-timeout"),
        (["serve", "--standin", "0", "--store", "none", "--port", "0", "--drain-timeout", "-1"], "--drain-timeout"),
        (["serve", "--host", "0.0.0.0", "--insecure-no-token", "--standin", "0", "--store", "none", "--port", "0"],
         "loopback only"),
        (["tasks", str(workdir), "--task-timeout", "nan"], "--task-timeout"),
    ]
    for args, needle in checks:
        ran = run_cli(args, timeout_s=60)
        expect(ran.returncode == 2 and needle in ran.output, f"cuda-agent {' '.join(args)}: exit {ran.returncode}, "
                                                             f"output {ran.output[-300:]!r}")
        expect("listening on" not in ran.output, f"cuda-agent {' '.join(args)} started serving")
    return f"{len(checks)} invalid flag values refused with exit 2 before anything started"


def _task_folder(folder: Path, extra: dict[str, str]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "a_good.py").write_text(GOOD_TASK.format(scale=2.0))
    (folder / "c_good.py").write_text(GOOD_TASK.format(scale=3.0))
    for name, code in extra.items():
        (folder / name).write_text(code)
    return folder


def tasks_hang(workdir: Path, ledger: Ledger) -> str:
    hang = GOOD_TASK.format(scale=1.0).replace("    return [torch.rand(64, 64)]", "    while True:\n        pass")
    folder = _task_folder(workdir / "hanging", {"b_hangs.py": hang})
    ran = run_cli(["tasks", str(folder), "--task-timeout", "3"], timeout_s=400)
    expect(ran.returncode == 0, f"exit {ran.returncode}: {ran.output[-500:]}")
    expect("user/a_good" in ran.output and "user/c_good" in ran.output, f"good tasks missing: {ran.output[-800:]}")
    expect("did not finish within 3 s" in ran.output and "b_hangs" in ran.output,
           f"the hanging task is not reported: {ran.output[-800:]}")
    expect(not ran.left, f"processes left: {ran.left}")
    return f"a task whose get_inputs hangs was killed at 3 s and reported; the other two loaded ({ran.seconds:.0f} s)"


def tasks_write_files(workdir: Path, ledger: Ledger) -> str:
    import pyarrow as pa
    import pyarrow.parquet as pq

    marker = workdir / f"written-by-a-row-{secrets.token_hex(4)}"
    evil = (f"import os, pathlib\npathlib.Path({str(marker)!r}).write_text('x')\n"
            f"os.system('touch {marker}.sh')\n" + GOOD_TASK.format(scale=1.0))
    rows = {"ops": ["['relu']", "['relu']"], "data_source": ["probe", "probe"],
            "code": [GOOD_TASK.format(scale=2.0), evil]}
    path = workdir / "rows.parquet"
    pq.write_table(pa.table(rows), path)
    ran = run_cli(["tasks", str(path), "--task-timeout", "20"], timeout_s=400)
    expect(ran.returncode == 0 and "ops6k/00000" in ran.output, f"exit {ran.returncode}: {ran.output[-600:]}")
    expect(not marker.exists() and not Path(f"{marker}.sh").exists(), "a listed row wrote a file on the host")
    expect(not ran.left, f"processes left: {ran.left}")
    return "a parquet row that writes files at import ran only in the sandbox: no file appeared on the host"


def tasks_sigterm(workdir: Path, ledger: Ledger) -> str:
    hang = GOOD_TASK.format(scale=1.0).replace("    return [torch.rand(64, 64)]", "    while True:\n        pass")
    folder = _task_folder(workdir / "interrupted", {"b_hangs.py": hang})
    ran = run_cli(["tasks", str(folder), "--task-timeout", "600"], timeout_s=300, signal_after_s=8,
                  after_process="runner.py")
    expect(ran.returncode == 128 + signal.SIGTERM, f"exit {ran.returncode}: {ran.output[-400:]}")
    expect(not ran.left, f"processes left after SIGTERM: {ran.left}")
    return f"SIGTERM during task validation: exit {ran.returncode}, no sandbox or task process left"


def eval_sigterm(workdir: Path, ledger: Ledger) -> str:
    """SIGTERM to `cuda-agent eval` while its isolated evaluation hangs: nothing it started may be left."""
    task = workdir / "task.py"
    task.write_text(GOOD_TASK.format(scale=1.0))
    solution = workdir / "solution.py"
    solution.write_text("import torch.nn as nn\n\nclass ModelNew(nn.Module):\n    def forward(self, x):\n"
                        "        while True:\n            pass\n")
    ran = run_cli(["eval", "--task", str(task), "--solution", str(solution), "--device", "cpu", "--mode", "relaxed",
                   "--timeout", "600"], timeout_s=300, signal_after_s=3, after_process="cuda_agent.evaluator")
    expect(ran.returncode == 128 + signal.SIGTERM, f"exit {ran.returncode}: {ran.output[-400:]}")
    expect(not ran.left, f"processes left after SIGTERM: {ran.left}")
    return f"SIGTERM during a hanging evaluation: exit {ran.returncode}, no evaluator process left"


def bench_sigterm(workdir: Path, ledger: Ledger) -> str:
    """SIGTERM to `cuda-agent bench offline --standin` while its pool's workers are busy: nothing is left."""
    for name in ("1_first", "2_second"):
        (workdir / "tasks" / "level1").mkdir(parents=True, exist_ok=True)
        (workdir / "tasks" / "level1" / f"{name}.py").write_text(GOOD_TASK.format(scale=1.0))
        solution = workdir / "solutions" / "level1" / name
        (solution / "kernels").mkdir(parents=True, exist_ok=True)
        (solution / "model_new.py").write_text("# stand-in\n")
        (solution / "kernels" / "standin.json").write_text('{"seconds": 120}')
    ran = run_cli(["bench", "offline", "--solutions", str(workdir / "solutions"), "--tasks", str(workdir / "tasks"),
                   "--standin", "--store", f"sqlite:///{workdir / 'store.db'}", "--out", str(workdir / "out")],
                  timeout_s=300, signal_after_s=3, after_process="cuda_agent.pool.worker_main")
    expect(ran.returncode == 128 + signal.SIGTERM, f"exit {ran.returncode}: {ran.output[-400:]}")
    expect(not ran.left, f"processes left after SIGTERM: {ran.left}")
    return f"SIGTERM during an offline bench: exit {ran.returncode}, no pool worker left"


CLI_PROBES: dict[str, Callable[[Path, Ledger], str]] = {
    "invalid_numeric_flags_and_insecure_serving": bad_flags,
    "tasks_hanging_get_inputs": tasks_hang,
    "tasks_row_that_writes_a_file": tasks_write_files,
    "tasks_sigterm_leaves_no_process": tasks_sigterm,
    "eval_sigterm_leaves_no_process": eval_sigterm,
    "bench_sigterm_leaves_no_process": bench_sigterm,
}
