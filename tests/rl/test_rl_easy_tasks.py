"""The easy task split of the one-GPU RL run: disjoint, big enough, and every id names a KernelBench task."""
from __future__ import annotations

import pytest

from cuda_agent.errors import TaskError
from cuda_agent.rl.easy_tasks import (ELEMENTWISE, HELDOUT, REDUCTIONS, SMALL_BATCH, load_split, small_inputs,
                                      split_ids)
from cuda_agent.tasks.task import Task


def test_split_is_disjoint_and_covers_the_pool() -> None:
    train, heldout = split_ids()
    assert not set(train) & set(heldout)
    assert len(heldout) >= 10 and len(train) >= 10
    assert set(train) | set(heldout) == set(ELEMENTWISE) | set(REDUCTIONS)
    assert len(set(train)) == len(train) and len(set(heldout)) == len(heldout)
    assert set(HELDOUT) & set(ELEMENTWISE) and set(HELDOUT) & set(REDUCTIONS)
    assert split_ids() == (train, heldout)


def test_every_id_resolves_to_its_kernelbench_task() -> None:
    from cuda_agent.locations import kernelbench_root

    if kernelbench_root() is None:
        pytest.skip("KernelBench not found (set CUDA_AGENT_KERNELBENCH)")
    train, heldout = load_split("kernelbench")
    assert [t.id for t in train] == list(split_ids()[0]) and [t.id for t in heldout] == list(HELDOUT)
    for task in train + heldout:
        assert task.level == 1 and "class Model" in task.code and "def get_inputs" in task.code
    with pytest.raises(ValueError, match="size"):
        load_split("tiny")


def _largest_input(code: str) -> int:
    """Elements of the largest tensor ``get_inputs`` makes (on the meta device: shapes only, nothing allocated)."""
    import torch

    namespace: dict = {}
    exec(compile(code, "<task>", "exec"), namespace)  # KernelBench's own files, read-only data of the repository
    with torch.device("meta"):
        return max(x.numel() for x in namespace["get_inputs"]() if isinstance(x, torch.Tensor))


def test_small_split_is_the_same_modules_with_smaller_inputs() -> None:
    from cuda_agent.locations import kernelbench_root

    if kernelbench_root() is None:
        pytest.skip("KernelBench not found (set CUDA_AGENT_KERNELBENCH)")
    full_train, full_heldout = load_split("kernelbench")
    train, heldout = load_split()
    for full, small in zip(full_train + full_heldout, train + heldout):
        assert small.id == full.id + "-small" and small.metadata["resized_from"] == full.id
        # only the batch_size line differs
        changed = [(a, b) for a, b in zip(full.code.splitlines(), small.code.splitlines()) if a != b]
        assert len(changed) == 1 and changed[0][1] == f"batch_size = {SMALL_BATCH[full.id]}", changed
        assert small.code_hash != full.code_hash
        elements = _largest_input(small.code)
        assert 1_000_000 <= elements <= 17_000_000 and elements * 10 < _largest_input(full.code), small.id
    assert not {t.id for t in train} & {t.id for t in heldout}


def test_small_inputs_refuses_what_it_was_not_sized_for() -> None:
    plain = "import torch\nbatch_size = 4096\ndef get_inputs():\n    return [torch.rand(batch_size, 8)]\n"
    with pytest.raises(TaskError, match="no small size"):
        small_inputs(Task(id="user/other", code=plain))
    with pytest.raises(TaskError, match="one 'batch_size = N' line"):
        small_inputs(Task(id="L1/19_ReLU", code=plain.replace("4096", "4096\nbatch_size = 2")))
    with pytest.raises(TaskError, match="not below"):
        small_inputs(Task(id="L1/19_ReLU", code=plain.replace("4096", "4")))
    resized = small_inputs(Task(id="L1/19_ReLU", code=plain))
    assert f"batch_size = {SMALL_BATCH['L1/19_ReLU']}\n" in resized.code and resized.id == "L1/19_ReLU-small"
