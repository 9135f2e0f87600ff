"""The accumulation depth of a reference (`judge.depth`) and the floor it sets (`PrecisionContract.floor_for`):
elementwise tasks get the smallest floor, sums and norms a floor that grows as the square root of the terms they
add, contractions and anything the trace does not know keep the largest. Real torch modules traced on the CPU."""
from __future__ import annotations

import math

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from cuda_agent.evaluator.judge.depth import UNKNOWN, Depth, accumulation_depth
from cuda_agent.evaluator.judge.precision import CONTRACT, FP32_UNIT


class Fn(nn.Module):
    def __init__(self, fn, *children: nn.Module) -> None:
        super().__init__()
        self.fn = fn
        self.children_ = nn.ModuleList(children)

    def forward(self, *xs):
        return self.fn(self, *xs)


def _gelu_tanh(m, x):
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))


def _fill_by_columns(m, x):
    out = torch.empty(x.shape[0], 3)
    for i in range(3):
        out[:, i] = x.sum(1) * (i + 1)
    return out


X = torch.rand(8, 128)
CASES = [
    # (name, module, inputs, terms, contraction)
    ("elementwise tanh gelu", Fn(_gelu_tanh), [X], 1, False),
    ("relu, clamp, where, constant from a tensor literal",
     Fn(lambda m, x: torch.where(x > 0.5, F.relu(x), x.clamp(0.1, 0.2)) + torch.tensor(2.0)), [X], 1, False),
    ("views and copies", Fn(lambda m, x: x.t().contiguous().reshape(-1)[:100].flip(0) * 2), [X], 1, False),
    ("exact selections", Fn(lambda m, x: x.max(dim=1).values + x.amax() + x.sort(1).values[:, 0]), [X], 1, False),
    ("row sum", Fn(lambda m, x: x.sum(-1)), [X], 128, False),
    ("mean over everything", Fn(lambda m, x: x.mean()), [X], 1024, False),
    ("softmax", Fn(lambda m, x: torch.softmax(x, 1)), [X], 128, False),
    ("cumsum", Fn(lambda m, x: torch.cumsum(x, 1)), [X], 128, False),
    ("sum of exp, then mean: the terms multiply", Fn(lambda m, x: torch.exp(x).sum(1).mean()), [X], 1024, False),
    ("layer norm", Fn(lambda m, x: m.children_[0](x), nn.LayerNorm([16, 8])), [torch.rand(4, 16, 8)], 128, False),
    ("group norm", Fn(lambda m, x: m.children_[0](x), nn.GroupNorm(4, 16)), [torch.rand(2, 16, 4, 4)], 64, False),
    ("batch norm", Fn(lambda m, x: m.children_[0](x), nn.BatchNorm2d(16).eval()), [torch.rand(2, 16, 4, 4)], 32,
     False),
    ("average pool", Fn(lambda m, x: F.avg_pool2d(x, 2)), [torch.rand(2, 3, 8, 8)], 4, False),
    ("written into a preallocated tensor by columns", Fn(_fill_by_columns), [X], 128, False),
    ("linear then row sum", Fn(lambda m, x: m.children_[0](x).sum(1), nn.Linear(64, 32)), [torch.rand(8, 64)],
     65 * 32, True),
    ("matmul", Fn(lambda m, a, b: a @ b), [torch.rand(4, 96), torch.rand(96, 5)], 96, True),
    ("conv2d", Fn(lambda m, x: torch.relu(m.children_[0](x)), nn.Conv2d(3, 8, 3)), [torch.rand(2, 3, 8, 8)],
     28, True),
    # distances sum over the features (their fast forms expand |x - y|^2 into products), however many pairs
    ("cdist", Fn(lambda m, a, b: torch.cdist(a, b)), [torch.rand(10, 512), torch.rand(300, 512)], 512, True),
    ("pdist", Fn(lambda m, a: F.pdist(a)), [torch.rand(10, 512)], 512, True),
    ("unfold gathers", Fn(lambda m, x: F.unfold(x, kernel_size=3)), [torch.rand(2, 1, 6, 6)], 1, False),
]


@pytest.mark.parametrize(("name", "module", "inputs", "terms", "contraction"), CASES, ids=[c[0] for c in CASES])
def test_depth_of_known_operators(name: str, module: nn.Module, inputs: list, terms: int,
                                  contraction: bool) -> None:
    depth = accumulation_depth(module, inputs)
    assert depth == Depth(terms, contraction), depth


@pytest.mark.filterwarnings("ignore:The reduce argument of torch.scatter")
@pytest.mark.parametrize("fn", [
    lambda m, x: torch.linalg.inv(x[:4, :4] + torch.eye(4)),                     # an operator it does not know
    lambda m, x: torch.zeros(8).scatter_add(0, torch.zeros(128, dtype=torch.long), x[0]),   # sums into a target
    lambda m, x: torch.zeros(4).index_put((torch.zeros(128, dtype=torch.long),), x[0], accumulate=True),
    lambda m, x: torch.zeros(8).scatter_(0, torch.zeros(128, dtype=torch.long), x[0], reduce="add"),
    lambda m, x: F.fold(x[:2, :36].reshape(2, 4, 9), (4, 4), kernel_size=2),  # col2im sums overlapping patches
    lambda m, x: torch.renorm(x, 2, 0, 1.0),                                  # a norm over each slice
    lambda m, x: torch._weight_norm(x, torch.ones(8, 1), 0),
], ids=["linalg_inv", "scatter_add", "index_put_accumulate", "scatter_reduce_arg", "fold", "renorm", "weight_norm"])
def test_unknown_operators_keep_the_largest_floor(fn) -> None:
    depth = accumulation_depth(Fn(fn), [X])
    assert depth.terms is None and depth.unknown
    assert CONTRACT.floor_for(depth) == CONTRACT.floor


def test_a_reference_that_fails_under_the_trace_is_unknown() -> None:
    def boom(m, x):
        raise ValueError("no")
    depth = accumulation_depth(Fn(boom), [X])
    assert depth.terms is None and "ValueError" in depth.describe()


def test_floor_for_each_depth() -> None:
    u = FP32_UNIT
    assert CONTRACT.floor_for(Depth(1)) == pytest.approx(CONTRACT.min_floor_units * u)
    assert CONTRACT.floor_for(Depth(4096)) == pytest.approx(2 * 64 * u)             # 2 sqrt(4096) = 128 units
    assert CONTRACT.floor_for(Depth(10 ** 9)) == pytest.approx(CONTRACT.floor)       # capped
    assert CONTRACT.floor_for(Depth(1, contraction=True)) == pytest.approx(CONTRACT.floor)
    assert CONTRACT.floor_for(UNKNOWN) == CONTRACT.floor_for(None) == pytest.approx(CONTRACT.floor)
    assert CONTRACT.bound(1e-3, Depth(1)) == pytest.approx(16e-3)                     # the ratio still rules above


def test_the_trace_leaves_the_model_and_its_outputs_alone() -> None:
    module = Fn(lambda m, x: m.children_[0](x).sum(1), nn.Linear(64, 32))
    x = torch.rand(8, 64)
    before = module(x)
    state = {k: v.clone() for k, v in module.state_dict().items()}
    accumulation_depth(module, [x])
    assert torch.equal(module(x), before)
    assert all(torch.equal(state[k], v) for k, v in module.state_dict().items())
