"""The rule-based composer: random, type- and shape-compatible chains of up to five catalog operators.

Each step picks a category (weighted, so that 100 elementwise functions do not crowd out 6 convolutions), then an
operator of it that accepts the current rank, value domain and channel count, binds its arguments (free sizes drawn
from the seed) and runs it on the meta device to learn the output shape: no memory, no compute, any size. A step
that fails or that would drop the batch dimension is skipped and another operator tried. Candidate ``i`` of seed
``s`` is always the same task, which is what makes a synthesis run resumable.
"""
from __future__ import annotations

import logging
import random
import warnings
from dataclasses import dataclass, field
from typing import Any, Mapping

from cuda_agent.errors import ConfigError
from cuda_agent.synth.codegen import SEQ_NAMES, Draft, Step, render
from cuda_agent.synth.ops import DOMAIN_OK, bind_all, prepare_bound
from cuda_agent.synth.spec import Catalog, OperatorSpec

log = logging.getLogger(__name__)

DEFAULT_WEIGHTS: Mapping[str, float] = {
    "conv": 3.0, "linear": 3.0, "norm": 2.0, "activation": 2.5, "elementwise": 2.0, "pool": 1.5,
    "reduction": 1.5, "binary": 2.0, "shape": 0.5, "attention": 0.5, "other": 0.2,
}
HEAD_CATEGORIES = ("conv", "linear", "norm", "pool", "attention")


@dataclass(frozen=True)
class RuleComposerConfig:
    """Settings of the rule-based composer."""

    min_ops: int = 2
    """Fewest operators in a fused chain (single operators are mostly KernelBench level 1 copies)."""
    max_ops: int = 5
    """Most operators in a chain."""
    head_probability: float = 0.7
    """Chance that a chain starts with a structural operator (conv, linear, norm, pool, attention)."""
    standalone_probability: float = 0.08
    """Chance that a candidate is a standalone transformers module instead of a chain (when the catalog has any)."""
    batch_sizes: tuple[int, ...] = (8, 16, 32)
    """Initial batch sizes; the runtime filter grows ``batch_size`` later."""
    max_elements: int = 1 << 24
    """Largest intermediate tensor allowed at the initial size."""
    tries_per_step: int = 25
    """Operators tried before a chain stops growing."""
    weights: Mapping[str, float] = field(default_factory=lambda: dict(DEFAULT_WEIGHTS))
    """Category weights for picking the next operator."""


_SHAPES: dict[int, tuple[tuple[int, ...], ...]] = {
    2: ((256, 512, 1024, 2048, 4096),),
    3: ((16, 32, 64), (128, 256, 512, 1024)),
    4: ((8, 16, 32, 64), (16, 32, 64, 128)),
    5: ((8, 16), (8, 16), (16, 32, 64)),
}


def _initial_shape(rng: random.Random, rank: int, batch: int) -> tuple[int, ...]:
    choices = _SHAPES[rank]
    dims = [rng.choice(c) for c in choices]
    if rank >= 4:
        dims[-1] = dims[-2] if rank == 4 else dims[-1]
    if rank == 5:
        dims[-2] = dims[-1]
    return (batch, *dims)


def _fits(spec: OperatorSpec, shape: tuple[int, ...], domain: str) -> bool:
    hint = spec.inputs[0]
    if len(shape) not in hint.ranks or domain not in DOMAIN_OK[hint.domain]:
        return False
    if len(shape) >= 2 and shape[1] % hint.channel_multiple:
        return False
    return all(s >= hint.min_size for s in shape[2:])


def meta_step(spec: OperatorSpec, shape: tuple[int, ...], rng: random.Random) -> Step | None:
    """Bind ``spec`` to ``shape`` and run it on the meta device; None if it fails or is no usable next step."""
    import torch

    init_values = bind_all(spec.init_args, shape, rng)
    call_values = bind_all(spec.call_args, shape, rng)
    try:
        with warnings.catch_warnings(), torch.device("meta"):
            warnings.simplefilter("ignore")
            out = prepare_bound(spec, init_values, call_values)(torch.empty(shape))
    except Exception as exc:  # a bound operator may reject a shape in any way
        log.debug("meta step %s on %s failed: %s", spec.name, shape, exc)
        return None
    if not isinstance(out, torch.Tensor) or out.dim() == 0 or not out.is_floating_point():
        return None
    return Step(spec, init_values, call_values, tuple(shape), tuple(int(s) for s in out.shape))


class RuleComposer:
    """Compose candidate tasks from a catalog without an LLM."""

    name = "rule"

    def __init__(self, catalog: Catalog, config: RuleComposerConfig | None = None, seed: int = 0) -> None:
        self.config = config or RuleComposerConfig()
        self.seed = seed
        self.by_category: dict[str, list[OperatorSpec]] = {}
        for spec in catalog.composable():
            if spec.source != "transformers":
                self.by_category.setdefault(spec.category, []).append(spec)
        self.standalone = list(catalog.standalone())
        if not self.by_category:
            raise ConfigError("the catalog has no composable operators; delete it, and `cuda-agent synth --catalog` "
                              "crawls a new one (torch first)")

    def _pick(self, rng: random.Random, categories: list[str]) -> OperatorSpec:
        weights = [self.config.weights.get(c, 0.5) for c in categories]
        category = rng.choices(categories, weights=weights)[0]
        return rng.choice(self.by_category[category])

    def draft(self, index: int) -> Draft | None:
        """Candidate ``index``: the same draft for the same seed, catalog and config; None if no chain formed."""
        rng = random.Random(f"{self.seed}:{index}")
        if self.standalone and rng.random() < self.config.standalone_probability:
            return self._standalone(rng)
        cfg = self.config
        length = rng.randint(cfg.min_ops, cfg.max_ops)
        heads = [c for c in HEAD_CATEGORIES if c in self.by_category]
        first_pool = heads if heads and rng.random() < cfg.head_probability else list(self.by_category)
        for _ in range(cfg.tries_per_step):
            first = self._pick(rng, first_pool)
            rank = rng.choice(first.inputs[0].ranks)
            shape = _initial_shape(rng, rank, rng.choice(cfg.batch_sizes))
            domain = first.inputs[0].domain
            step = meta_step(first, shape, rng) if _fits(first, shape, domain) else None
            if step is not None and self._usable(step):
                break
        else:
            return None
        steps = [step]
        input_shape, input_domain = shape, domain
        domain = first.output_domain
        while len(steps) < length:
            nxt = self._next(rng, steps[-1], domain)
            if nxt is None:
                break
            steps.append(nxt)
            domain = nxt.spec.output_domain
        if len(steps) < cfg.min_ops:
            return None
        return Draft(input_shape, tuple(steps), input_domain)

    def _usable(self, step: Step) -> bool:
        out = step.out_shape
        numel = 1
        for s in out:
            numel *= s
        return bool(out) and out[0] == step.in_shape[0] and numel <= self.config.max_elements and numel >= out[0]

    def _next(self, rng: random.Random, last: Step, domain: str) -> Step | None:
        shape = last.out_shape
        categories = list(self.by_category)
        for _ in range(self.config.tries_per_step):
            spec = self._pick(rng, categories)
            if spec.name == last.spec.name or not _fits(spec, shape, domain):
                continue
            step = meta_step(spec, shape, rng)
            if step is not None and self._usable(step):
                return step
        return None

    def _standalone(self, rng: random.Random) -> Draft | None:
        spec = rng.choice(self.standalone)
        shape = (rng.choice((4, 8, 16)), rng.choice((128, 256, 512, 1024)), rng.choice((512, 1024, 2048, 4096)))
        step = meta_step(spec, shape, rng)
        if step is None:
            return None
        return Draft(shape, (step,), spec.inputs[0].domain, SEQ_NAMES)

    def compose(self, index: int) -> "Composed | None":
        draft = self.draft(index)
        if draft is None:
            return None
        return Composed(index=index, code=render(draft), ops=draft.ops, composer=self.name)


@dataclass(frozen=True)
class Composed:
    """A candidate task as a composer made it (before any filter)."""

    index: int
    code: str
    ops: tuple[str, ...]
    composer: str
    detail: str = ""
    metadata: dict[str, Any] = field(default_factory=dict)
