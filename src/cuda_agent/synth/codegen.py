"""Write a chain of bound operators as a KernelBench-format task: ``Model``, ``get_inputs``, ``get_init_inputs``,
with every size a module-level constant (``batch_size`` first) so that a task can be resized by editing constants.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from cuda_agent.synth.spec import OperatorSpec

DIM_NAMES: dict[int, tuple[str, ...]] = {
    2: ("batch_size", "features"),
    3: ("batch_size", "channels", "length"),
    4: ("batch_size", "channels", "height", "width"),
    5: ("batch_size", "channels", "depth", "height", "width"),
}
SEQ_NAMES = ("batch_size", "seq_len", "hidden_size")


@dataclass(frozen=True)
class Step:
    """One operator of a chain with its bound argument values and the shapes it maps between."""

    spec: OperatorSpec
    init_values: dict[str, Any] = field(default_factory=dict)
    call_values: dict[str, Any] = field(default_factory=dict)
    in_shape: tuple[int, ...] = ()
    out_shape: tuple[int, ...] = ()


@dataclass(frozen=True)
class Draft:
    """A composed task before it is code: the input, its value domain, and the steps."""

    input_shape: tuple[int, ...]
    steps: tuple[Step, ...]
    input_domain: str = "real"
    dim_names: tuple[str, ...] = ()

    @property
    def ops(self) -> tuple[str, ...]:
        return tuple(s.spec.name for s in self.steps)


def _snake(name: str) -> str:
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name).lower()


_INPUT_EXPR = {
    "real": "torch.randn({shape})",
    "positive": "torch.rand({shape}) + 0.1",
    "unit": "torch.rand({shape}) * 1.8 - 0.9",
    "prob": "torch.rand({shape}) * 0.8 + 0.1",
    "nonneg": "torch.rand({shape})",
}


class _Writer:
    """Collects constants (name -> expression), init parameters, module attributes and forward lines."""

    def __init__(self) -> None:
        self.constants: dict[str, str] = {}
        self.init_params: list[str] = []
        self.init_lines: list[str] = []
        self.forward_lines: list[str] = []
        self.imports: list[str] = []
        self.attrs: set[str] = set()

    def constant(self, base: str, expr: str, init: bool = True) -> str:
        for name, existing in self.constants.items():
            if existing == expr and re.sub(r"_\d+$", "", name) == base:
                return name
        name, k = base, 2
        while name in self.constants:
            name, k = f"{base}_{k}", k + 1
        self.constants[name] = expr
        if init:
            self.init_params.append(name)
        return name

    def use(self, name: str) -> str:
        """Mark a constant as needed by ``__init__`` (passed through ``get_init_inputs``, KernelBench style)."""
        if name not in self.init_params:
            self.init_params.append(name)
        return name

    def attr(self, base: str) -> str:
        name, k = base, 2
        while name in self.attrs:
            name, k = f"{base}_{k}", k + 1
        self.attrs.add(name)
        return name


def _literal(value: Any) -> str:
    if isinstance(value, tuple):
        return "(" + ", ".join(_literal(v) for v in value) + ("," if len(value) == 1 else "") + ")"
    if isinstance(value, list):
        return "[" + ", ".join(_literal(v) for v in value) + "]"
    return repr(value)


def _arg_expr(w: _Writer, arg: Any, value: Any, syms: list[str | None], step_free: dict[str, str]) -> str | None:
    """The source expression of one bound ``__init__`` argument; None for a ``positions`` argument."""
    bind = arg.bind
    if bind == "dim":
        sym = syms[int(arg.value)]
        return w.use(sym) if sym is not None else w.constant(arg.name, str(value))
    if bind == "shape_tail":
        tail = syms[len(syms) - int(arg.value):]
        parts = [w.use(s) if s is not None else str(v) for s, v in zip(tail, value)]
        return "[" + ", ".join(parts) + "]"
    if bind == "free":
        name = w.constant(arg.name, str(value))
        step_free[name] = str(value)
        return name
    if bind == "config":
        cls_path: str = value["class"]
        module, _, cls = cls_path.rpartition(".")
        w.imports.append(f"from {module} import {cls}")
        kwargs = []
        for key, v in value["kwargs"].items():
            raw = arg.value["kwargs"].get(key)
            if isinstance(raw, str) and raw.startswith("dim:"):
                sym = syms[int(raw[4:])]
                kwargs.append(f"{key}={w.use(sym) if sym is not None else v}")
            else:
                kwargs.append(f"{key}={_literal(v)}")
        return f"{cls}({', '.join(kwargs)})"
    if bind == "positions":
        return None
    return _literal(value)


def render(draft: Draft, *, title: str = "") -> str:
    """The task's source code. Raises nothing: a draft is built from verified, bound steps."""
    w = _Writer()
    names = draft.dim_names or DIM_NAMES.get(len(draft.input_shape), tuple(f"dim{i}" for i in range(len(draft.input_shape))))
    names = ("batch_size",) + tuple(names[1:])
    for name, size in zip(names, draft.input_shape):
        w.constants[name] = str(size)
    syms: list[str | None] = list(names)
    for step in draft.steps:
        spec = step.spec
        step_free: dict[str, str] = {}
        if spec.import_line:
            w.imports.append(spec.import_line)
        call_parts: list[str] = []
        if spec.kind == "module":
            attr = w.attr(_snake(spec.short_name))
            pos, kw = [], []
            for arg in spec.init_args:
                expr = _arg_expr(w, arg, step.init_values[arg.name], syms, step_free)
                (kw.append(f"{arg.name}={expr}") if arg.keyword else pos.append(str(expr)))
            ctor = spec.name if spec.source != "transformers" else spec.short_name
            w.init_lines.append(f"self.{attr} = {ctor}({', '.join(pos + kw)})")
            callee = f"self.{attr}"
        else:
            callee = spec.name
        for arg in spec.call_args:
            value = step.call_values[arg.name]
            if arg.bind == "param":
                lead = syms[1] if len(syms) >= 3 else syms[-1]
                dims = [w.use(lead) if lead is not None else str(value[0])] + [str(v) for v in value[1:]]
                shape_name = w.constant(f"{_snake(spec.short_name)}_shape", "(" + ", ".join(dims) + ("," if len(dims) == 1 else "") + ")")
                attr = w.attr(f"{_snake(spec.short_name)}_param")
                w.init_lines.append(f"self.{attr} = nn.Parameter(torch.rand({shape_name}) + 0.5)")
                expr = f"self.{attr}"
            elif arg.bind == "positions":
                expr = "torch.arange(x.shape[1], device=x.device).unsqueeze(0).expand(x.shape[0], -1)"
            else:
                expr = _literal(value)
            call_parts.append(f"{arg.name}={expr}" if arg.keyword else expr)
        call = f"{callee}({', '.join(['x'] + call_parts)})"
        if spec.output_index is not None:
            call += f"[{spec.output_index}]"
        w.forward_lines.append(f"x = {call}")
        syms = _next_symbols(syms, step, step_free)
    return _assemble(w, draft, names, title)


def _next_symbols(syms: list[str | None], step: Step, step_free: dict[str, str]) -> list[str | None]:
    if step.out_shape == step.in_shape:
        return syms
    by_value = {v: k for k, v in step_free.items()}
    out: list[str | None] = []
    for i, size in enumerate(step.out_shape):
        if i == 0:
            out.append("batch_size")
        elif len(step.out_shape) == len(step.in_shape) and size == step.in_shape[i]:
            out.append(syms[i])
        else:
            out.append(by_value.get(str(size)))
    return out


def _assemble(w: _Writer, draft: Draft, names: tuple[str, ...], title: str) -> str:
    doc = title or " -> ".join(s.spec.short_name for s in draft.steps)
    init_sig = ", ".join(["self"] + w.init_params)
    lines = ["import torch", "import torch.nn as nn", "import torch.nn.functional as F"]
    lines += list(dict.fromkeys(w.imports))
    lines += ["", "", "class Model(nn.Module):", f'    """{doc}"""', "",
              f"    def __init__({init_sig}):", "        super().__init__()"]
    lines += [f"        {line}" for line in w.init_lines]
    lines += ["", "    def forward(self, x):"]
    lines += [f"        {line}" for line in w.forward_lines]
    lines += ["        return x", "", ""]
    lines += [f"{name} = {expr}" for name, expr in w.constants.items()]
    shape = ", ".join(names)
    lines += ["", "", "def get_inputs():",
              f"    return [{_INPUT_EXPR.get(draft.input_domain, _INPUT_EXPR['real']).format(shape=shape)}]", "", "",
              "def get_init_inputs():", f"    return [{', '.join(w.init_params)}]", ""]
    return "\n".join(lines)
