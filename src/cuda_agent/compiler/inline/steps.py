"""The compiler steps of an inline build: precompiled headers, the binding, the split, torch's CUDA file, the link.

Each step runs its compiler through the build's runner in the build's private folder and reports success as a
bool (the text goes to the build's log); `builder.build_inline` chooses which steps to run and in what order.
"""
from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import shutil
import subprocess
import tempfile
import threading
import time
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

from cuda_agent.compiler.builder import Runner
from cuda_agent.compiler.inline import binding as bind
from cuda_agent.compiler.inline.blobs import BlobCache
from cuda_agent.compiler.inline.cxxlex import LexError
from cuda_agent.compiler.inline.flags import (
    check_cxx_flags, check_include_paths, check_ldflags, check_nvcc_flags, host_flags_from_nvcc, is_neutral,
)
from cuda_agent.compiler.inline.spec import InlineSpec
from cuda_agent.compiler.inline.split import EXTENSION_INCLUDE, FRONTEND, SplitError, SplitPlan, names_python
from cuda_agent.compiler.inline.torchenv import TorchEnv
from cuda_agent.errors import BuildError

log = logging.getLogger(__name__)

BUILDER_VERSION = "3"  # of modules and binding objects: bump when what they contain changes
PCH_VERSION = "1"  # of precompiled headers: bump when how they are made changes

CUDA_PREFIX = "#include <cuda.h>\n#include <cuda_runtime.h>\n"

def sha(*parts: object) -> str:
    return hashlib.sha256(json.dumps([str(p) if not isinstance(p, (list, tuple)) else list(map(str, p))
                                      for p in parts]).encode()).hexdigest()


_PCH_FUTURES: dict[str, "Future[Path | None]"] = {}
_PCH_LOCK = threading.Lock()


@dataclass
class Context:
    spec: InlineSpec
    env: TorchEnv
    cache: BlobCache
    arch: str
    run: Runner
    work: Path
    timeout: float
    jobs: threading.Semaphore
    steps: list[tuple[str, float]] = field(default_factory=list)
    logs: list[str] = field(default_factory=list)
    failures: dict[str, str] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def compile(self, label: str, argv: Sequence[str], output: Path, cwd: Path | None = None) -> bool:
        """Run one compiler command; True when it produced ``output``. Output text goes to the log."""
        with self.jobs:
            start = time.perf_counter()
            try:
                proc = self.run(list(argv), cwd or self.work, self.timeout)
                text = (proc.stdout or "") + (proc.stderr or "")
                code = proc.returncode
            except subprocess.TimeoutExpired:
                text, code = f"{label}: the compiler ran past {self.timeout:.0f} s and was stopped", -1
        seconds = time.perf_counter() - start
        ok = code == 0 and output.is_file() and output.stat().st_size > 0
        with self.lock:
            self.steps.append((label, round(seconds, 3)))
            if text.strip():
                self.logs.append(f"[{label}] {text.strip()}")
            if not ok:
                self.failures[label] = text or f"{label}: exited with {code}"
        log.debug("%s: %s in %.2f s", self.spec.name, label, seconds)
        return ok


class Flags:
    """The command lines of each file, derived from torch's and the solution's (checked) flags."""

    def __init__(self, spec: InlineSpec, env: TorchEnv, arch: str) -> None:
        self.user_cxx = check_cxx_flags(spec.extra_cflags)
        self.user_nvcc = check_nvcc_flags(spec.extra_cuda_cflags)
        self.user_ld = check_ldflags(spec.extra_ldflags)
        includes = [f"-I{p}" for p in check_include_paths(spec.extra_include_paths)]
        name_define = f"-DTORCH_EXTENSION_NAME={spec.name}"
        base = list(env.cflags)
        self.cxx_noname = base[:1] + includes + base[1:] + self.user_cxx
        self.cxx = [name_define, *self.cxx_noname]
        self.glue_noname = base[:1] + includes + base[1:] + [f for f in self.user_cxx if not is_neutral(f)]
        self.glue = [name_define, *self.glue_noname]
        nv = list(env.cuda_cflags)
        std = [t for t in nv if t.startswith("-std=")]
        nv = [t for t in nv if not t.startswith("-std=")]
        user_arch = any(t.startswith(("-arch", "-gencode", "--generate-code", "--gpu-architecture", "arch="))
                        for t in self.user_nvcc)
        arch_flags = [] if user_arch else [f"-gencode=arch=compute_{arch},code=sm_{arch}"]
        user_std = any(t.startswith("-std=") for t in self.user_nvcc)
        self.nvcc = [name_define, *includes, *nv, *arch_flags, *self.user_nvcc, *([] if user_std else std)]
        host = list(env.nvcc_host_flags)
        it = iter(nv)
        for token in it:
            if token in ("-isystem", "-I"):
                host += [token, next(it, "")]
            elif token.startswith(("-D", "-U", "-I")):
                host.append(token)
        host_user = host_flags_from_nvcc(self.user_nvcc)
        host_std = [t for t in host_user if t.startswith("-std=")] or std
        self.host_noname = ["-x", "c++", *includes, *host, "-fPIC", "-m64",
                            *[t for t in host_user if not t.startswith("-std=")], *host_std[-1:]]
        self.host = [name_define, *self.host_noname]
        self.host_env = ["-x", "c++", *host, "-fPIC", "-m64", *std]
        self.ld = [*env.ldflags, *self.user_ld]


def pch(ctx: Context, kind: str, compiler: Sequence[str], flags: Sequence[str], header: str) -> Path:
    """The header to ``-include`` for ``kind``, with its precompiled form built once per toolchain and flags.

    The header text is always valid to include as is: when the .gch cannot be built (or gcc rejects it) the
    compiler reads the header itself, which is the same code, only slower."""
    key = sha("pch", PCH_VERSION, ctx.env.key(), compiler, flags, header)
    found = ctx.cache.get(key)
    if found is not None:
        meta = ctx.cache.meta(key) or {}
        return found.with_name(meta.get("header", "cak_pch.h"))
    with _PCH_LOCK:
        future = _PCH_FUTURES.get(key)
        owner = future is None or (future.done() and future.result() is None)
        if owner:
            future = Future()
            _PCH_FUTURES[key] = future
    assert future is not None
    if owner:
        result: Path | None = None
        try:
            with ctx.cache.locked(key):
                found = ctx.cache.get(key)
                if found is not None:
                    result = found.with_name((ctx.cache.meta(key) or {}).get("header", "cak_pch.h"))
                else:
                    folder = Path(tempfile.mkdtemp(prefix=f"pch-{kind}-", dir=ctx.work))
                    (folder / "cak_pch.h").write_text(header)
                    gch = folder / "cak_pch.h.gch"
                    argv = [*compiler, *flags, "-x", "c++-header", "cak_pch.h", "-o", gch.name]
                    if ctx.compile(f"pch:{kind}", argv, gch, cwd=folder):
                        result = ctx.cache.put_pch(key, folder / "cak_pch.h", gch, {"kind": kind})
                    shutil.rmtree(folder, ignore_errors=True)
        finally:
            future.set_result(result)
    result = future.result()
    if result is not None:
        return result
    plain = ctx.work / f"cak_{kind}.h"
    plain.write_text(header)
    return plain


def host_pch_header(spec: InlineSpec, variant: str) -> str:
    lines = ["#include <cuda_runtime.h>"]
    if not spec.no_implicit_headers:
        lines += ["#include <torch/types.h>", "#include <cuda.h>", "#include <cuda_runtime.h>"]
    lines += {"all": ["#include <torch/all.h>"], "ext": ["#include <torch/extension.h>"], "types": [],
              "keep": []}[variant]
    return "\n".join(lines) + "\n"


def _sig_cache_key(env: TorchEnv, flags: Flags, source: str) -> str:
    return sha("sig", BUILDER_VERSION, env.key(), flags.glue_noname, source)


def prepare_signatures(ctx: Context, flags: Flags, signatures: Sequence[bind.Signature]) -> None:
    """Compile the binding objects of ``signatures`` (with and without torch's error handling) as one file, so the
    pybind11 code every such object carries is compiled once, and index each signature to that object."""
    plans = [bind.BindingPlan(tuple((f"f{i}", "", s) for i, s in enumerate(signatures)), wrap) for wrap in (True, False)]
    wanted = {_sig_cache_key(ctx.env, flags, p.sig_source(k)): p.sig_source(k) for p in plans for k in p.signatures()}
    missing = {key: src for key, src in wanted.items() if ctx.cache.get(key) is None}
    if not missing:
        return
    ext_hdr = pch(ctx, "ext", ctx.env.cxx, flags.glue_noname, "#include <torch/extension.h>\n")
    src = ctx.work / "common_signatures.cpp"
    src.write_text("".join(missing.values()))
    out = src.with_suffix(".o")
    if ctx.compile("sig:common", [*ctx.env.cxx, *flags.glue_noname, "-include", str(ext_hdr), "-Winvalid-pch", "-c",
                                  src.name, "-o", out.name], out):
        first, *rest = missing
        ctx.cache.put(first, out, suffix=".o", meta={"kind": "sig", "signatures": len(missing)})
        for key in rest:
            ctx.cache.alias(key, first)


def binding_objects(ctx: Context, flags: Flags) -> tuple[list[Path], str] | None:
    """Objects that define the module (PYBIND11_MODULE and the defs): the fast path, else torch's main.cpp."""
    spec, env = ctx.spec, ctx.env
    try:
        plan = bind.plan_binding(spec)
    except LexError as exc:
        log.debug("%s: binding from main.cpp (%s)", spec.name, exc)
        plan = None
    if plan is not None:
        objects: list[Path] = []
        (ctx.work / "module.cpp").write_text(plan.module_source())
        threads = []
        results: dict[str, Path | None] = {}

        def sig_object(key: str) -> None:
            cached = ctx.cache.get(_sig_cache_key(env, flags, plan.sig_source(key)))
            if cached is None:
                ext_hdr = pch(ctx, "ext", env.cxx, flags.glue_noname, "#include <torch/extension.h>\n")
                src = ctx.work / f"sig_{key}.cpp"
                src.write_text(plan.sig_source(key))
                out = src.with_suffix(".o")
                if ctx.compile(f"sig:{key[:8]}", [*env.cxx, *flags.glue_noname, "-include", str(ext_hdr), "-Winvalid-pch",
                                                  "-c", src.name, "-o", out.name], out):
                    cached = ctx.cache.put(_sig_cache_key(env, flags, plan.sig_source(key)), out, suffix=".o",
                                           meta={"kind": "sig"})
            results[key] = cached

        for key in plan.signatures():
            thread = threading.Thread(target=sig_object, args=(key,))
            thread.start()
            threads.append(thread)
        module_ok = ctx.compile("module", [*env.cxx, *flags.glue, "-c", "module.cpp", "-o", "module.o"],
                                ctx.work / "module.o")
        for thread in threads:
            thread.join()
        if module_ok and all(results.values()):
            # a prepared batch object serves several signatures: link each object once
            objects = [ctx.work / "module.o", *dict.fromkeys(p for p in results.values() if p is not None)]
            return objects, "sig"
        log.info("%s: fast binding failed; compiling torch's main.cpp", spec.name)
    (ctx.work / "main.cpp").write_text(bind.main_cpp(spec))
    argv = [*env.cxx, *flags.cxx]
    if not spec.no_implicit_headers:
        argv += ["-include", str(pch(ctx, "ext", env.cxx, flags.cxx_noname, "#include <torch/extension.h>\n")),
                 "-Winvalid-pch"]
    if ctx.compile("main", [*argv, "-c", "main.cpp", "-o", "main.o"], ctx.work / "main.o"):
        return [ctx.work / "main.o"], "main"
    return None


def _undefined(ctx: Context, obj: Path) -> list[str]:
    proc = ctx.run(["nm", "-C", "--undefined-only", str(obj)], ctx.work, 120)
    return proc.stdout.splitlines() if proc.returncode == 0 else []


def split_objects(ctx: Context, flags: Flags, plan: SplitPlan) -> list[Path] | None:
    spec = ctx.spec
    prefix = "" if spec.no_implicit_headers else CUDA_PREFIX
    device_ok: list[bool] = []

    def device(source: str) -> None:
        (ctx.work / "device.cu").write_text(prefix + source)
        device_ok.append(ctx.compile("device", [ctx.env.nvcc, *flags.nvcc, "-c", "device.cu", "-o", "device.o"],
                                     ctx.work / "device.o"))

    thread = None
    if not plan.templated:
        thread = threading.Thread(target=device, args=(plan.device_source,))
        thread.start()
    host_ok = False
    for variant in plan.host_variants:
        pch_variant = "types" if variant == "keep" else variant
        header = pch(ctx, f"host-{pch_variant}", [ctx.env.host_cc], flags.host_noname,
                      host_pch_header(spec, pch_variant))
        # torch's cuda.cu starts with three implicit includes: keep the user's line numbers the same in messages
        lead = "" if spec.no_implicit_headers else "\n\n\n"
        (ctx.work / "host.cpp").write_text(lead + plan.host_source(variant))
        host_ok = ctx.compile(f"host:{variant}", [ctx.env.host_cc, *flags.host, "-include", str(header),
                                                  "-Winvalid-pch", "-c", "host.cpp", "-o", "host.o"],
                              ctx.work / "host.o")
        if host_ok:
            break
    if thread is not None:
        thread.join()
    elif host_ok:
        try:
            device(plan.device_with_instances(_undefined(ctx, ctx.work / "host.o")))
        except SplitError as exc:
            ctx.failures["device"] = str(exc)
            device_ok.append(False)
    if host_ok and device_ok and device_ok[0]:
        return [ctx.work / "host.o", ctx.work / "device.o"]
    return None


def light_ok(spec: InlineSpec) -> bool:
    from cuda_agent.compiler.inline.cxxlex import tokenize

    text = "\n".join(spec.cuda_sources)
    if not EXTENSION_INCLUDE.search(text) or FRONTEND.search(text):
        return False
    try:
        return not names_python([t for t in tokenize(text) if t.significant])
    except LexError:
        return False


def cuda_objects(ctx: Context, flags: Flags, strategy: str) -> list[Path] | None:
    spec = ctx.spec
    source = bind.cuda_source(spec)
    if strategy == "light":
        replacement = "#include <torch/types.h>" if spec.no_implicit_headers else ""
        source = EXTENSION_INCLUDE.sub(replacement, source)
    (ctx.work / "cuda.cu").write_text(source)
    out = ctx.work / "cuda.cuda.o"
    ok = ctx.compile(strategy, [ctx.env.nvcc, *flags.nvcc, "-c", "cuda.cu", "-o", out.name], out)
    return [out] if ok else None


def link(ctx: Context, flags: Flags, objects: list[Path], label: str) -> Path | None:
    out = ctx.work / f"{ctx.spec.name}.{label}.so"
    ok = ctx.compile(f"link:{label}", [*ctx.env.cxx, *map(str, objects), *flags.ld, "-o", str(out)], out)
    if not ok:
        return None
    if label == "split":
        proc = ctx.run(["nm", "-D", "--undefined-only", str(out)], ctx.work, 120)
        missing = [line for line in proc.stdout.splitlines() if "cak_" in line]
        if proc.returncode != 0 or missing:
            ctx.failures["link:split"] = "split module misses its shims: " + "; ".join(missing[:5])
            return None
    return out


_MACROS: dict[str, frozenset[str]] = {}
_MACROS_LOCK = threading.Lock()


def torch_macro_names(env: TorchEnv, host_flags: Sequence[str], cache_root: Path) -> frozenset[str]:
    """Macros the torch headers define beyond cuda.h and cuda_runtime.h (read once per toolchain with
    ``-dM -E``, cached): the device file of a split does not include torch, so its code must not use them."""
    key = sha("macros", env.key(), host_flags)[:32]
    with _MACROS_LOCK:
        if key not in _MACROS:
            _MACROS[key] = _read_macros(env, host_flags, cache_root / "toolchain" / f"macros-{key}.json")
        return _MACROS[key]


def _read_macros(env: TorchEnv, host_flags: Sequence[str], path: Path) -> frozenset[str]:
    try:
        names = frozenset(json.loads(path.read_text()))
    except (OSError, ValueError):
        def defined(header: str) -> set[str]:
            proc = subprocess.run([env.host_cc, *host_flags, "-dM", "-E", "-"], input=header, capture_output=True,
                                  text=True, timeout=600)
            if proc.returncode != 0:
                raise BuildError(f"cannot list torch's macros: {proc.stderr[-1000:]}")
            return {m.group(1) for m in re.finditer(r"^#define (\w+)", proc.stdout, re.M)}

        base = "#include <cuda.h>\n#include <cuda_runtime.h>\n"
        names = frozenset(defined(base + "#include <torch/extension.h>\n") - defined(base))
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(sorted(names)))
        os.replace(tmp, path)
    return names
