"""Perturbed constants (runner/perturb.py) reach a module's parameters however it makes them: the judge's GroupNorm
and a ModelNew that makes the same weight and bias by ``nn.Parameter(torch.ones)``, a buffer, ``torch.full``,
``new_ones``, ``fill_``/``zero_``, a loaded state dict, another shape, another order, or folds them in ``__init__``
get the same values, and the global random stream (the other weights) is untouched."""
from __future__ import annotations

import pytest
import torch
import torch.nn as nn

from cuda_agent.evaluator.runner.perturb import perturbed_init, values

C, SEED = 12, 1234


class Reference(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(5, C)
        self.norm = nn.GroupNorm(3, C)


def reference() -> tuple[Reference, list[list[float]]]:
    torch.manual_seed(SEED)
    with perturbed_init(True, SEED) as made:
        model = Reference()
    return model, made.sorted_keys()


class Direct(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(5, C)
        self.weight = nn.Parameter(torch.ones(C))
        self.bias = nn.Parameter(torch.zeros(C))


class Buffers(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(5, C)
        self.register_buffer("weight", torch.full((C,), 1.0))
        self.register_buffer("bias", self.linear.weight.new_zeros(C))


class Reordered(nn.Module):
    """The bias before the weight, the weight as [C, 1] (broadcast-ready), both made by filling empty tensors."""

    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(5, C)
        self.bias = nn.Parameter(torch.empty(C).zero_())
        self.weight = nn.Parameter(torch.empty(C, 1).fill_(1.0))


class Loaded(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(5, C)
        self.weight = nn.Parameter(torch.empty(C))
        self.bias = nn.Parameter(torch.empty(C))
        state = {k: v.detach().clone() for k, v in self.linear.state_dict().items()}
        self.load_state_dict({**{f"linear.{k}": v for k, v in state.items()}, "weight": torch.ones(C),
                              "bias": torch.zeros_like(self.bias)})


class Initialised(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(5, C)
        self.weight = nn.Parameter(torch.empty(C))
        self.bias = nn.Parameter(torch.empty(C))
        nn.init.ones_(self.weight)
        nn.init.constant_(self.bias, 0.0)


STYLES = [Direct, Buffers, Reordered, Loaded, Initialised]


def candidate(cls: type[nn.Module], keys: list[list[float]]) -> nn.Module:
    torch.manual_seed(SEED)
    with perturbed_init(True, SEED, keys):
        return cls()


@pytest.mark.parametrize("cls", STYLES, ids=[c.__name__ for c in STYLES])
def test_every_style_gets_the_references_values(cls: type[nn.Module]) -> None:
    ref, keys = reference()
    model = candidate(cls, keys)
    assert torch.equal(model.weight.detach().reshape(-1), ref.norm.weight.detach())
    assert torch.equal(model.bias.detach().reshape(-1), ref.norm.bias.detach())
    assert torch.equal(model.linear.weight, ref.linear.weight)  # the random stream was not consumed differently
    assert not torch.equal(ref.norm.weight.detach(), torch.ones(C))
    assert not torch.equal(ref.norm.bias.detach(), torch.zeros(C))


def test_folding_in_init_reads_the_perturbed_values() -> None:
    ref, keys = reference()

    class Folded(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            linear, norm = nn.Linear(5, C), nn.GroupNorm(3, C)
            self.register_buffer("scaled", (linear.weight * norm.weight[:, None]).detach())
            self.register_buffer("shift", (norm.bias * 2).detach())

    folded = candidate(Folded, keys)
    assert torch.equal(folded.scaled, (ref.linear.weight * ref.norm.weight[:, None]).detach())
    assert torch.equal(folded.shift, (ref.norm.bias * 2).detach())


def test_extra_constants_of_other_sizes_stay_exact_and_the_stream_is_untouched() -> None:
    ref, keys = reference()

    class Extra(Direct):
        def __init__(self) -> None:
            super().__init__()
            self.register_buffer("scratch", torch.zeros(7, C))
            self.register_buffer("mask", torch.ones(C, C).tril())

    model = candidate(Extra, keys)
    assert torch.equal(model.scratch, torch.zeros(7, C)) and torch.equal(model.mask, torch.ones(C, C).tril())
    assert torch.equal(model.weight.detach(), ref.norm.weight.detach())
    torch.manual_seed(SEED)
    Reference()
    plain_next = torch.rand(3)
    reference()
    assert torch.equal(torch.rand(3), plain_next)


def test_values_depend_on_seed_size_and_constant_only() -> None:
    a, b = values(1, 8, 1.0), values(1, 8, 1.0)
    assert torch.equal(a, b) and ((a - 1.0).abs() <= 0.5).all() and a.unique().numel() == 8
    assert not torch.equal(a, values(2, 8, 1.0)) and not torch.equal(a, values(1, 8, 0.0))
    assert ((values(3, 100, 4.0) - 4.0).abs() <= 2.0).all()
    assert torch.equal(values(5, 4, -0.0), values(5, 4, 0.0))


def test_candidate_side_perturbs_only_the_references_pairs() -> None:
    torch.manual_seed(SEED)
    with perturbed_init(True, SEED, keys=[]):
        model = Direct()
    assert torch.equal(model.weight.detach(), torch.ones(C)) and torch.equal(model.bias.detach(), torch.zeros(C))
    with perturbed_init(False, SEED) as made:
        plain = Reference()
    assert torch.equal(plain.norm.weight.detach(), torch.ones(C)) and not made.keys
