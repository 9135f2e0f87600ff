"""The synthesis filters run candidate tasks (model-written under ``--composer llm``) in sandboxed workers: a hostile
candidate gets no secret, host file, write or connection out, and its verdict is still measured."""
from __future__ import annotations

import time

import pytest

from fault_probes.task_code import PHASES, HostileSetup
from cuda_agent.sandbox import sandbox_available
from cuda_agent.synth.filter_workers import WorkerPool
from cuda_agent.synth.filters import FilterConfig

pytestmark = pytest.mark.skipif(not sandbox_available("userns"), reason="bubblewrap cannot run here")


def test_a_hostile_candidate_task_is_filtered_with_nothing_out(monkeypatch: pytest.MonkeyPatch) -> None:
    config = FilterConfig(min_ms=0.0, max_ms=5_000.0, check_compile=False, scale=False)
    with HostileSetup() as setup:
        for name, value in setup.env().items():
            monkeypatch.setenv(name, value)
        with WorkerPool(1, config, timeout_s=120.0) as pool:
            pool.submit(0, setup.task_code())
            results = []
            deadline = time.monotonic() + 400
            while not results and time.monotonic() < deadline:
                results = pool.poll(0.5)
        assert results, "no verdict"
        (index, result), = results
        # it ran (a deterministic, finite, input-dependent task passes), and it saw nothing of the host
        assert index == 0 and result.ok, result
        report = setup.assess([result.detail, result.code, result.reason], phases=len(PHASES))
        assert report["reads_leaked"] == 0 and not report["connections"], report
        assert report["writes_succeeded"] == 0, report
