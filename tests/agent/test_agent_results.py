"""Best-kernel bookkeeping, reading the evaluator's results, and fine-tuning export of rewarded trajectories."""
from __future__ import annotations

import json
from pathlib import Path

from cuda_agent.agent import BestKernel, Trajectory, export_sft, render_result
from cuda_agent.agent.best import is_candidate
from cuda_agent.agent.trajectory import TrajectoryWriter
from cuda_agent.evaluator.result import EvalResult


def _eval(correct: bool, eager: float | None, compiled: float | None, reward: int = -1, **kw) -> EvalResult:
    return EvalResult(task_id="t", stage="timed" if correct else "incorrect", correct=correct,
                      speedup_eager=eager, speedup_compile=compiled, reward=reward, **kw)


def test_the_best_kernels_reward_is_the_evaluators_not_recomputed() -> None:
    # Speedups that the schedule would reward 3 with a result the evaluator rewarded 1 (a larger threshold): the
    # best kernel reports the evaluator's 1.
    assert BestKernel(_eval(True, 1.2, 1.2, reward=1), 1).reward == 1.0
    assert BestKernel(_eval(True, 1.0, 0.5, reward=2), 1).reward == 2.0


def test_only_correct_timed_rule_free_results_compete() -> None:
    from cuda_agent.evaluator.rules import RULES, RuleViolation

    assert is_candidate(_eval(True, 1.0, 1.1))
    assert not is_candidate(_eval(False, 1.0, 1.1))
    assert not is_candidate(_eval(True, None, None))
    assert not is_candidate(_eval(True, 1.0, 5.0, rules_fired=(RuleViolation(next(iter(RULES)), "x"),)))
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


def test_the_agent_reads_the_evaluators_result_rendered_once() -> None:
    from cuda_agent.evaluator.rules import RULES, RuleViolation

    result = EvalResult(task_id="t", stage="timed", correct=True, speedup_eager=2.5, speedup_compile=1.25, reward=3,
                        sol_fraction=0.5, sol_bound="memory")
    shown = render_result(result, "profile")
    assert shown.startswith("profile: stage=timed correct=yes") and "reward: 3" in shown
    assert "speedup vs torch.compile: 1.250x" in shown and "50.0% of the speed-of-light floor" in shown
    assert is_candidate(result)
    rule = list(RULES)[0]
    cheat = EvalResult(task_id="t", stage="rule_violation", correct=False, reason="a rule fired",
                       rules_fired=(RuleViolation(rule, "caught it"),))
    shown = render_result(cheat, "verify")
    assert f"rules fired: {rule}" in shown and "correct=NO" in shown and f"rule {rule}: caught it" in shown
    assert not is_candidate(cheat)


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
