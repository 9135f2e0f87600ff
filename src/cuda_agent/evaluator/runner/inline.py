"""KernelBench single-file solutions: their ``load_inline`` extensions, built before the candidate runs.

A single-file solution compiles its CUDA at import, through ``torch.utils.cpp_extension.load_inline``. The candidate
process may not start compilers (it cannot fork), so the extensions are built first, in a separate sandboxed build
process (`build_main`), and the candidate process's ``load_inline`` (`prebuilt_loader`) only imports what was built
for exactly the same arguments (`spec_key`); anything else is a build failure with a clear message.

Standalone (standard library and torch only): both sandboxed processes use it.
"""
from __future__ import annotations

import hashlib
import importlib.machinery
import importlib.util
import json
import os
import shutil
import sys
import types
from typing import Any, Callable

INDEX = "index.json"
_LIST_FIELDS = ("cpp_sources", "cuda_sources", "sycl_sources", "extra_cflags", "extra_cuda_cflags",
                "extra_sycl_cflags", "extra_ldflags", "extra_include_paths")
_FLAG_DEFAULTS = (("is_python_module", True), ("with_pytorch_error_handling", True), ("no_implicit_headers", False),
                  ("with_sycl", None), ("with_cuda", None))


class InlineBuildMissing(ImportError):
    """The candidate asked for an extension that the build step did not build (other arguments than at build)."""


def _strings(value: Any) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    return [str(v) for v in value]


def _functions(value: Any) -> list[list[str]] | None:
    if value is None:
        return None
    if isinstance(value, str):
        return [[value, value]]
    if isinstance(value, dict):
        return [[str(k), str(v)] for k, v in value.items()]
    return [[str(v), str(v)] for v in value]


def canonical_call(bound: dict[str, Any]) -> dict[str, Any]:
    """What one ``load_inline`` call builds, normalised as torch normalises it (a string is a one-item list, a list
    of function names is name -> name, an omitted flag is its default); the build side computes the same form from
    the call it read statically (`cuda_agent.evaluator.judge.prepare.inline_call_key`)."""
    data: dict[str, Any] = {"name": str(bound.get("name"))}
    for name in _LIST_FIELDS:
        data[name] = _strings(bound.get(name))
    data["functions"] = _functions(bound.get("functions"))
    for name, default in _FLAG_DEFAULTS:
        value = bound.get(name)
        data[name] = default if value is None else bool(value)
    return data


def spec_key(bound: dict[str, Any]) -> str:
    """The identity of one ``load_inline`` call: a hash of everything that goes into the build."""
    return hashlib.sha256(json.dumps(canonical_call(bound), sort_keys=True).encode()).hexdigest()


def module_name(kwargs: dict[str, Any], key: str) -> str:
    return f"{kwargs.get('name', 'ext')}_{key[:12]}"


def import_extension(name: str, path: str) -> types.ModuleType:
    """Import a built extension module from ``path`` under ``name`` (its PyInit symbol's name)."""
    loader = importlib.machinery.ExtensionFileLoader(name, path)
    spec = importlib.util.spec_from_file_location(name, path, loader=loader)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    sys.modules[name] = module
    return module


def _binder(real: Callable[..., Any]) -> Callable[[tuple[Any, ...], dict[str, Any]], dict[str, Any]]:
    """Names a call's arguments by torch's own ``load_inline`` signature (positions moved between versions)."""
    import inspect

    signature = inspect.signature(real)

    def bind(args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
        try:
            return dict(signature.bind(*args, **kwargs).arguments)
        except TypeError as exc:
            raise TypeError(f"load_inline: {exc}") from None

    return bind


def prebuilt_loader(directory: str) -> Callable[..., types.ModuleType]:
    """A ``load_inline`` that imports the extension built for the same arguments from ``directory``."""
    try:
        with open(os.path.join(directory, INDEX)) as fh:
            index = json.load(fh)
    except (OSError, ValueError):
        index = {}
    import torch.utils.cpp_extension as cpp_extension

    bind = _binder(cpp_extension.load_inline)

    def load_inline(*args: Any, **kwargs: Any) -> types.ModuleType:
        bound = bind(args, kwargs)
        key = spec_key(bound)
        entry = index.get(key)
        if entry is None:
            raise InlineBuildMissing(
                f"load_inline(name={bound.get('name')!r}) was called with other sources or flags than when the "
                "solution was built; a solution must build the same extension every time it is imported")
        path = os.path.join(directory, entry["file"])
        if entry.get("python_module", True) is False:
            import torch

            torch.ops.load_library(path)
            return path  # type: ignore[return-value]
        return import_extension(entry["module"], path)

    return load_inline


def _recording_builder(out_dir: str, real: Callable[..., Any]) -> Callable[..., types.ModuleType]:
    index: dict[str, Any] = {}
    bind = _binder(real)

    def load_inline(*args: Any, **kwargs: Any) -> types.ModuleType:
        bound = bind(args, kwargs)
        key = spec_key(bound)
        name = module_name(bound, key)
        build_dir = os.path.join(out_dir, "work", key[:16])
        os.makedirs(build_dir, exist_ok=True)
        flags = _strings(bound.get("extra_cuda_cflags"))
        call = dict(bound, name=name, build_directory=build_dir, verbose=True,
                    extra_cuda_cflags=flags + ["-Xptxas=-v"])
        call.pop("is_python_module", None)
        module = real(**call)
        built = getattr(module, "__file__", None) or os.path.join(build_dir, f"{name}.so")
        target = f"{key}.so"
        shutil.copy2(built, os.path.join(out_dir, target))
        index[key] = {"module": name, "file": target}
        with open(os.path.join(out_dir, INDEX), "w") as fh:
            json.dump(index, fh)
        return module

    return load_inline


def build_main(solution: str, out_dir: str) -> int:
    """In the sandboxed build process: import ``solution`` with every ``load_inline`` building into ``out_dir``
    (recorded in its index); exit code 0 when the import finished."""
    import torch.utils.cpp_extension as cpp_extension

    cpp_extension.load_inline = _recording_builder(out_dir, cpp_extension.load_inline)  # type: ignore[assignment]
    sys.path.insert(0, os.path.dirname(solution))
    spec = importlib.util.spec_from_file_location("cuda_agent_solution", solution)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return 0


if __name__ == "__main__":
    sys.exit(build_main(sys.argv[1], sys.argv[2]))
