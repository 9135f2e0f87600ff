"""On a GPU: the judge's sandbox gets the GPU (the hostile task is verified and timed on it) and nothing of the host;
a SIGKILL of `cuda-agent eval` during a call leaves no process (none holding the GPU) 5 s later."""
from __future__ import annotations

import json
import signal
from pathlib import Path

import pytest

from fault_probes.cli_probes import run_cli
from fault_probes.task_code import PHASES, SOLUTION, HostileSetup, read_outputs

pytestmark = pytest.mark.gpu


def test_eval_on_the_gpu_runs_a_hostile_task_with_nothing_out(tmp_path: Path) -> None:
    with HostileSetup() as setup:
        task, solution, out = tmp_path / "task.py", tmp_path / "sol.py", tmp_path / "out.json"
        task.write_text(setup.task_code(batch=4096))
        solution.write_text(SOLUTION)
        ran = run_cli(["eval", "--task", str(task), "--solution", str(solution), "--device", "cuda", "--mode",
                       "relaxed", "--json", str(out)], env=setup.env(), timeout_s=600)
        result = json.loads(out.read_text())
        assert result["stage"] == "timed" and result["device"].startswith("cuda"), result
        report = setup.assess([ran.output, *read_outputs([out])], phases=len(PHASES))
        assert report["reads_leaked"] == 0 and not report["connections"], report
        assert report["writes_succeeded"] == 0, report
        assert not ran.left


def test_sigkill_of_eval_on_the_gpu_leaves_no_process(tmp_path: Path) -> None:
    task, solution = tmp_path / "task.py", tmp_path / "sol.py"
    with HostileSetup() as setup:
        task.write_text(setup.task_code())
    solution.write_text(SOLUTION.replace("return torch.relu", "import time\n        time.sleep(600)\n"
                                         "        return torch.relu"))
    ran = run_cli(["eval", "--task", str(task), "--solution", str(solution), "--device", "cuda", "--mode", "relaxed",
                   "--no-profile", "--timeout", "500"], signal_after_s=20, sig=signal.SIGKILL,
                  after_process="ca_runner.boot", timeout_s=300)
    assert ran.returncode == -signal.SIGKILL
    assert ran.left == [], f"alive 5 s after SIGKILL: {ran.left}"
