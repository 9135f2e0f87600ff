"""Best-kernel bookkeeping, reading the evaluator's results, and fine-tuning export of rewarded trajectories."""
from __future__ import annotations

import json
from pathlib import Path

from cuda_agent.agent import BestKernel, Evaluation, Trajectory, export_sft
from cuda_agent.agent.best import is_candidate, paper_reward
from cuda_agent.agent.trajectory import TrajectoryWriter


def _eval(correct: bool, eager: float | None, compiled: float | None, reward: float | None = None, **kw) -> Evaluation:
    return Evaluation(kind="profile", stage="timed" if correct else "incorrect", correct=correct,
                      speedup_vs_eager=eager, speedup_vs_compile=compiled, reward=reward, **kw)


def test_paper_reward_schedule_when_the_evaluator_gave_none() -> None:
    assert paper_reward(_eval(False, 9.0, 9.0)) == -1
    assert paper_reward(_eval(True, 1.2, 1.2)) == 3
    assert paper_reward(_eval(True, 1.2, 1.04)) == 2
    assert paper_reward(_eval(True, 1.0, 0.5)) == 1
    assert paper_reward(_eval(True, 1.0, 0.5, reward=2.0)) == 2


def test_only_correct_timed_rule_free_results_compete() -> None:
    assert is_candidate(_eval(True, 1.0, 1.1))
    assert not is_candidate(_eval(False, 1.0, 1.1))
    assert not is_candidate(_eval(True, None, None))
    assert not is_candidate(_eval(True, 1.0, 5.0, rules_fired=("stale_output",)))
    slow = BestKernel(_eval(True, 1.0, 0.4), 3, {"kernels/k.cu": "slow"})
    fast = BestKernel(_eval(True, 2.0, 1.3), 9, {"kernels/k.cu": "fast"})
    assert slow.improves_on(None) and fast.improves_on(slow) and not slow.improves_on(fast)


def test_best_kernel_round_trip_and_confined_write(tmp_path: Path) -> None:
    best = BestKernel(_eval(True, 2.0, 1.3), 9, {"kernels/k.cu": "fast", "../escape.txt": "no"})
    again = BestKernel.from_dict(json.loads(json.dumps(best.to_dict())))
    assert again == best
    written = again.write(tmp_path / "best")
    assert written == [(tmp_path / "best" / "kernels" / "k.cu").resolve()]
    assert not (tmp_path / "escape.txt").exists()


def test_evaluation_reads_the_evaluators_result() -> None:
    from cuda_agent.evaluator.result import EvalResult
    from cuda_agent.evaluator.rules import RuleViolation

    result = EvalResult(task_id="t", stage="timed", correct=True, speedup_eager=2.5, speedup_compile=1.25, reward=3,
                        sol_fraction=0.5, sol_bound="memory")
    ev = Evaluation.from_result(result, "profile")
    assert (ev.stage, ev.correct, ev.speedup_vs_eager, ev.speedup_vs_compile, ev.reward) == ("timed", True, 2.5, 1.25, 3.0)
    assert "50.0% of the speed-of-light floor" in ev.render() and is_candidate(ev)
    rule = list(__import__("cuda_agent.evaluator.rules", fromlist=["RULES"]).RULES)[0]
    cheat = EvalResult(task_id="t", stage="rule_violation", correct=False, reason="a rule fired",
                       rules_fired=(RuleViolation(rule, "caught it"),))
    ev = Evaluation.from_result(cheat, "verify")
    assert ev.rules_fired == (rule,) and not ev.correct and f"rule {rule}: caught it" in ev.render()
    assert Evaluation.from_dict(ev.to_dict()) == ev


def _write_trajectory(path: Path, reward: float | None) -> None:
    writer = TrajectoryWriter(path)
    writer.append({"type": "header", "task": {"id": path.stem}, "tools": [{"type": "function"}],
                   "messages": [{"role": "system", "content": "s"}, {"role": "user", "content": "u"}]})
    writer.append({"type": "turn", "messages": [
        {"role": "assistant", "content": "", "tool_calls": [
            {"id": "c0", "type": "function", "function": {"name": "submit", "arguments": "{}"}}]},
        {"role": "tool", "content": "submitted", "tool_call_id": "c0", "name": "submit"}]})
    if reward is not None:
        writer.append({"type": "end", "reason": "submitted", "reward": reward})
    writer.close()


def test_export_keeps_finished_episodes_with_positive_reward(tmp_path: Path) -> None:
    paths = []
    for name, reward in (("good", 2.0), ("bad", -1.0), ("zero", 0.0), ("unfinished", None)):
        paths.append(tmp_path / f"{name}.jsonl")
        _write_trajectory(paths[-1], reward)
    (tmp_path / "junk.jsonl").write_text("not json\n")
    count = export_sft([*paths, tmp_path / "junk.jsonl"], tmp_path / "sft.jsonl")
    rows = [json.loads(line) for line in (tmp_path / "sft.jsonl").read_text().splitlines()]
    assert count == 1 and len(rows) == 1
    assert rows[0]["task_id"] == "good" and rows[0]["reward"] == 2.0
    assert [m["role"] for m in rows[0]["messages"]] == ["system", "user", "assistant", "tool"]
    assert rows[0]["messages"][2]["tool_calls"][0]["function"]["name"] == "submit"


def test_torn_last_line_is_ignored_then_cut_before_appending(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    _write_trajectory(path, None)
    with open(path, "ab") as handle:
        handle.write(b'{"type": "turn", "mess')
    assert len(Trajectory.load(path).turns) == 1
    writer = TrajectoryWriter(path)
    writer.append({"type": "end", "reward": 1.0})
    writer.close()
    loaded = Trajectory.load(path)
    assert len(loaded.turns) == 1 and loaded.reward == 1.0
