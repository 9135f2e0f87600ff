"""The rule-based composer and the KernelBench code it writes."""
from __future__ import annotations

import torch

from cuda_agent.synth.compose import RuleComposer
from cuda_agent.synth.filters import scaling_constant, set_constant
from cuda_agent.tasks import dry_run, exec_module


def test_candidates_are_valid_kernelbench_tasks_with_the_inferred_shape(small_catalog) -> None:
    composer = RuleComposer(small_catalog, seed=7)
    made = 0
    for index in range(12):
        draft = composer.draft(index)
        if draft is None:
            continue
        made += 1
        assert 2 <= len(draft.steps) <= 5
        assert all(step.spec.composable for step in draft.steps)
        code = composer.compose(index).code
        assert "batch_size = " in code and scaling_constant(code) == "batch_size"
        signature = dry_run(code, f"candidate {index}")
        assert signature.input_shapes[0] == draft.input_shape
        module = exec_module(code, "candidate")
        torch.manual_seed(0)
        small = exec_module(set_constant(code, "batch_size", 2), "small")
        out = small.Model(*small.get_init_inputs())(*small.get_inputs())
        assert tuple(out.shape) == (2, *draft.steps[-1].out_shape[1:])
        assert module.get_init_inputs() == small.get_init_inputs()
    assert made >= 8


def test_same_seed_same_candidate_other_seed_other_candidates(small_catalog) -> None:
    a = [RuleComposer(small_catalog, seed=1).compose(i) for i in range(6)]
    b = [RuleComposer(small_catalog, seed=1).compose(i) for i in range(6)]
    c = [RuleComposer(small_catalog, seed=2).compose(i) for i in range(6)]
    assert [x.code if x else None for x in a] == [x.code if x else None for x in b]
    assert [x.code if x else None for x in a] != [x.code if x else None for x in c]


def test_positive_domain_operators_only_follow_positive_outputs(small_catalog) -> None:
    composer = RuleComposer(small_catalog, seed=3)
    for index in range(30):
        draft = composer.draft(index)
        if draft is None:
            continue
        domain = draft.input_domain
        for step in draft.steps:
            if step.spec.name == "torch.log":
                assert domain in {"positive", "prob"}, (index, draft.ops)
            domain = step.spec.output_domain
