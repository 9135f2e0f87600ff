"""Task code is untrusted: a hostile task evaluated through `cuda-agent eval` gets no secret, host file, write or
connection out, and a SIGKILL of the command during a call leaves none of its processes alive 5 s later."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from fault_probes.cli_probes import run_cli
from fault_probes.task_code import PHASES, SOLUTION, HostileSetup, read_outputs
from cuda_agent.sandbox import sandbox_available

pytestmark = pytest.mark.skipif(not sandbox_available("userns"), reason="bubblewrap cannot run here")


def test_the_hostile_task_leaks_when_run_on_the_host(tmp_path: Path) -> None:
    """The detector itself: the same task run plainly on the host gets the canaries (so zero below means blocked)."""
    with HostileSetup() as setup:
        task = tmp_path / "task.py"
        task.write_text(setup.task_code())
        done = subprocess.run([sys.executable, "-c", f"exec(open({str(task)!r}).read())"], capture_output=True,
                              text=True, timeout=300, env={**os.environ, **setup.env()})
        report = setup.assess([done.stdout, done.stderr], phases=1)
        assert report["reads_leaked"] >= 5, report
        assert report["writes_succeeded"] >= 3, report
        assert report["connections"], report


def test_eval_runs_a_hostile_task_with_nothing_out(tmp_path: Path) -> None:
    with HostileSetup() as setup:
        task, solution, out = tmp_path / "task.py", tmp_path / "sol.py", tmp_path / "out.json"
        task.write_text(setup.task_code())
        solution.write_text(SOLUTION)
        ran = run_cli(["eval", "--task", str(task), "--solution", str(solution), "--device", "cpu", "--mode",
                       "relaxed", "--no-profile", "--json", str(out)], env=setup.env(), timeout_s=600)
        result = json.loads(out.read_text())
        # the task's code ran in every phase (the verdict needs its inputs, its model and its forward)
        assert result["stage"] == "correct", result
        report = setup.assess([ran.output, *read_outputs([out])], phases=len(PHASES))
        assert report["read_attempts"] >= 10
        assert report["reads_leaked"] == 0, report
        assert report["writes_succeeded"] == 0, report
        assert not report["connections"], report
        assert not ran.left


def test_sigkill_of_eval_during_a_call_leaves_no_process(tmp_path: Path) -> None:
    task, solution = tmp_path / "task.py", tmp_path / "sol.py"
    with HostileSetup() as setup:
        task.write_text(setup.task_code())
    solution.write_text(SOLUTION.replace("return torch.relu", "import time\n        time.sleep(600)\n"
                                         "        return torch.relu"))
    ran = run_cli(["eval", "--task", str(task), "--solution", str(solution), "--device", "cpu", "--mode", "relaxed",
                   "--no-profile", "--timeout", "500"], signal_after_s=25, sig=signal.SIGKILL,
                  after_process="ca_runner.boot", timeout_s=300)
    assert ran.returncode == -signal.SIGKILL
    assert ran.left == [], f"alive 5 s after SIGKILL: {ran.left}"


LEFTOVER = '''
import os, torch, torch.nn as nn
if os.fork() == 0:  # a process of the task's code in a session of its own: it outlives the judge's group
    os.setsid()
    if os.fork() == 0:
        os.execvp("sleep", ["sleep", "987654"])
    os._exit(0)
class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x) * 2.0
def get_inputs():
    return [torch.randn(8, 64)]
def get_init_inputs():
    return []
'''


def test_the_warm_worker_kills_what_a_judge_left_before_the_next_judge(tmp_path: Path) -> None:
    from cuda_agent.evaluator import EvalConfig, WarmWorker, evaluate
    from fault_probes.server import cmdline
    from cuda_agent.procs import descendants
    from cuda_agent.tasks.task import Task

    solution = tmp_path / "sol.py"
    solution.write_text(SOLUTION)
    config = EvalConfig(mode="relaxed", profile=False, device="cpu")

    def leftovers(worker: WarmWorker) -> list[int]:
        return [pid for pid in descendants(worker.pid or 0) if "987654" in cmdline(pid)]

    with WarmWorker() as worker:
        first = evaluate(Task(id="user/leftover", code=LEFTOVER), solution, config, worker=worker)
        assert first.stage == "correct", first.reason
        assert leftovers(worker), "the task's process did not outlive its judge (nothing to sweep)"
        second = evaluate(Task(id="user/next", code=LEFTOVER.replace("987654", "123")), solution, config,
                          worker=worker)
        assert second.stage == "correct", second.reason
        assert leftovers(worker) == []
