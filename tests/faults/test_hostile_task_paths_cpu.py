"""A hostile task through `cuda-agent serve` (the real evaluator on this CPU, task.code sent over HTTP) and through
`cuda-agent bench offline`: its code runs (the verdict needs it) and nothing of the host comes out."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from fault_probes import ServeProcess
from fault_probes.cli_probes import run_cli
from fault_probes.task_code import PHASES, SOLUTION, HostileSetup, read_outputs
from cuda_agent.sandbox import sandbox_available

pytestmark = pytest.mark.skipif(not sandbox_available("userns"), reason="bubblewrap cannot run here")


def test_serve_evaluates_a_hostile_task_with_nothing_out(tmp_path: Path) -> None:
    store = tmp_path / "store.db"
    with HostileSetup() as setup:
        server = ServeProcess.start(store=f"sqlite:///{store}", standin_s=None, gpus=("0",), env=setup.env(),
                                    timeout_s=300)
        try:
            body = {"task": {"id": "user/hostile", "code": setup.task_code()},
                    "solution": {"kind": "file", "encoding": "text", "files": {"solution.py": SOLUTION}},
                    "kind": "verify", "config": {"mode": "relaxed"}, "force": True}
            reply = server.request("POST", "/v1/evaluations", body)
            assert reply.status == 202, reply.body
            status = server.wait_for(str(reply.json["id"]), 600)
        finally:
            code, left = server.stop()
        assert code == 0 and not left
        result = status.get("result") or {}
        assert result.get("stage") == "correct", status
        texts = [json.dumps(status), "".join(server.output), *read_outputs([store])]
        report = setup.assess(texts, phases=len(PHASES))
        assert report["reads_leaked"] == 0 and not report["connections"], report
        assert report["writes_succeeded"] == 0, report
        assert server.token and server.token not in json.dumps(status)


def test_bench_offline_scores_a_hostile_task_with_nothing_out(tmp_path: Path) -> None:
    with HostileSetup() as setup:
        (tmp_path / "tasks").mkdir()
        (tmp_path / "tasks" / "hostile.py").write_text(setup.task_code())
        (tmp_path / "solutions").mkdir()
        (tmp_path / "solutions" / "user_hostile.py").write_text(SOLUTION)
        out, store = tmp_path / "out", tmp_path / "store.db"
        ran = run_cli(["bench", "offline", "--solutions", str(tmp_path / "solutions"), "--tasks",
                       str(tmp_path / "tasks"), "--out", str(out), "--gpus", "0", "--mode", "relaxed", "--store",
                       f"sqlite:///{store}"], env=setup.env(), timeout_s=800)
        assert ran.returncode == 0, ran.output[-3000:]
        results = json.loads((out / "results.json").read_text())
        assert "timed" in json.dumps(results), results
        report = setup.assess([ran.output, *read_outputs([out, store])], phases=len(PHASES))
        assert report["reads_leaked"] == 0 and not report["connections"], report
        assert report["writes_succeeded"] == 0, report
        assert not ran.left
