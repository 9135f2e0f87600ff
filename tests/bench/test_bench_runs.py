"""Runs on CPU, end to end through real components: offline mode through a LocalPool with the stand-in evaluator
and a real SQLite store (resumable), agent runs with the scripted policy, and reports from stored results."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from cuda_agent.bench.metrics import compute_metrics
from cuda_agent.bench.offline import find_solutions, run_offline
from cuda_agent.bench.results import BenchResults, load_results, outcomes_from_store
from cuda_agent.bench.runner import BenchRun, RunConfig, agent_episode
from cuda_agent.errors import ConfigError
from cuda_agent.tasks import TaskSet

SOLUTIONS = Path(__file__).resolve().parents[2] / "benchmarks" / "solutions"


def _pool(tmp_path: Path, log: Path):  # noqa: ANN202
    from cuda_agent.pool import LocalPool, StandInEvaluator
    from cuda_agent.store import Store

    store = Store.open(f"sqlite:///{tmp_path / 'store.db'}")
    pool = LocalPool(gpus=["0", "1"], evaluator=StandInEvaluator(seconds=0.05, log_path=str(log)), store=store)
    return pool, store


def test_find_solutions_understands_every_naming(tmp_path: Path, kb_tasks: TaskSet) -> None:
    (tmp_path / "L1_19_ReLU").mkdir()
    (tmp_path / "L1_19_ReLU" / "model_new.py").write_text("x")
    (tmp_path / "level1").mkdir()
    (tmp_path / "level1" / "23_Softmax.py").write_text("x")
    (tmp_path / "level_2_problem_12_sample_1_kernel.py").write_text("x")
    (tmp_path / "level_2_problem_12_sample_0_kernel.py").write_text("x")
    (tmp_path / "L3_1_MLP.py").write_text("x")
    (tmp_path / "L1_20_LeakyReLU").mkdir()  # no model_new.py: not a solution
    (tmp_path / "stray.txt").write_text("x")
    found, unmatched = find_solutions(tmp_path, kb_tasks)
    assert found == {
        "L1/19_ReLU": tmp_path / "L1_19_ReLU",
        "L1/23_Softmax": tmp_path / "level1" / "23_Softmax.py",
        "L2/12_Gemm_Multiply_LeakyReLU": tmp_path / "level_2_problem_12_sample_0_kernel.py",
        "L3/1_MLP": tmp_path / "L3_1_MLP.py",
    }
    assert "stray.txt" in unmatched and "L1_20_LeakyReLU" in unmatched
    with pytest.raises(ConfigError, match="not a folder"):
        find_solutions(tmp_path / "nope", kb_tasks)


@pytest.mark.slow
def test_offline_run_is_resumable_and_scores_missing_tasks_as_failures(tmp_path: Path, kb_tasks: TaskSet) -> None:
    log = tmp_path / "standin.jsonl"
    pool, store = _pool(tmp_path, log)
    try:
        first = run_offline(kb_tasks.filter(ids=["L1/19_ReLU", "L1/23_Softmax"]), SOLUTIONS, pool=pool, store=store,
                            run_id="offline-1")
        assert len(log.read_text().splitlines()) == 2
        run = run_offline(kb_tasks, SOLUTIONS, pool=pool, store=store, run_id="offline-1")
    finally:
        pool.close()
    # the two finished jobs were not evaluated again; the other two solved tasks were
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    assert sorted(line["task_id"] for line in lines) == sorted(
        ["L1/19_ReLU", "L1/23_Softmax", "L2/12_Gemm_Multiply_LeakyReLU", "L3/1_MLP"])
    assert first.results.missing == []
    results = run.results
    assert results.missing == ["L1/20_LeakyReLU"]  # no handwritten solution for it
    assert {o.solution for o in results.outcomes} >= {"L1_19_ReLU", "L3_1_MLP"}
    m = compute_metrics(results.outcomes, results.tasks)
    assert m.overall.tasks == 5 and m.overall.correct == 4 and m.overall.pass_rate == pytest.approx(0.8)
    assert m.level(1).pass_rate == pytest.approx(2 / 3)
    stored = outcomes_from_store(store, "offline-1", results.tasks)
    assert {o.task_id for o in stored} == {o.task_id for o in results.outcomes}


@pytest.mark.slow
def test_agent_run_keeps_best_kernel_and_trajectory_and_skips_finished_tasks(tmp_path: Path, kb_tasks: TaskSet) -> None:
    from cuda_agent.agent import EnvConfig, ScriptedPolicy

    relu = SOLUTIONS / "L1_19_ReLU"

    def policy(task):  # noqa: ANN001, ANN202 - the scripted policy writes the handwritten ReLU kernel
        return ScriptedPolicy.from_steps([
            {"name": "write", "arguments": {"path": "kernels/relu.cu", "content": (relu / "kernels/relu.cu").read_text()}},
            {"name": "write", "arguments": {"path": "model_new.py", "content": (relu / "model_new.py").read_text()}},
            {"name": "profile", "arguments": {}},
            {"name": "submit", "arguments": {}},
        ])

    calls: list[str] = []
    pool, store = _pool(tmp_path, tmp_path / "standin.jsonl")
    try:
        inner = agent_episode(policy, pool=pool, env_config=EnvConfig(sandbox="local", max_turns=10))

        def episode(task, trajectory, resume):  # noqa: ANN001, ANN202
            calls.append(task.id)
            return inner(task, trajectory, resume)

        tasks = kb_tasks.filter(ids=["L1/19_ReLU", "L1/20_LeakyReLU"])
        run_dir = tmp_path / "run"
        BenchRun(tasks.filter(ids=["L1/19_ReLU"]), run_dir, episode, RunConfig(concurrency=2)).run()
        results = BenchRun(tasks, run_dir, episode, RunConfig(concurrency=2, name="scripted")).run()
    finally:
        pool.close()
    assert calls == ["L1/19_ReLU", "L1/20_LeakyReLU"]  # the finished task was skipped on the second run
    saved = load_results(run_dir / "results.json")
    assert saved.tasks == {"L1/19_ReLU": 1, "L1/20_LeakyReLU": 1}
    for outcome in saved.outcomes:
        # the stand-in's feature score: the handwritten ReLU (a CA_EXPORT kernel with vector loads or shared memory)
        # gets made-up speedups worth 3, so each task keeps it as its best kernel
        assert outcome.correct and outcome.speedup_vs_compile == pytest.approx(1.2), outcome
        assert (run_dir / outcome.solution / "model_new.py").is_file()
        assert (run_dir / outcome.trajectory).is_file()
        lines = (run_dir / outcome.trajectory).read_text().splitlines()
        assert json.loads(lines[-1])["type"] == "end"
    assert isinstance(results, BenchResults) and len(results.outcomes) == 2


def test_outcome_from_episode_writes_the_best_kernel(tmp_path: Path, kb_tasks: TaskSet) -> None:
    from cuda_agent.agent import BestKernel, EpisodeResult, Usage
    from cuda_agent.bench.runner import outcome_from_episode

    from cuda_agent.evaluator import EvalResult
    from cuda_agent.evaluator.stats import TimingStats

    task = kb_tasks["L1/19_ReLU"]
    eager, compiled, candidate = (TimingStats.from_samples([ms]) for ms in (2.0, 1.5, 1.0))
    evaluation = EvalResult(
        task_id=task.id, stage="timed", correct=True, eager=eager, compile=compiled, candidate=candidate,
        speedup_eager=2.0, speedup_compile=1.5, reward=3)
    best = BestKernel(evaluation, turn=7, files={"model_new.py": "M", "kernels/relu.cu": "K"})
    episode = EpisodeResult(task.id, "submitted", "", 3.0, True, 9, Usage(), 1.0, best, None, None)
    outcome = outcome_from_episode(task, episode, tmp_path)
    assert (outcome.correct, outcome.speedup_vs_compile, outcome.compile_ms, outcome.candidate_ms) == (True, 1.5, 1.5, 1.0)
    assert outcome.solution == "kernels/L1_19_ReLU" and outcome.extra["best_turn"] == 7
    assert (tmp_path / "kernels/L1_19_ReLU/kernels/relu.cu").read_text() == "K"
    assert (tmp_path / "kernels/L1_19_ReLU/model_new.py").read_text() == "M"
