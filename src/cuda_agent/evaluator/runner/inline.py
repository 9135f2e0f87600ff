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
_KEY_FIELDS = ("name", "cpp_sources", "cuda_sources", "functions", "extra_cflags", "extra_cuda_cflags",
               "extra_ldflags", "extra_include_paths", "with_cuda", "with_pytorch_error_handling")


class InlineBuildMissing(ImportError):
    """The candidate asked for an extension that the build step did not build (other arguments than at build)."""


def _normal(value: Any) -> Any:
    if value is None:
        return None
    if isinstance(value, str):
        return [value]
    if isinstance(value, (list, tuple)):
        return [str(v) for v in value]
    if isinstance(value, dict):
        return {str(k): str(v) for k, v in sorted(value.items())}
    return value


def spec_key(kwargs: dict[str, Any]) -> str:
    """The identity of one ``load_inline`` call: a hash of everything that goes into the build."""
    data = {field: _normal(kwargs.get(field)) for field in _KEY_FIELDS}
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()


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


def _bind_args(args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
    order = ("name", "cpp_sources", "cuda_sources", "functions", "extra_cflags", "extra_cuda_cflags",
             "extra_ldflags", "extra_include_paths", "build_directory", "verbose", "with_cuda", "is_python_module")
    bound = dict(zip(order, args))
    bound.update(kwargs)
    return bound


def prebuilt_loader(directory: str) -> Callable[..., types.ModuleType]:
    """A ``load_inline`` that imports the extension built for the same arguments from ``directory``."""
    try:
        with open(os.path.join(directory, INDEX)) as fh:
            index = json.load(fh)
    except (OSError, ValueError):
        index = {}

    def load_inline(*args: Any, **kwargs: Any) -> types.ModuleType:
        bound = _bind_args(args, kwargs)
        key = spec_key(bound)
        entry = index.get(key)
        if entry is None:
            raise InlineBuildMissing(
                f"load_inline(name={bound.get('name')!r}) was called with other sources or flags than when the "
                "solution was built; a solution must build the same extension every time it is imported")
        return import_extension(entry["module"], os.path.join(directory, entry["file"]))

    return load_inline


def _recording_builder(out_dir: str, real: Callable[..., Any]) -> Callable[..., types.ModuleType]:
    index: dict[str, Any] = {}

    def load_inline(*args: Any, **kwargs: Any) -> types.ModuleType:
        bound = _bind_args(args, kwargs)
        key = spec_key(bound)
        name = module_name(bound, key)
        build_dir = os.path.join(out_dir, "work", key[:16])
        os.makedirs(build_dir, exist_ok=True)
        flags = list(_normal(bound.get("extra_cuda_cflags")) or [])
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
