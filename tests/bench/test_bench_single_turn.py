"""`generate_single_turn`: the warm-up prompt per task, the extracted solution saved for `bench offline`, replies
without a solution or without an answer recorded as such, and a rerun that asks again only where the request failed."""
from __future__ import annotations

import json
from pathlib import Path

from cuda_agent.agent.types import AssistantTurn, Usage
from cuda_agent.bench.offline import find_solutions
from cuda_agent.bench.single_turn import generate_single_turn
from cuda_agent.errors import PolicyError
from cuda_agent.rl.data import SINGLE_TURN_SYSTEM
from cuda_agent.tasks import Task

CODE = "import torch\nclass Model(torch.nn.Module):\n    def forward(self, x):\n        return x\n"
SOLUTION = "import torch\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n        return x\n"


class FakePolicy:
    def __init__(self, replies: dict[str, object]) -> None:
        self.replies = replies
        self.asked: list[tuple[list, list]] = []

    def query(self, messages, tools):
        self.asked.append((list(messages), list(tools)))
        task_id = messages[1].content.split("(task ", 1)[1].split(")", 1)[0]
        reply = self.replies[task_id]
        if isinstance(reply, Exception):
            raise reply
        text, finish = reply
        return AssistantTurn(text, (), Usage(100, 40, 0.0, 1), finish)


def tasks() -> list[Task]:
    return [Task(id=f"L1/{n}_Op", code=CODE, name=f"{n}_Op", level=1) for n in (1, 2, 3)]


def test_solutions_are_saved_for_offline_scoring(tmp_path: Path) -> None:
    policy = FakePolicy({
        "L1/1_Op": (f"Here it is:\n```python\n{SOLUTION}```\nDone.", "stop"),
        "L1/2_Op": ("I would fuse the kernels, but " * 50, "length"),
        "L1/3_Op": PolicyError("gave up after 3 attempts"),
    })
    summary = generate_single_turn(tasks(), policy, tmp_path, meta={"model": "m", "command": "cuda-agent ..."})
    assert [r.has_solution for r in summary.rows] == [True, False, False]
    assert (tmp_path / "solutions" / "L1_1_Op.py").read_text() == SOLUTION
    assert not (tmp_path / "solutions" / "L1_2_Op.py").exists()
    messages, tools = policy.asked[0]
    assert tools == [] and messages[0].content == SINGLE_TURN_SYSTEM and CODE.strip() in messages[1].content
    generation = json.loads((tmp_path / "generation.json").read_text())
    assert generation["model"] == "m" and "single_turn_messages" in generation["prompt"]
    assert generation["summary"]["with_solution"] == 1 and generation["summary"]["cut_at_max_tokens"] == 1
    assert generation["summary"]["errors"] == 1 and "gave up" in generation["summary"]["rows"][2]["error"]
    response = json.loads((tmp_path / "responses" / "L1_2_Op.json").read_text())
    assert response["row"]["finish_reason"] == "length" and response["response"].startswith("I would fuse")
    found, _ = find_solutions(tmp_path / "solutions", tasks())
    assert list(found) == ["L1/1_Op"]

    again = FakePolicy({"L1/3_Op": (f"```python\n{SOLUTION}```", "stop")})
    rerun = generate_single_turn(tasks(), again, tmp_path)
    assert len(again.asked) == 1  # only the task whose request failed
    assert [r.has_solution for r in rerun.rows] == [True, False, True]
