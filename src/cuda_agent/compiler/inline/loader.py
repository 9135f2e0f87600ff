"""Load a built inline extension the way load_inline returns it, and a drop-in ``load_inline`` for the candidate.

The evaluator builds a solution's extensions on the trusted side (`build_inline`, from specs found statically or by
the recorder), then starts the candidate process with `install(PrebuiltResolver(manifest))`: inside, the solution's
own ``load_inline(...)`` call is answered from that manifest (spec key -> .so and its sha256) without compiling
anything, and a call whose arguments differ from what was prebuilt either goes to ``request`` (a callback to the
trusted build pool) or fails with a `BuildError` that says so. Nothing on the candidate side writes the cache.
"""
from __future__ import annotations

import importlib.util
import inspect
import logging
import threading
import types
from pathlib import Path
from typing import Any, Callable, Mapping, Protocol

from cuda_agent.compiler.inline.blobs import sha256_file
from cuda_agent.compiler.inline.spec import InlineSpec
from cuda_agent.errors import BuildError

log = logging.getLogger(__name__)


class InlineResolver(Protocol):
    """Maps a load_inline call to the path of its built extension (.so); raises `BuildError` when it cannot."""

    def __call__(self, spec: InlineSpec) -> Path: ...


def import_inline_module(path: str | Path, name: str, *, is_python_module: bool = True) -> types.ModuleType | str:
    """Import the extension at ``path`` as module ``name`` (what load_inline returns), or, when
    ``is_python_module`` is false, load it into torch.ops and return its path, as torch does. The file may have
    any name: the module is found by its ``PyInit_<name>``. Raises ImportError as importing it would."""
    path = Path(path)
    if not is_python_module:
        import torch

        torch.ops.load_library(str(path))
        return str(path)
    spec = importlib.util.spec_from_file_location(name, str(path))
    if spec is None or spec.loader is None:
        raise ImportError(f"{path} cannot be imported as an extension module")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class PrebuiltResolver:
    """Answers load_inline from a manifest of prebuilt modules: spec key -> (path, sha256).

    Each file is hashed before it is handed out (a module swapped or damaged after the build is refused).
    ``request(spec)`` is asked for anything not in the manifest (None: refuse with a `BuildError`).
    """

    def __init__(self, modules: Mapping[str, tuple[str | Path, str]],
                 request: Callable[[InlineSpec], tuple[str | Path, str]] | None = None) -> None:
        self.modules = {k: (Path(p), s) for k, (p, s) in modules.items()}
        self.request = request

    def __call__(self, spec: InlineSpec) -> Path:
        entry = self.modules.get(spec.key())
        if entry is None:
            if self.request is None:
                raise BuildError(f"load_inline({spec.name!r}) was called with arguments that were not prebuilt "
                                 "(they differ from what the solution's source says statically); build it on the "
                                 "trusted side first")
            path, sha = self.request(spec)
            entry = (Path(path), sha)
        path, sha = entry
        if sha256_file(path) != sha:
            raise BuildError(f"the prebuilt extension {path} for {spec.name!r} fails its sha256 check")
        return path


class LocalBuildResolver:
    """Builds on demand with `build_inline` (trusted contexts only: tests, benchmarks, a trusted worker)."""

    def __init__(self, **build_kwargs: Any) -> None:
        self.build_kwargs = build_kwargs
        self.results: list[Any] = []

    def __call__(self, spec: InlineSpec) -> Path:
        from cuda_agent.compiler.inline.builder import build_inline

        result = build_inline(spec, **self.build_kwargs)
        self.results.append(result)
        result.raise_for_errors()
        assert result.module_path is not None
        return result.module_path


_TORCH_PARAMS = ("name", "cpp_sources", "cuda_sources", "sycl_sources", "functions", "extra_cflags",
                 "extra_cuda_cflags", "extra_sycl_cflags", "extra_ldflags", "extra_include_paths", "build_directory",
                 "verbose", "with_cuda", "with_sycl", "is_python_module", "with_pytorch_error_handling",
                 "keep_intermediates", "use_pch", "no_implicit_headers")
_IGNORED = ("build_directory", "verbose", "keep_intermediates", "use_pch")


def _signature() -> inspect.Signature:
    params = [inspect.Parameter(p, inspect.Parameter.POSITIONAL_OR_KEYWORD,
                                default=inspect.Parameter.empty if p in ("name", "cpp_sources") else None)
              for p in _TORCH_PARAMS]
    return inspect.Signature(params)


SIGNATURE = _signature()


def call_to_spec(args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> InlineSpec:
    """The spec of a load_inline(*args, **kwargs) call, bound to torch's parameter order."""
    try:
        bound = SIGNATURE.bind(*args, **kwargs)
    except TypeError as exc:
        raise BuildError(f"load_inline: {exc}") from exc
    values = {k: v for k, v in bound.arguments.items() if k not in _IGNORED and v is not None}
    for flag, default in (("is_python_module", True), ("with_pytorch_error_handling", True),
                          ("no_implicit_headers", False)):
        values.setdefault(flag, default)
    return InlineSpec.from_call(values)


class _Loader:
    def __init__(self, resolver: InlineResolver) -> None:
        self.resolver = resolver
        self.loaded: dict[str, tuple[str, Any]] = {}
        self.lock = threading.Lock()

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        spec = call_to_spec(args, kwargs)
        with self.lock:
            previous = self.loaded.get(spec.name)
            if previous is not None:
                if previous[0] == spec.key():
                    return previous[1]
                raise BuildError(f"load_inline({spec.name!r}) was called twice with different sources in one "
                                 "process; give the second extension another name")
            path = self.resolver(spec)
            module = import_inline_module(path, spec.name, is_python_module=spec.is_python_module)
            self.loaded[spec.name] = (spec.key(), module)
            log.info("load_inline(%r) answered from %s", spec.name, path)
            return module


def make_load_inline(resolver: InlineResolver) -> Callable[..., Any]:
    """A function with load_inline's parameters that resolves, then imports (see `install`)."""
    loader = _Loader(resolver)

    def load_inline(*args: Any, **kwargs: Any) -> Any:
        return loader(*args, **kwargs)

    load_inline.__signature__ = SIGNATURE  # type: ignore[attr-defined]
    load_inline.__doc__ = "cuda-agent's load_inline: the extension comes prebuilt from the trusted build side."
    return load_inline


def install(resolver: InlineResolver) -> Callable[[], None]:
    """Replace ``torch.utils.cpp_extension.load_inline`` with one answered by ``resolver``; return the undo.

    Call it before the solution is imported (``from torch.utils.cpp_extension import load_inline`` then binds
    ours)."""
    import torch.utils.cpp_extension as cpp_extension

    original = cpp_extension.load_inline
    cpp_extension.load_inline = make_load_inline(resolver)

    def undo() -> None:
        cpp_extension.load_inline = original

    return undo
