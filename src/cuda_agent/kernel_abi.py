"""The workspace kernel ABI: load a kernel library and call its registered functions from Python.

Each kernel file registers host functions with ``CA_EXPORT``; `load_library` reads the library's op table and
returns an `OpLibrary` whose attributes are those functions. A call converts its arguments to the C layout in
``cuda_agent.h`` (tensors as non-owning views), runs on PyTorch's current CUDA stream, and turns a C++ failure
(``CA_CHECK``, ``ca::fail``, a launch error) into a `KernelCallError`.

Calls go straight to the library through ctypes, not through PyTorch's dispatcher.

Why a module of its own, at the top of the package: two sides load kernel libraries with it, the compiler
(`cuda_agent.compiler.runtime`, which a workspace's ``binding.ops`` calls) and the evaluator's sandboxed candidate
process (``ca_runner.serve``). Inside the compiler or the candidate runner, one of them would import the other's
package. So it stands below both, standalone (standard library and torch only, nothing of ``cuda_agent``): the
sandbox shows the candidate process no ``cuda_agent``, and the judge ships this file inside the runner package it
stages (`cuda_agent.evaluator.judge.candidate.runner_copy`, as ``ca_runner/kernel_abi.py``).
"""
from __future__ import annotations

import ctypes
import os
from pathlib import Path
from typing import Any

MAX_DIMS = 8
_ERROR_LEN = 4096


class KernelCallError(RuntimeError):
    """A registered function reported an error (a failed CA_CHECK, a CUDA launch error, bad arguments)."""


class LibraryLoadError(OSError):
    """A kernel library could not be loaded, or its op table is inconsistent."""


class _CTensor(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("sizes", ctypes.c_int64 * MAX_DIMS),
        ("strides", ctypes.c_int64 * MAX_DIMS),
        ("ndim", ctypes.c_int32),
        ("dtype", ctypes.c_int32),
        ("device", ctypes.c_int32),
        ("element_size", ctypes.c_int32),
    ]


class _CValue(ctypes.Structure):
    _fields_ = [
        ("kind", ctypes.c_int32),
        ("pad_", ctypes.c_int32),
        ("i", ctypes.c_int64),
        ("f", ctypes.c_double),
        ("t", _CTensor),
    ]


class _CCallState(ctypes.Structure):
    _fields_ = [("stream", ctypes.c_void_p), ("error", ctypes.c_char_p), ("error_len", ctypes.c_int32)]


_TRAMPOLINE = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(_CValue), ctypes.c_int32, ctypes.POINTER(_CCallState))
_KIND_NAMES = {"t": "Tensor", "i": "int", "f": "float", "b": "bool"}


def _dtype_codes() -> dict[Any, int]:
    import torch

    return {
        torch.float32: 0, torch.float16: 1, torch.bfloat16: 2, torch.float64: 3, torch.int32: 4,
        torch.int64: 5, torch.bool: 6, torch.int8: 7, torch.uint8: 8, torch.int16: 9,
    }


class Op:
    """One registered function; call it like a Python function with the C++ signature's arguments."""

    def __init__(self, name: str, signature: str, fn: Any) -> None:
        self.name = name
        self.signature = signature
        self._fn = fn
        import torch

        self._torch = torch
        self._dtypes = _dtype_codes()

    def __repr__(self) -> str:
        args = ", ".join(_KIND_NAMES.get(c, "?") for c in self.signature)
        return f"<kernel op {self.name}({args})>"

    def _fill_tensor(self, slot: _CTensor, value: Any, index: int) -> None:
        tensor = value
        if tensor.ndim > MAX_DIMS:
            raise KernelCallError(f"{self.name}: argument {index} has {tensor.ndim} dims; at most {MAX_DIMS}")
        if not tensor.is_cuda:
            raise KernelCallError(f"{self.name}: argument {index} is on {tensor.device}; pass CUDA tensors")
        code = self._dtypes.get(tensor.dtype)
        if code is None:
            raise KernelCallError(f"{self.name}: argument {index} has unsupported dtype {tensor.dtype}")
        slot.data = tensor.data_ptr()
        for d, (size, stride) in enumerate(zip(tensor.shape, tensor.stride())):
            slot.sizes[d] = size
            slot.strides[d] = stride
        slot.ndim = tensor.ndim
        slot.dtype = code
        slot.device = tensor.device.index or 0
        slot.element_size = tensor.element_size()

    def __call__(self, *args: Any) -> None:
        if len(args) != len(self.signature):
            raise KernelCallError(
                f"{self.name} takes {len(self.signature)} arguments "
                f"({', '.join(_KIND_NAMES[c] for c in self.signature)}), got {len(args)}"
            )
        torch = self._torch
        values = (_CValue * max(1, len(args)))()
        for index, (code, arg) in enumerate(zip(self.signature, args)):
            slot = values[index]
            if code == "t":
                if not isinstance(arg, torch.Tensor):
                    raise KernelCallError(f"{self.name}: argument {index} must be a Tensor, got {type(arg).__name__}")
                slot.kind = 0
                self._fill_tensor(slot.t, arg, index)
            elif code == "i":
                if isinstance(arg, bool) or not isinstance(arg, int):
                    raise KernelCallError(f"{self.name}: argument {index} must be an int, got {type(arg).__name__}")
                slot.kind, slot.i = 1, arg
            elif code == "f":
                if not isinstance(arg, (int, float)) or isinstance(arg, bool):
                    raise KernelCallError(f"{self.name}: argument {index} must be a float, got {type(arg).__name__}")
                slot.kind, slot.f = 2, float(arg)
            elif code == "b":
                if not isinstance(arg, bool):
                    raise KernelCallError(f"{self.name}: argument {index} must be a bool, got {type(arg).__name__}")
                slot.kind, slot.i = 3, int(arg)
        error = ctypes.create_string_buffer(_ERROR_LEN)
        state = _CCallState(torch.cuda.current_stream().cuda_stream, ctypes.cast(error, ctypes.c_char_p), _ERROR_LEN)
        status = self._fn(values, len(args), ctypes.byref(state))
        if status != 0:
            raise KernelCallError(error.value.decode(errors="replace") or f"{self.name} failed")


class OpLibrary:
    """The functions one workspace library registered, as attributes (``ops.relu(x, out)``)."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        try:
            self._lib = ctypes.CDLL(str(self.path), mode=os.RTLD_LOCAL | os.RTLD_NOW)
        except OSError as exc:
            raise LibraryLoadError(f"cannot load kernel library {self.path}: {exc}") from exc
        lib = self._lib
        lib.ca_op_count.restype = ctypes.c_int32
        lib.ca_op_name.restype = ctypes.c_char_p
        lib.ca_op_name.argtypes = [ctypes.c_int32]
        lib.ca_op_signature.restype = ctypes.c_char_p
        lib.ca_op_signature.argtypes = [ctypes.c_int32]
        lib.ca_op_function.restype = ctypes.c_void_p
        lib.ca_op_function.argtypes = [ctypes.c_int32]
        self._ops: dict[str, Op] = {}
        for i in range(lib.ca_op_count()):
            name = lib.ca_op_name(i).decode()
            if name in self._ops:
                raise LibraryLoadError(f"{self.path}: two kernel files export a function named {name!r}; rename one")
            fn = _TRAMPOLINE(lib.ca_op_function(i))
            self._ops[name] = Op(name, lib.ca_op_signature(i).decode(), fn)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(self._ops)

    def __getattr__(self, name: str) -> Op:
        ops = self.__dict__.get("_ops", {})
        if name in ops:
            return ops[name]
        raise AttributeError(
            f"no kernel function {name!r}; exported: {', '.join(sorted(ops)) or 'none'} "
            "(add CA_EXPORT(name) in a kernels/*.cu file and build)"
        )

    def __dir__(self) -> list[str]:
        return sorted(self._ops)
