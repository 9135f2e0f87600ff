"""Plain encodings of the values that cross to the candidate process: ``get_init_inputs()`` and scalar arguments.

Only data crosses (numbers, strings, lists, dtypes, small tensors), never objects with behaviour; the runner's
`decode_value` is the inverse.
"""
from __future__ import annotations

import math
from typing import Any

import torch

from cuda_agent.errors import TaskError

MAX_INIT_TENSOR = 1 << 20


def encode(value: Any) -> Any:
    """A JSON-able form of ``value``. Raises TaskError for values that cannot cross (objects, large tensors)."""
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else {"float": repr(value)}
    if isinstance(value, tuple):
        return {"tuple": [encode(v) for v in value]}
    if isinstance(value, list):
        return {"list": [encode(v) for v in value]}
    if isinstance(value, torch.dtype):
        return {"dtype": str(value).removeprefix("torch.")}
    if isinstance(value, torch.Tensor):
        if value.numel() > MAX_INIT_TENSOR:
            raise TaskError(f"get_init_inputs() returns a tensor of {value.numel()} elements; at most "
                            f"{MAX_INIT_TENSOR} can be passed to the candidate")
        cpu = value.detach().cpu()
        return {"tensor": {"dtype": str(cpu.dtype).removeprefix("torch."), "shape": list(cpu.shape),
                           "data": cpu.reshape(-1).tolist()}}
    raise TaskError(f"get_init_inputs() returns a {type(value).__name__}; only numbers, strings, lists, tuples, "
                    "dtypes and small tensors can be passed to the candidate")
