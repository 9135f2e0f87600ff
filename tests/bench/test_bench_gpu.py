"""On a GPU host: one handwritten solution scored by offline mode through the real evaluator and pool."""
from __future__ import annotations

from pathlib import Path

import pytest

from cuda_agent.bench.metrics import compute_metrics
from cuda_agent.bench.offline import run_offline
from cuda_agent.tasks import TaskSet

SOLUTIONS = Path(__file__).resolve().parents[2] / "benchmarks" / "solutions"


@pytest.mark.gpu
@pytest.mark.slow
def test_offline_scores_handwritten_relu_on_the_gpu(tmp_path: Path, kb_tasks: TaskSet) -> None:
    from cuda_agent.pool import LocalPool
    from cuda_agent.store import Store

    store = Store.open(f"sqlite:///{tmp_path / 's.db'}")
    pool = LocalPool(gpus=["0"], store=store)
    try:
        run = run_offline(kb_tasks.filter(ids=["L1/19_ReLU"]), SOLUTIONS, pool=pool, store=store, run_id="gpu")
    finally:
        pool.close()
    outcome = run.results.outcomes[0]
    assert outcome.correct, outcome.error
    assert outcome.stage == "timed" and outcome.speedup_vs_compile is not None and outcome.candidate_ms
    metrics = compute_metrics(run.results.outcomes, run.results.tasks)
    assert metrics.overall.pass_rate == 1.0 and metrics.overall.geomean_speedup_vs_compile is not None
