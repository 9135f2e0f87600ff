"""The operator catalog's records: `ArgSpec`, `InputSpec`, `OperatorSpec`, `Catalog` (frozen, JSON-serialisable).

A spec says how to build an operator (constructor or call arguments, each either a fixed value or bound to the input
shape or chosen by the composer) and what it accepts (tensor ranks, dtype, value domain); the crawler fills it by
introspection and verifies it by building and calling the operator on small CPU tensors.
"""
from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

from cuda_agent.errors import ConfigError

ARG_BINDS = ("const", "dim", "shape_tail", "free", "dim_index", "param", "config", "positions")
"""How an argument gets its value.

- ``const``: ``value`` as is (``kernel_size=3``).
- ``dim``: the input's size along dimension ``value`` (``in_channels`` = size of dim 1, ``in_features`` of dim -1).
- ``shape_tail``: the input's last ``value`` sizes as a list (``normalized_shape``).
- ``free``: a size the composer picks from ``choices`` (``out_channels``); ``value`` is the one used to verify.
- ``dim_index``: a non-batch dimension index the composer picks (``dim=1`` of ``softmax``).
- ``param``: a learnable tensor broadcastable to the input (per-channel bias or scale), created in ``__init__``.
- ``config``: a transformers config object; ``value`` is ``{"class": dotted name, "kwargs": {...}}`` where a kwarg
  value ``"dim:-1"`` means the input's last size.
- ``positions``: a forward argument of token positions ``arange(seq)`` per batch row (rotary embeddings).
"""

DOMAINS = ("real", "nonneg", "positive", "unit")
"""Value domains: ``real`` anything; ``nonneg`` >= 0; ``positive`` > 0; ``unit`` inside (-1, 1)."""


@dataclass(frozen=True)
class ArgSpec:
    """One constructor argument (modules) or extra call argument (functions)."""

    name: str
    bind: str = "const"
    value: Any = None
    choices: tuple[Any, ...] = ()
    keyword: bool = True

    def __post_init__(self) -> None:
        if self.bind not in ARG_BINDS:
            raise ConfigError(f"ArgSpec {self.name!r}: bind {self.bind!r} is not one of {ARG_BINDS}")


@dataclass(frozen=True)
class InputSpec:
    """What one tensor input accepts; ``ranks`` were verified by calling the operator."""

    ranks: tuple[int, ...]
    dtype: str = "float32"
    domain: str = "real"
    min_size: int = 1
    channel_multiple: int = 1


@dataclass(frozen=True)
class OperatorSpec:
    """One seed operator.

    Attributes:
        name: how code refers to it: ``nn.Conv2d``, ``torch.tanh``, ``F.gelu``, ``transformers.activations.NewGELUActivation``.
        kind: ``module`` (built in ``__init__``, called in ``forward``) or ``function`` (called in ``forward``).
        source: ``torch.nn``, ``torch``, ``torch.nn.functional``, ``torch.special`` or ``transformers``.
        category: ``elementwise``, ``reduction``, ``shape``, ``conv``, ``linear``, ``norm``, ``pool``, ``attention``,
            ``activation``, ``binary``, ``other``.
        init_args: constructor arguments (modules).
        call_args: arguments after the input tensor, e.g. ``dim`` (functions) or ``position_ids`` (a module's forward);
            a ``param`` argument is a second, learnable tensor.
        inputs: one `InputSpec` per tensor input (a ``param`` call argument is not an input).
        output_index: when the call returns a tuple, the element that is the result (``torch.max(x, 1)[0]``).
        output_domain: the value domain of the result on a real input (lets the composer put ``log`` after ``exp``).
        stochastic: calls with the same input disagree (dropout and friends); never composed.
        input_independent: the result does not depend on the input values (a rotary table); never composed.
        meta_ok: works on the meta device, which the rule composer needs for shape inference.
        standalone: becomes a task on its own, never stacked with others (transformers modules).
        import_line: the import a task needs for this operator, beyond torch / nn / F.
        example: a verified call: input shapes and the output shape.
        note: why the spec looks as it does (curated entries say what they fix).
    """

    name: str
    kind: str
    source: str
    category: str
    init_args: tuple[ArgSpec, ...] = ()
    call_args: tuple[ArgSpec, ...] = ()
    inputs: tuple[InputSpec, ...] = (InputSpec(ranks=(2, 3, 4)),)
    output_index: int | None = None
    output_domain: str = "real"
    stochastic: bool = False
    input_independent: bool = False
    meta_ok: bool = True
    standalone: bool = False
    import_line: str = ""
    example: tuple[tuple[tuple[int, ...], ...], tuple[int, ...]] | None = None
    note: str = ""

    @property
    def short_name(self) -> str:
        return self.name.rsplit(".", 1)[-1]

    @property
    def composable(self) -> bool:
        """Usable by the composers in a fused chain."""
        return not (self.stochastic or self.input_independent or self.standalone) and self.meta_ok

    def to_dict(self) -> dict[str, Any]:
        return _plain(dataclasses.asdict(self))

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "OperatorSpec":
        data = dict(data)
        data["init_args"] = tuple(_arg(a) for a in data.get("init_args", ()))
        data["call_args"] = tuple(_arg(a) for a in data.get("call_args", ()))
        data["inputs"] = tuple(
            InputSpec(**{**i, "ranks": tuple(i["ranks"])}) for i in data.get("inputs", ())
        )
        example = data.get("example")
        if example is not None:
            data["example"] = (tuple(tuple(s) for s in example[0]), tuple(example[1]))
        return cls(**data)


def _arg(data: dict[str, Any]) -> ArgSpec:
    return ArgSpec(**{**data, "choices": tuple(_tuple(c) for c in data.get("choices", ())), "value": _tuple(data.get("value"))})


def _tuple(value: Any) -> Any:
    return tuple(_tuple(v) for v in value) if isinstance(value, list) else value


def _plain(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


@dataclass(frozen=True)
class Catalog:
    """The verified seed operators, plus the ones the crawl tried and dropped (name -> reason)."""

    specs: tuple[OperatorSpec, ...]
    dropped: tuple[tuple[str, str], ...] = field(default=())
    torch_version: str = ""

    def __len__(self) -> int:
        return len(self.specs)

    def __iter__(self) -> Iterator[OperatorSpec]:
        return iter(self.specs)

    def get(self, name: str) -> OperatorSpec:
        for spec in self.specs:
            if spec.name == name:
                return spec
        raise KeyError(f"no operator {name!r} in the catalog ({len(self.specs)} operators)")

    def composable(self) -> tuple[OperatorSpec, ...]:
        return tuple(s for s in self.specs if s.composable)

    def standalone(self) -> tuple[OperatorSpec, ...]:
        return tuple(s for s in self.specs if s.standalone and not (s.stochastic or s.input_independent))

    def to_json(self) -> str:
        return json.dumps(
            {
                "torch_version": self.torch_version,
                "specs": [s.to_dict() for s in self.specs],
                "dropped": [list(d) for d in self.dropped],
            },
            indent=1,
        )

    @classmethod
    def from_json(cls, text: str) -> "Catalog":
        data = json.loads(text)
        return cls(
            specs=tuple(OperatorSpec.from_dict(s) for s in data["specs"]),
            dropped=tuple((str(a), str(b)) for a, b in data.get("dropped", ())),
            torch_version=str(data.get("torch_version", "")),
        )

    def save(self, path: str | Path) -> Path:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(self.to_json())
        return path

    @classmethod
    def load(cls, path: str | Path) -> "Catalog":
        path = Path(path)
        try:
            return cls.from_json(path.read_text())
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise ConfigError(f"{path}: not a readable operator catalog ({exc}); delete it, and `cuda-agent synth "
                              "--catalog` crawls a new one there") from exc
