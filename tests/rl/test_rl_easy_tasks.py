"""The easy task split of the one-GPU RL run: disjoint, big enough, and every id names a KernelBench task."""
from __future__ import annotations

import pytest

from cuda_agent.rl.easy_tasks import ELEMENTWISE, HELDOUT, REDUCTIONS, load_split, split_ids


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
    train, heldout = load_split()
    assert [t.id for t in train] == list(split_ids()[0]) and [t.id for t in heldout] == list(HELDOUT)
    for task in train + heldout:
        assert task.level == 1 and "class Model" in task.code and "def get_inputs" in task.code
