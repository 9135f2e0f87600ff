"""Which compiler and linker flags a single-file solution may pass, and which compiler each one reaches.

Rationale: ``extra_cflags``, ``extra_cuda_cflags``, ``extra_ldflags`` and ``extra_include_paths`` are the
candidate's text placed on a compiler's command line. Left open they load code into the compiler
(``-fplugin=``, ``-B``, ``--compiler-bindir``, ``-wrapper``), read arbitrary files into the build (``-include
/etc/...``, ``@file``, ``-I/home/...``), write files outside the build (``-save-temps``, ``-fdump-*``,
``--keep-dir``) or, through torch's shell-run ninja file, run shell code (``$(...)``, ``;``). Each flag is split as
a shell would split it (torch's ninja command line is run by a shell) and must match the allow-list below; anything
else is refused with `InlineFlagError` naming it. Empty strings (``extra_cflags=[""]``, common in KernelBench
solutions) are dropped, as torch's shell drops them.
"""
from __future__ import annotations

import os
import re
import shlex
import sys
from pathlib import Path
from typing import Callable, Iterable, Sequence

from cuda_agent.errors import BuildError


class InlineFlagError(BuildError):
    """A solution asked for a compiler or linker flag outside the allow-list."""


_SHELL_META = re.compile(r"[;&|`$<>\\\n\r\x00(){}*?~!#]")
_DEFINE = re.compile(r"-D[A-Za-z_]\w*(=[\w.+\-:/,]*)?|-U[A-Za-z_]\w*")
_STD = re.compile(r"-std=(c|gnu)\+\+(11|14|17|20|23|2a|2b|1z)")

_CXX_PATTERNS = [re.compile(p) for p in (
    r"-O[0-3sgz]?", r"-Ofast", r"-g[0-3]?", r"-ggdb[0-3]?", r"-w", r"-pipe", r"-pthread", r"-fopenmp",
    r"-W(?!l,|p,|a,)[\w=+,.\-]*", r"-f(no-)?[a-z][\w=+.\-]*", r"-m(arch|tune|cpu)=[\w.\-]+", r"-m(no-)?[a-z][\w.\-]*",
    r"-l[\w.+:\-]+",
)]
_CXX_DENIED = re.compile(
    r"-f(no-)?(plugin|profile|dump|save|stack-usage|callgraph|opt-info|auto-profile|create-profile|debug-prefix|"
    r"file-prefix|macro-prefix|record|lto|use-ld|use-linker|diagnostics-format|diagnostics-plain-output|"
    r"sanitize-coverage|instrument|coverage|test-coverage|branch-probabilities|prof|checking|syntax-only|"
    r"preprocessed|working-directory|directives-only)")
_NVCC_PATTERNS = [re.compile(p) for p in (
    r"-O[0-3]?", r"--?use_fast_math", r"--use-fast-math", r"-lineinfo", r"--generate-line-info", r"-g", r"-G",
    r"--?(ftz|prec-div|prec-sqrt|fmad)=(true|false)", r"--?extra-device-vectorization",
    r"--?expt-relaxed-constexpr", r"--?expt-extended-lambda", r"--?extended-lambda", r"--?maxrregcount=\d+",
    r"--?restrict", r"-res-usage", r"--resource-usage", r"-rdc=false", r"--relocatable-device-code=false",
    r"-w", r"--disable-warnings", r"-W(?!l,|p,|a,)[\w=+,.\-]*", r"--?diag[-_]suppress=[\w,]+",
    r"-arch=(sm|compute)_\d+[af]?", r"--gpu-architecture=(sm|compute)_\d+[af]?", r"-code=[\w,\[\]]+",
    r"(-gencode=|--generate-code=)?arch=compute_\d+[af]?,code=(\[?(sm|compute)_\d+[af]?(,(sm|compute)_\d+[af]?)*\]?)",
    r"-Xptxas", r"--ptxas-options", r"-Xcompiler", r"--compiler-options", r"-Xcudafe", r"-gencode",
    r"--generate-code", r"-arch", r"-maxrregcount", r"\d+",
)]
_PTXAS = re.compile(r"-v|--verbose|-O[0-3]|--warn-on-spills|-warn-spills|--warn-on-local-memory-usage|"
                    r"-warn-lmem-usage|-dlcm=(ca|cg|cs)|-dscm=(cg|cs|wt)|--?allow-expensive-optimizations(=(true|false))?|"
                    r"--?maxrregcount=\d+|--?def-load-cache=(ca|cg|cs)|--?def-store-cache=(cg|cs|wt)")
_CUDAFE = re.compile(r"--diag_suppress=[\w,]+|--display_error_number|--diag_warning=[\w,]+")
_TAKES_VALUE = {"-Xptxas": _PTXAS, "--ptxas-options": _PTXAS, "-Xcudafe": _CUDAFE}
_LD_PATTERNS = [re.compile(p) for p in (
    r"-l[\w.+:\-]+", r"-pthread", r"-fopenmp", r"-Wl,--(no-)?as-needed", r"-Wl,-O[0-2]", r"-shared",
)]
_RPATH = re.compile(r"-Wl,(-rpath,|-rpath=|--rpath=)(?P<path>/[^,]+)")


def split_flags(flags: Iterable[str], what: str) -> list[str]:
    """Split each flag as torch's shell would and drop empty ones; refuse shell metacharacters."""
    out: list[str] = []
    for flag in flags:
        if _SHELL_META.search(flag.strip()):
            raise InlineFlagError(f"{what}: {flag!r} contains shell metacharacters; pass plain flags")
        out.extend(shlex.split(flag))
    return out


def allowed_roots() -> tuple[str, ...]:
    """Folders a solution may name in -I/-L/-rpath: the toolkit, the Python installation (torch and the NVIDIA
    wheels live there) and the system include/lib folders; all read-only toolchain, none of them secrets."""
    from cuda_agent.compiler.toolchain import cuda_home

    roots = {sys.prefix, sys.base_prefix, "/usr/include", "/usr/lib", "/usr/lib64", "/usr/local/include"}
    try:
        roots.add(str(cuda_home()))
    except BuildError:
        pass
    roots.update(str(p) for p in Path("/usr/local").glob("cuda*"))
    return tuple(sorted(os.path.realpath(r) for r in roots if r))


def check_path(path: str, what: str) -> str:
    """``path`` resolved, if it lies under an allowed root; otherwise `InlineFlagError`."""
    if not path.startswith("/"):
        raise InlineFlagError(f"{what}: {path!r} must be an absolute path inside the toolkit or the Python install")
    real = os.path.realpath(path)
    if not any(real == root or real.startswith(root + "/") for root in allowed_roots()):
        raise InlineFlagError(f"{what}: {path!r} lies outside the toolkit and the Python installation; "
                              "only those folders may be searched")
    return real


def _path_flag(token: str, nxt: str | None, prefixes: Sequence[str], what: str) -> tuple[list[str], int] | None:
    for prefix in prefixes:
        if token == prefix and nxt is not None:
            return [prefix, check_path(nxt, what)], 2
        if token.startswith(prefix) and len(token) > len(prefix):
            return [prefix + check_path(token[len(prefix):], what)], 1
    return None


Step = Callable[[str, "str | None"], "tuple[list[str], int] | None"]


def _walk(flags: Iterable[str], what: str, path_prefixes: Sequence[str], step: Step, refusal: str) -> list[str]:
    """Split ``flags`` and accept them one at a time: path flags (checked against the allowed roots), then
    whatever ``step`` accepts (it returns the tokens to keep and how many it consumed); anything else is refused."""
    tokens = split_flags(flags, what)
    out: list[str] = []
    i = 0
    while i < len(tokens):
        token = tokens[i]
        nxt = tokens[i + 1] if i + 1 < len(tokens) else None
        taken = _path_flag(token, nxt, path_prefixes, what) or step(token, nxt)
        if taken is None:
            raise InlineFlagError(f"{what}: the flag {token!r} is not allowed ({refusal})")
        out += taken[0]
        i += taken[1]
    return out


def _cxx_step(token: str, nxt: str | None) -> tuple[list[str], int] | None:
    if _DEFINE.fullmatch(token) or _STD.fullmatch(token) or (
            any(p.fullmatch(token) for p in _CXX_PATTERNS) and not _CXX_DENIED.match(token)):
        return [token], 1
    return None


def check_cxx_flags(flags: Iterable[str], what: str = "extra_cflags") -> list[str]:
    """The host compiler's flags from the solution, split and checked; raises `InlineFlagError`."""
    return _walk(flags, what, ("-isystem", "-I", "-L"), _cxx_step,
                 "allowed: optimisation, debug, warning, -D/-U, -std, -f and -m code-generation flags, "
                 "-I inside the toolkit")


def check_nvcc_flags(flags: Iterable[str], what: str = "extra_cuda_cflags") -> list[str]:
    """nvcc's flags from the solution, split and checked (values of -Xcompiler go through `check_cxx_flags`)."""

    def step(token: str, nxt: str | None) -> tuple[list[str], int] | None:
        name, eq, value = token.partition("=")
        if name in ("-Xcompiler", "--compiler-options") or name in _TAKES_VALUE:
            value = value if eq else (nxt or "")
            if name in _TAKES_VALUE:
                for part in value.split(","):
                    if part and not _TAKES_VALUE[name].fullmatch(part):
                        raise InlineFlagError(f"{what}: {name} {part!r} is not allowed")
            else:
                check_cxx_flags([v for v in value.split(",") if v], f"{what} ({name})")
            return [name, value], 1 if eq else 2
        if token in ("-gencode", "--generate-code", "-arch", "-maxrregcount") and nxt is not None:
            if not any(p.fullmatch(nxt) for p in _NVCC_PATTERNS) or nxt.startswith("-"):
                raise InlineFlagError(f"{what}: {token} {nxt!r} is not allowed")
            return [token, nxt], 2
        if _DEFINE.fullmatch(token) or _STD.fullmatch(token) or (
                any(p.fullmatch(token) for p in _NVCC_PATTERNS) and not token.isdigit()
                and not token.startswith("arch=")):
            return [token], 1
        return None

    return _walk(flags, what, ("-isystem", "-I"), step,
                 "allowed: -O, --use_fast_math, -lineinfo, -Xptxas -v, --maxrregcount, -D/-U, -std, arch flags, "
                 "-Xcompiler with allowed host flags")


def check_ldflags(flags: Iterable[str], what: str = "extra_ldflags") -> list[str]:
    """Linker flags from the solution: libraries, -L/-rpath inside the toolkit, openmp/pthread."""

    def step(token: str, nxt: str | None) -> tuple[list[str], int] | None:
        rpath = _RPATH.fullmatch(token)
        if rpath:
            check_path(rpath.group("path"), what)
            return [token], 1
        return ([token], 1) if any(p.fullmatch(token) for p in _LD_PATTERNS) else None

    return _walk(flags, what, ("-L",), step,
                 "allowed: -lNAME, -L and -Wl,-rpath inside the toolkit, -Wl,--no-as-needed, -pthread, -fopenmp")


def check_include_paths(paths: Iterable[str]) -> list[str]:
    return [check_path(p, "extra_include_paths") for p in paths if p.strip()]


def host_flags_from_nvcc(tokens: Sequence[str]) -> list[str]:
    """The part of (checked) nvcc flags that nvcc hands to the host compiler: -O, -g, -D/-U, -std, include
    folders and the values of -Xcompiler; the rest is device-only."""
    out: list[str] = []
    i = 0
    while i < len(tokens):
        token = tokens[i]
        name, eq, value = token.partition("=")
        if name in ("-Xcompiler", "--compiler-options", "-Xptxas", "--ptxas-options", "-Xcudafe", "-gencode",
                    "--generate-code", "-arch", "-maxrregcount") and not eq:
            if name in ("-Xcompiler", "--compiler-options") and i + 1 < len(tokens):
                out += [v for v in tokens[i + 1].split(",") if v]
            i += 2
            continue
        if name in ("-Xcompiler", "--compiler-options"):
            out += [v for v in value.split(",") if v]
        elif token in ("-I", "-isystem") and i + 1 < len(tokens):
            out += [token, tokens[i + 1]]
            i += 2
            continue
        elif re.fullmatch(r"-O[0-3]?", token) or token == "-g" or _DEFINE.fullmatch(token) or \
                _STD.fullmatch(token) or token.startswith(("-I", "-isystem")):
            out.append(token)
        elif token == "-G":
            out.append("-g")
        i += 1
    return out


def is_neutral(flag: str) -> bool:
    """Flags that change how fast or how loudly code compiles, never what it computes (for generated glue)."""
    return bool(re.fullmatch(r"-O[0-3sgz]?|-g[0-3]?|-ggdb[0-3]?|-w|-pipe|-W(?!l,|p,|a,)[\w=+,.\-]*", flag))
