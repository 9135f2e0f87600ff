"""`build_inline`: build a load_inline extension fast, into a content cache, with torch's own flags.

Strategies for the CUDA file, tried in order (each one falls back to the next when it cannot apply or fails):

* ``split``: kernels compiled by nvcc without torch's headers, host code by gcc against a precompiled torch header
  (``split.py``); about 10x less compiler work than torch's build.
* ``light``: nvcc on torch's cuda.cu with ``#include <torch/extension.h>`` dropped (torch/types.h, which torch
  prepends anyway, stays) when the code names nothing from Python or torch's C++ frontend; about 1.7x less work.
* ``full``: nvcc on exactly torch's cuda.cu.

The binding is the per-signature fast path (``binding.py``) when the prototypes allow it, else torch's main.cpp
compiled against a precompiled ``torch/extension.h``. The result is linked exactly as torch links (same compiler,
same ``ldflags``), stored under its sha256, and indexed by a key over everything that went in (sources, flags,
torch, compilers, architecture), so an identical solution never builds twice. Compilers run through ``runner``
(the sandboxed runner in production) in a private folder; only this process writes the cache.
"""
from __future__ import annotations

import logging
import shutil
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

from cuda_agent.compiler import diagnostics
from cuda_agent.compiler.builder import Runner, default_cache_dir, run_local
from cuda_agent.compiler.inline import binding as bind
from cuda_agent.compiler.inline.blobs import BlobCache
from cuda_agent.compiler.inline.cxxlex import LexError
from cuda_agent.compiler.inline.flags import InlineFlagError
from cuda_agent.compiler.inline.spec import InlineSpec
from cuda_agent.compiler.inline.split import SplitPlan, plan_split
from cuda_agent.compiler.inline.steps import (
    BUILDER_VERSION, Context, Flags, binding_objects, cuda_objects, host_pch_header, light_ok, link, pch,
    prepare_signatures, sha, split_objects, torch_macro_names,
)
from cuda_agent.compiler.inline.torchenv import torch_env
from cuda_agent.compiler.toolchain import detect_arch, normalize_arch
from cuda_agent.errors import BuildError

log = logging.getLogger(__name__)

_INFLIGHT: dict[str, threading.Lock] = {}
_INFLIGHT_LOCK = threading.Lock()

STRATEGIES = ("split", "light", "full")


@dataclass(frozen=True)
class InlineBuildResult:
    """What `build_inline` produced. ``module_path`` is the verified .so in the cache; ``strategy`` says which CUDA
    path built it (split, light, full, or cpp when there is no CUDA file) and ``binding`` which binding (sig or
    main); ``steps`` are (label, seconds) of each compiler call."""

    ok: bool
    name: str
    module_path: Path | None
    seconds: float
    cache_hit: bool = False
    strategy: str = ""
    binding: str = ""
    key: str = ""
    diagnostics: str = ""
    log: str = ""
    steps: tuple[tuple[str, float], ...] = ()

    def raise_for_errors(self) -> "InlineBuildResult":
        if not self.ok:
            raise BuildError(f"inline extension {self.name!r} failed to build:\n{self.diagnostics}",
                             diagnostics=self.diagnostics, log=self.log)
        return self

    def to_dict(self) -> dict:
        data = {k: getattr(self, k) for k in self.__dataclass_fields__}
        data["module_path"] = str(self.module_path) if self.module_path else None
        data["steps"] = [list(s) for s in self.steps]
        return data

    @classmethod
    def from_dict(cls, data: dict) -> "InlineBuildResult":
        path = data.get("module_path")
        return cls(**{**data, "module_path": Path(path) if path else None,
                      "steps": tuple(tuple(s) for s in data.get("steps", ()))})


def default_inline_cache() -> Path:
    return default_cache_dir() / "inline"


def _plan_strategies(spec: InlineSpec, strategies: Sequence[str],
                     torch_macros: Callable[[], frozenset[str]]) -> list[tuple[str, SplitPlan | None]]:
    if not spec.uses_cuda:
        return [("cpp", None)]
    plans: list[tuple[str, SplitPlan | None]] = []
    for strategy in strategies:
        if strategy == "split":
            try:
                plans.append(("split", plan_split("\n".join(spec.cuda_sources), torch_macros())))
            except LexError as exc:
                log.info("%s: not split (%s)", spec.name, exc)
        elif strategy == "light" and light_ok(spec):
            plans.append(("light", None))
        elif strategy == "full":
            plans.append(("full", None))
    if not plans or plans[-1][0] != "full":
        plans.append(("full", None))
    return plans


def build_inline(spec: InlineSpec, *, cache_dir: str | Path | None = None, arch: str | None = None,
                 runner: Runner | None = None, jobs: int | None = None, work_dir: str | Path | None = None,
                 python: str | None = None, timeout_s: float = 900.0,
                 strategies: Sequence[str] = STRATEGIES) -> InlineBuildResult:
    """Build the extension ``spec`` describes and return where its verified .so is.

    ``runner`` has `cuda_agent.compiler.builder.Runner`'s signature (``sandboxed_runner(work_dir, extra_ro=[cache])``
    in production; compilers then write only inside ``work_dir``); ``jobs`` bounds this build's parallel
    compilers (default 4); ``python`` is the interpreter whose torch to match (default: this one). Compiler errors
    come back in the result (``ok`` false, ``diagnostics`` from the build torch itself would have run); a
    disallowed flag comes back the same way. Raises `BuildError` only when torch or the toolkit cannot be found.
    """
    started = time.perf_counter()
    root = Path(cache_dir) if cache_dir else default_inline_cache()
    cache = BlobCache(root)
    arch = normalize_arch(arch or detect_arch())
    env = torch_env(python, str(root))
    key = sha("module", BUILDER_VERSION, env.key(), spec.key(), arch, list(strategies))
    hit = cache.get(key)
    if hit is not None:
        meta = cache.meta(key) or {}
        return InlineBuildResult(True, spec.name, hit, time.perf_counter() - started, True, meta.get("strategy", ""),
                                 meta.get("binding", ""), key)
    try:
        flags = Flags(spec, env, arch)
    except InlineFlagError as exc:
        return InlineBuildResult(False, spec.name, None, time.perf_counter() - started, key=key,
                                 diagnostics=str(exc))
    with _INFLIGHT_LOCK:
        inflight = _INFLIGHT.setdefault(key, threading.Lock())
    with inflight:
        hit = cache.get(key)
        if hit is not None:
            meta = cache.meta(key) or {}
            return InlineBuildResult(True, spec.name, hit, time.perf_counter() - started, True,
                                     meta.get("strategy", ""), meta.get("binding", ""), key)
        base = Path(work_dir) if work_dir else Path(tempfile.gettempdir())
        base.mkdir(parents=True, exist_ok=True)
        work = Path(tempfile.mkdtemp(prefix=f"cak-inline-{spec.name}-", dir=base))
        ctx = Context(spec, env, cache, arch, runner or run_local, work, timeout_s, threading.Semaphore(jobs or 4))
        try:
            return _build(ctx, flags, key, strategies, started)
        finally:
            shutil.rmtree(work, ignore_errors=True)


def _build(ctx: Context, flags: Flags, key: str, strategies: Sequence[str], started: float) -> InlineBuildResult:
    spec = ctx.spec
    bound: dict[str, tuple[list[Path], str] | None] = {}
    binder = threading.Thread(target=lambda: bound.setdefault("b", binding_objects(ctx, flags)))
    binder.start()
    module: Path | None = None
    strategy = ""
    split_failed = False
    macros = lambda: torch_macro_names(ctx.env, flags.host_env, ctx.cache.root)  # noqa: E731
    for strategy, plan in _plan_strategies(spec, strategies, macros):
        if strategy == "light" and split_failed:
            # the split reached the compiler and failed: most often an error in the solution itself, which the
            # light build would only repeat; go straight to torch's own file (its errors are the ones to report)
            continue
        if strategy == "split":
            assert plan is not None
            objects = split_objects(ctx, flags, plan)
            split_failed = objects is None
        elif strategy == "cpp":
            objects = []
        else:
            objects = cuda_objects(ctx, flags, strategy)
        if objects is None:
            continue
        binder.join()
        if bound.get("b") is None:
            break
        module = link(ctx, flags, [*bound["b"][0], *objects], strategy)
        if module is not None:
            break
    binder.join()
    seconds = time.perf_counter() - started
    text = "\n".join(ctx.logs)[-20000:]
    if module is None:
        last = ctx.failures.get("main") or ctx.failures.get("full") or ctx.failures.get("link:full") or \
            next(reversed(ctx.failures.values()), "build failed with no compiler output")
        return InlineBuildResult(False, spec.name, None, seconds, key=key, diagnostics=diagnostics.summarize(last),
                                 log=text, steps=tuple(ctx.steps))
    binding_kind = bound["b"][1] if bound.get("b") else ""
    final = ctx.cache.put(key, module, suffix=".so", meta={"strategy": strategy, "binding": binding_kind,
                                                           "name": spec.name})
    log.info("built inline extension %s in %.2f s (%s, binding %s)", spec.name, seconds, strategy, binding_kind)
    return InlineBuildResult(True, spec.name, final, seconds, False, strategy, binding_kind, key, "", text,
                             tuple(ctx.steps))


Builder = Callable[..., InlineBuildResult]


def warm_up(*, cache_dir: str | Path | None = None, arch: str | None = None, runner: Runner | None = None,
            work_dir: str | Path | None = None, python: str | None = None, jobs: int | None = None,
            flag_sets: Sequence[tuple[Sequence[str], Sequence[str]]] = (((), ()), (("-O3",), ("-O3",))),
            signatures: Sequence[bind.Signature] = bind.COMMON_SIGNATURES) -> float:
    """Build what every solution with these (extra_cflags, extra_cuda_cflags) shares, once per toolchain: the
    precompiled headers, torch's macro list and the binding objects of the common ``signatures``; return the
    seconds it took. Builds work without it (the first solution that needs a piece builds it); a build server
    calls this at start so that no solution waits."""
    started = time.perf_counter()
    root = Path(cache_dir) if cache_dir else default_inline_cache()
    env = torch_env(python, str(root))
    arch = normalize_arch(arch or detect_arch())
    base = Path(work_dir) if work_dir else Path(tempfile.gettempdir())
    base.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="cak-inline-warm-", dir=base))
    threads = []
    signed: set[tuple[str, ...]] = set()
    try:
        for cflags, cuda_cflags in flag_sets:
            spec = InlineSpec(name="cak_warm_up", cpp_sources=("",), cuda_sources=("",),
                              extra_cflags=tuple(cflags), extra_cuda_cflags=tuple(cuda_cflags))
            flags = Flags(spec, env, arch)
            ctx = Context(spec, env, BlobCache(root), arch, runner or run_local, work, 900.0,
                          threading.Semaphore(jobs or 4))
            jobs_list = [
                (ctx, "ext", env.cxx, flags.glue_noname, "#include <torch/extension.h>\n"),
                (ctx, "host-types", [env.host_cc], flags.host_noname, host_pch_header(spec, "types")),
            ]
            for args in jobs_list:
                thread = threading.Thread(target=pch, args=args)
                thread.start()
                threads.append(thread)
            if signatures and tuple(flags.glue_noname) not in signed:
                signed.add(tuple(flags.glue_noname))
                thread = threading.Thread(target=prepare_signatures, args=(ctx, flags, signatures))
                thread.start()
                threads.append(thread)
            torch_macro_names(env, flags.host_env, root)
    finally:
        for thread in threads:
            thread.join()
        shutil.rmtree(work, ignore_errors=True)
    return time.perf_counter() - started
