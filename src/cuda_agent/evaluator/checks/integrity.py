"""Integrity snapshots: what the candidate could patch, captured before it loads and compared after each call.

Principle: nothing the candidate can reach is trusted. The evaluator keeps its own references to everything it
relies on (bound at import), and also verifies afterwards that the shared world it cannot hold privately (the
torch namespace, tensor methods, nn.Module classes, dispatcher kernels, mode stacks, global hooks, backend flags,
threads) is as it was, so that a patch that would fool the *reference* (computed after the candidate loaded) or
a later stage is caught and named.
"""
from __future__ import annotations

import os
import sys
import threading
import types
from dataclasses import dataclass, field
from typing import Any, Iterable

import torch

_getattr = getattr
_id = id
_listdir = os.listdir
_enumerate_threads = threading.enumerate
_dispatch_dump = torch._C._dispatch_dump
_len_fn_stack = torch._C._len_torch_function_stack
_len_dispatch_stack = torch._C._len_torch_dispatch_stack
_gettrace = sys.gettrace
_getprofile = sys.getprofile

_MODULE_NAMESPACES = (
    "torch", "torch.nn.functional", "torch.cuda", "torch.linalg", "torch.fft", "torch.special", "torch.nn.init",
    "torch.backends.cuda", "torch.backends.cudnn", "torch.testing", "torch.utils._python_dispatch", "time",
    "threading", "math", "numpy",
)
_CLASS_NAMESPACES = ("torch.Tensor", "torch._C.TensorBase", "torch._C._VariableFunctions", "torch.nn.Module",
                     "torch.nn.Parameter", "torch.cuda.Event", "torch.cuda.Stream")
_CLASS_DICT_NOISE = frozenset({"__slotnames__", "_abc_impl", "__annotations__", "__weakref__", "__dict__"})
_GLOBAL_HOOKS = (
    "_global_backward_hooks", "_global_backward_pre_hooks", "_global_buffer_registration_hooks",
    "_global_forward_hooks", "_global_forward_hooks_always_called", "_global_forward_hooks_with_kwargs",
    "_global_forward_pre_hooks", "_global_module_registration_hooks", "_global_parameter_registration_hooks",
)


def _resolve(dotted: str) -> Any:
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        module = sys.modules.get(".".join(parts[:cut]))
        if module is not None:
            obj: Any = module
            for attr in parts[cut:]:
                obj = _getattr(obj, attr, None)
                if obj is None:
                    return None
            return obj
    return None


def backend_flags() -> dict[str, Any]:
    """Global numerics settings a candidate could flip to compute in lower precision."""
    flags: dict[str, Any] = {
        "float32_matmul_precision": torch.get_float32_matmul_precision(),
        "default_dtype": str(torch.get_default_dtype()),
        "deterministic": torch.are_deterministic_algorithms_enabled(),
    }
    matmul = torch.backends.cuda.matmul
    for name in ("allow_tf32", "allow_fp16_reduced_precision_reduction", "allow_bf16_reduced_precision_reduction"):
        try:
            flags[f"cuda.matmul.{name}"] = _getattr(matmul, name)
        except Exception:  # noqa: BLE001 - some builds lack a flag
            pass
    cudnn = torch.backends.cudnn
    for name in ("allow_tf32", "enabled", "deterministic"):
        flags[f"cudnn.{name}"] = _getattr(cudnn, name, None)
    try:
        flags["mkldnn.enabled"] = torch.backends.mkldnn.enabled
    except Exception:  # noqa: BLE001
        pass
    return flags


def native_threads() -> dict[int, str]:
    """Thread id -> name of every native thread of this process (Python threads included)."""
    out: dict[int, str] = {}
    try:
        tids = _listdir("/proc/self/task")
    except OSError:
        return out
    for tid in tids:
        try:
            with open(f"/proc/self/task/{tid}/comm") as fh:
                out[int(tid)] = fh.read().strip()
        except OSError:
            continue
    return out


def python_threads() -> dict[int, str]:
    return {t.ident or 0: t.name for t in _enumerate_threads() if t.is_alive()}


def _namespace_items(dotted: str) -> dict[str, Any] | None:
    obj = _resolve(dotted)
    if obj is None:
        return None
    try:
        return dict(vars(obj))
    except TypeError:
        return None


def _nn_classes() -> dict[str, type]:
    classes: dict[str, type] = {}
    for name, obj in vars(torch.nn).items():
        if isinstance(obj, type) and issubclass(obj, torch.nn.Module):
            classes[f"torch.nn.{name}"] = obj
    return classes


@dataclass
class Snapshot:
    """Everything captured before the candidate loads; `diff` lists what changed since."""

    modules: dict[str, dict[str, Any]] = field(default_factory=dict)
    classes: dict[str, dict[str, Any]] = field(default_factory=dict)
    module_objects: dict[str, Any] = field(default_factory=dict)
    dispatcher: dict[str, str] = field(default_factory=dict)
    flags: dict[str, Any] = field(default_factory=dict)
    hooks: dict[str, int] = field(default_factory=dict)
    modes: tuple[int, int] = (0, 0)
    trace: tuple[Any, Any] = (None, None)
    threads: dict[int, str] = field(default_factory=dict)
    py_threads: dict[int, str] = field(default_factory=dict)
    class_objects: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def take(cls, *, extra_modules: Iterable[str] = (), extra_classes: Iterable[Any] = (),
             ops: Iterable[str] = ()) -> "Snapshot":
        snap = cls()
        for name in (*_MODULE_NAMESPACES, *extra_modules):
            items = _namespace_items(name)
            if items is not None:
                snap.modules[name] = items
                snap.module_objects[name] = sys.modules.get(name)
        for name in _CLASS_NAMESPACES:
            items = _namespace_items(name)
            if items is not None:
                snap.classes[name] = items
        for name, klass in _nn_classes().items():
            snap.classes[name] = dict(vars(klass))
        for klass in extra_classes:
            snap.classes[f"{klass.__module__}.{klass.__qualname__}"] = dict(vars(klass))
        snap.class_objects = {f"{k.__module__}.{k.__qualname__}": k for k in extra_classes}
        for op in ops:
            try:
                snap.dispatcher[op] = _dispatch_dump(op)
            except RuntimeError:
                continue
        snap.flags = backend_flags()
        snap.hooks = _hook_counts()
        snap.modes = (_len_fn_stack(), _len_dispatch_stack())
        snap.trace = (_gettrace(), _getprofile())
        snap.threads = native_threads()
        snap.py_threads = python_threads()
        return snap

    def refresh_threads(self) -> None:
        """Accept the threads alive now as the baseline (after the evaluator's own warm-up started pools)."""
        self.threads = native_threads()
        self.py_threads = python_threads()

    def patched(self) -> list[str]:
        """Names whose value changed (or vanished, or a class attribute appeared) since the snapshot."""
        changed: list[str] = []
        for name, items in self.modules.items():
            if sys.modules.get(name) is not self.module_objects.get(name):
                changed.append(f"sys.modules[{name!r}]")
                continue
            current = _namespace_items(name) or {}
            # Private module globals of torch and the stdlib change legitimately (lazy caches, version probes);
            # the evaluator's own modules are checked in full (their private names are the trusted bindings).
            check_private = name.startswith("cuda_agent.evaluator")
            for key, value in items.items():
                if key.startswith("_") and not check_private:
                    continue
                now = current.get(key, _MISSING)
                if now is not value and not isinstance(value, types.ModuleType):
                    changed.append(f"{name}.{key}")
        class_objects = self.class_objects
        for name, items in self.classes.items():
            klass = class_objects.get(name) or _resolve(name)
            if klass is None:
                changed.append(name)
                continue
            current = dict(vars(klass))
            for key in set(items) | set(current):
                if key in _CLASS_DICT_NOISE:
                    continue
                if current.get(key, _MISSING) is not items.get(key, _MISSING):
                    changed.append(f"{name}.{key}")
        return sorted(set(changed))

    def dispatcher_changes(self) -> list[str]:
        """Ops whose dispatcher registrations changed (a Python kernel registered over an aten op)."""
        out = []
        for op, dump in self.dispatcher.items():
            try:
                now = _dispatch_dump(op)
            except RuntimeError:
                now = ""
            if now != dump:
                out.append(op)
        return out

    def flag_changes(self) -> list[str]:
        now = backend_flags()
        return [f"{k}: {v!r} -> {now.get(k)!r}" for k, v in self.flags.items() if now.get(k) != v]

    def leaks(self) -> list[str]:
        """Modes, hooks or tracers left installed."""
        out = []
        modes = (_len_fn_stack(), _len_dispatch_stack())
        if modes != self.modes:
            out.append(f"mode stacks (torch function, dispatch) {self.modes} -> {modes}")
        hooks = _hook_counts()
        out += [f"torch.nn.modules.module.{k}: {v} -> {hooks.get(k)}" for k, v in self.hooks.items() if hooks.get(k) != v]
        if (_gettrace(), _getprofile()) != self.trace:
            out.append("sys.settrace/sys.setprofile")
        return out

    def new_threads(self) -> list[str]:
        """Threads alive now that were not at the snapshot (or the last `refresh_threads`)."""
        native = native_threads()
        py = python_threads()
        out = [f"native thread {tid} ({name})" for tid, name in native.items() if tid not in self.threads]
        out += [f"Python thread {name!r}" for ident, name in py.items() if ident not in self.py_threads]
        return out


_MISSING = object()


def _hook_counts() -> dict[str, int]:
    from torch.nn.modules import module as module_mod

    return {name: len(_getattr(module_mod, name, {}) or {}) for name in _GLOBAL_HOOKS}
