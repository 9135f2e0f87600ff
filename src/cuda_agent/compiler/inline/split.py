"""Split a load_inline CUDA source into a device file without PyTorch headers and a host file with them.

Why: nvcc parses every header of a .cu file three times (cudafe++, cicc, and the host compiler on cudafe++'s
output, which is preprocessed, so no precompiled header can help). With PyTorch's headers that is about 60 s per
solution on a 16-core H200 host; the kernels alone take 1.5 s. So the kernels (``__global__``/``__device__`` code,
with the types and constants they need) go to a device file that nvcc compiles without torch, and the host code
(the torch::Tensor wrappers) goes to a host file that gcc compiles against a precompiled torch header.

A launch ``k<<<g, b, s, st>>>(args)`` in host code becomes a call of a launch shim ``cak_launch_k(g, b, s, st,
args)`` defined in the device file, whose parameters are the kernel's own: the arguments convert exactly as they do
at the launch (the launch configuration as in ``__cudaPushCallConfiguration(dim3, dim3, size_t, cudaStream_t)``).
A template kernel's shim is a template; the device file instantiates the specialisations the host object asks for
(read from its undefined symbols). Other uses of a kernel name in host code (``cudaFuncSetAttribute(k, ...)``)
read the kernel's address from the device file.

Whatever this module cannot place with certainty raises `SplitError` before anything is compiled (a kernel in a
named namespace, a launch in a macro, host code naming a ``__device__`` variable, device code naming torch), and a
split that does not compile or link falls back to the unsplit source: correctness never depends on the split.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from cuda_agent.compiler.inline.cudasrc import (
    DEVICE_KW, EXTENSION_INCLUDE, PREFIX, TORCH_INCLUDE, Kernel, SplitError, declared_name, find_launches,
    function_paren, ids, names_python, names_torch, read_kernel, skip_template_head, type_name,
)
from cuda_agent.compiler.inline.cxxlex import Item, Tok, significant, split_items, text_of, tokenize

__all__ = ["SplitError", "SplitPlan", "plan_split", "names_python", "EXTENSION_INCLUDE", "FRONTEND"]

HOST_PASS_MACROS = frozenset({"__CUDACC__", "__NVCC__", "__CUDACC_RTC__", "__CUDACC_VER_MAJOR__",
                              "__CUDACC_VER_MINOR__", "__CUDACC_VER_BUILD__", "__CUDA_ARCH_LIST__"})
C10_HEADERS = {"c10::Half": "c10/util/Half.h", "c10::BFloat16": "c10/util/BFloat16.h",
               "c10::complex": "c10/util/complex.h"}


_FRONTEND_SENTINEL = re.compile(r"/\*cak:frontend\[(.*?)\]\*/")
FRONTEND = re.compile(r"\btorch\s*::\s*(nn|optim|jit|data|serialize|fft|special|linalg|nested|sparse|cuda|python|"
                      r"autograd|utils|mps|xpu|enum)\b")
_VARIANT_INCLUDE = {"types": "", "all": "#include <torch/all.h>", "ext": None, "keep": None}


@dataclass(frozen=True)
class SplitPlan:
    """The two files. The host file comes in ``host_variants``, tried in order, each named after the precompiled
    header it expects: ``types`` (the source's ``#include <torch/extension.h>`` dropped: torch/types.h, which
    torch prepends to every CUDA file, is there already; less than half the compile time of the others), ``all``
    (the include replaced by torch/all.h: extension.h without its Python half), ``ext`` (kept: the host code
    names Python or pybind11), ``keep`` (macros are defined before the include, so it stays where it is and is
    parsed in place, against the torch/types.h header)."""

    host_template: str
    device_source: str
    kernels: tuple[Kernel, ...]
    host_variants: tuple[str, ...]
    templated: tuple[str, ...] = ()
    krefs: tuple[str, ...] = field(default_factory=tuple)

    def host_source(self, variant: str) -> str:
        include = _VARIANT_INCLUDE[variant]
        return _FRONTEND_SENTINEL.sub(lambda m: m.group(1) if include is None else include, self.host_template)

    def device_with_instances(self, undefined_symbols: list[str]) -> str:
        """The device file plus explicit instances of the template shims the host object needs
        (``undefined_symbols``: demangled names from ``nm -C --undefined-only``). Raises `SplitError`."""
        if not self.templated:
            return self.device_source
        includes: set[str] = set()
        lines: list[str] = []
        for symbol in undefined_symbols:
            m = re.search(rf"\b{PREFIX}launch_(\w+)<", symbol)
            if not m or m.group(1) not in self.templated:
                continue
            args = _template_args(symbol, m.end() - 1)
            if "(anonymous namespace)" in args or "{lambda" in args:
                raise SplitError(f"template shim {m.group(1)} is instantiated with a local type: {args}")
            for name, header in C10_HEADERS.items():
                if name in args:
                    includes.add(header)
            leftover = re.sub("|".join(map(re.escape, C10_HEADERS)), "", args)
            if re.search(r"\b(c10|at|torch)::", leftover):
                raise SplitError(f"template shim {m.group(1)} is instantiated with a torch type: {args}")
            lines.append(f"__attribute__((used)) static void* {PREFIX}instance_{len(lines)} = "
                         f"(void*)&{PREFIX}launch_{m.group(1)}<{args}>;")
        head = "".join(f"#include <{h}>\n" for h in sorted(includes))
        return head + self.device_source + "\n" + "\n".join(lines) + "\n"


def _template_args(symbol: str, lt: int) -> str:
    depth = 0
    for j in range(lt, len(symbol)):
        if symbol[j] == "<":
            depth += 1
        elif symbol[j] == ">":
            depth -= 1
            if depth == 0:
                return symbol[lt + 1:j]
    raise SplitError(f"cannot read template arguments of {symbol!r}")


def _blank(text: str) -> str:
    return "\n" * text.count("\n")


class _Splitter:
    def __init__(self, source: str, torch_macros: frozenset[str]) -> None:
        self.toks = tokenize(source)
        self.items = split_items(self.toks)
        self.kernels: dict[str, Kernel] = {}
        self.kernel_items: dict[int, str] = {}  # item.lo -> kernel name (first declaration)
        self.device_names: set[str] = set()
        self.host_names: set[str] = set()
        self.krefs: set[str] = set()
        self.python = False
        self.extension_include = False
        self.macros_before_torch = False
        self._seen_torch_include = False
        self.torch_macros = torch_macros
        self.defined_macros: set[str] = set()
        self.device_idents: set[str] = set()
        self.host_types: set[str] = set()

    def classify(self, item: Item) -> str:
        sig = significant(self.toks, item.lo, item.hi)
        words = ids(sig)
        if "__global__" in words:
            return "kernel"
        if words & DEVICE_KW:
            return "both" if "__host__" in words else "device"
        if names_torch(sig):
            return "host"
        start = skip_template_head(sig)
        first = sig[start].text if start < len(sig) else ";"
        if first in ("struct", "class", "union", "enum", "typedef", "static_assert", ";") or "constexpr" in words:
            return "both"
        if first == "using":
            return "both"
        if first == "template":
            return "host"
        head = [t.text for t in sig[start:]]
        head = head[:min((head.index(c) for c in ("=", ";", "{", "[") if c in head), default=len(head))]
        if function_paren(self.toks, item.lo, item.hi) is None and "const" in head and "*" not in head \
                and "&" not in head:
            return "both"  # a const object at namespace scope has internal linkage: one copy per file is right
        return "host"

    def scan(self, items: list[Item], named_namespace: bool) -> None:
        """First pass: kernels, names declared on each side, and what the host file must include."""
        for item in items:
            if item.kind == "block":
                head = significant(self.toks, item.lo, item.body[0])
                named = head[0].text != "extern" and len(head) > 2
                self.scan(item.children, named_namespace or named)
                continue
            if item.kind == "pp":
                self._directive(self.toks[item.hi - 1].text)
                continue
            if item.kind != "decl":
                continue
            kind = self.classify(item)
            sig = significant(self.toks, item.lo, item.hi)
            if kind in ("kernel", "device", "both"):
                self.device_idents |= ids(sig)
            if kind == "kernel":
                if names_torch(sig):
                    raise SplitError("a kernel names torch/ATen/c10")
                if named_namespace:
                    raise SplitError("a kernel inside a named namespace")
                kernel, _ = read_kernel(self.toks, item)
                if kernel.name in self.kernels and self.kernels[kernel.name] != kernel:
                    raise SplitError(f"kernel {kernel.name} is overloaded or redeclared differently")
                if kernel.name not in self.kernels:
                    self.kernels[kernel.name] = kernel
                    self.kernel_items[item.lo] = kernel.name
            elif kind in ("device", "both") and (kind == "device" or "__device__" in ids(sig)):
                if names_torch(sig):
                    raise SplitError("device code names torch/ATen/c10")
                if kind == "device" and (name := declared_name(self.toks, item)):
                    self.device_names.add(name)
            elif kind == "host":
                self.python |= names_python(sig)
                if name := declared_name(self.toks, item):
                    self.host_names.add(name)
                if declared_type := type_name(sig):
                    self.host_types.add(declared_type)

    def _directive(self, text: str) -> None:
        """Directives go to both files; refuse those whose meaning could differ between them."""
        if "<<<" in text:
            raise SplitError("a kernel launch inside a preprocessor directive")
        if TORCH_INCLUDE.match(text):
            self._seen_torch_include = True
            self.extension_include |= bool(EXTENSION_INCLUDE.match(text))
            return
        if not re.match(r"#\s*(include|pragma\s+once)\b", text) and not self._seen_torch_include:
            self.macros_before_torch = True
        define = re.match(r"#\s*define\s+(\w+)", text)
        if define:
            self.defined_macros.add(define.group(1))
        if re.match(r"#\s*(if|ifdef|ifndef|elif)\b", text):
            for word in re.findall(r"[A-Za-z_]\w*", text.lstrip("# \t")[2:]):
                if word in HOST_PASS_MACROS:
                    raise SplitError(f"a conditional on {word}, which nvcc's host pass defines and gcc does not")
                if word in self.torch_macros and word not in self.defined_macros:
                    raise SplitError(f"a conditional on {word}, which the torch headers define")

    def emit(self, items: list[Item], wrappers: tuple[str, ...] = ()) -> tuple[str, str]:
        """Both files' text for ``items``; ``wrappers`` are the enclosing blocks' openings (anonymous namespaces
        and extern "C"), closed around a shim declaration so that it has the device file's linkage."""
        host: list[str] = []
        device: list[str] = []
        toks = self.toks
        for item in items:
            text = text_of(toks, item.lo, item.hi)
            if item.kind == "trivia":
                host.append(text)
                device.append(text)
            elif item.kind == "block":
                head = text_of(toks, item.lo, item.body[0])
                opening = " ".join(t.text for t in significant(toks, item.lo, item.body[0]))
                h, d = self.emit(item.children, wrappers + (opening,))
                tail = text_of(toks, item.body[1], item.hi)
                host.append(head + h + tail)
                device.append(head + d + tail)
            elif item.kind == "pp":
                directive = toks[item.hi - 1].text
                if TORCH_INCLUDE.match(directive):
                    if EXTENSION_INCLUDE.match(directive):
                        text = text.replace(directive, f"/*cak:frontend[{directive}]*/")
                    host.append(text)
                    device.append(_blank(text))
                else:
                    host.append(text)
                    device.append(text)
            else:
                kind = self.classify(item)
                if kind == "kernel":
                    device.append(text)
                    name = self.kernel_items.get(item.lo)
                    lead = text_of(toks, item.lo, next(j for j in range(item.lo, item.hi) if toks[j].significant))
                    decl = self.kernels[name].host_declaration(name in self.krefs) if name else ""
                    if decl and wrappers:
                        decl = "}" * len(wrappers) + " " + decl + " " + " ".join(wrappers)
                    host.append(lead + decl + _blank(text[len(lead):]))
                elif kind == "device":
                    device.append(text)
                    host.append(_blank(text))
                elif kind == "both":
                    device.append(text)
                    host.append(self.rewrite_host(item))
                else:
                    host.append(self.rewrite_host(item))
                    device.append(_blank(text))
        return "".join(host), "".join(device)

    def rewrite_host(self, item: Item) -> str:
        toks = self.toks
        launches = find_launches(toks, item.lo, item.hi, self.kernels)
        out: list[str] = []
        pos = item.lo
        for launch in launches:
            out.append(self._krefs(pos, launch.start))
            out.append(launch.text)
            pos = launch.end
        out.append(self._krefs(pos, item.hi))
        return "".join(out)

    def _krefs(self, lo: int, hi: int) -> str:
        out: list[str] = []
        prev: Tok | None = None
        for j in range(lo, hi):
            t = self.toks[j]
            if t.kind == "id" and t.text in self.kernels and not (prev and prev.text in (".", ">")):
                if prev is not None and prev.text == ":":
                    raise SplitError(f"host code names kernel {t.text} with a qualifier")
                if self.kernels[t.text].template is not None:
                    raise SplitError(f"host code takes the address of template kernel {t.text}")
                self.krefs.add(t.text)
                out.append(f"(::{PREFIX}kref_{t.text}())")
            elif t.kind == "id" and t.text in self.device_names:
                raise SplitError(f"host code names device symbol {t.text} (e.g. cudaMemcpyToSymbol)")
            else:
                out.append(t.text)
            if t.significant:
                prev = t
        return "".join(out)


def plan_split(source: str, torch_macros: frozenset[str] = frozenset()) -> SplitPlan:
    """Split ``source`` (the user's CUDA text, without torch's implicit prefix). ``torch_macros`` are the macros the
    torch headers define (`torch_macro_names`): device code must not depend on them, since the device file does
    not include torch. Raises `SplitError` (a `LexError`) when the source cannot be split with certainty."""
    splitter = _Splitter(source, torch_macros)
    splitter.scan(splitter.items, False)
    if not splitter.kernels:
        raise SplitError("no __global__ kernels to move")
    clash = set(splitter.kernels) & (splitter.host_names | splitter.device_names)
    if clash:
        raise SplitError(f"{sorted(clash)} name both a kernel and another function or variable")
    shared = splitter.host_types & splitter.device_idents
    if shared:
        raise SplitError(f"device code uses {sorted(shared)}, which host-only code (naming torch) declares")
    used_macros = (splitter.device_idents & torch_macros) - splitter.defined_macros
    if used_macros:
        raise SplitError(f"device code uses torch's macros {sorted(used_macros)[:5]}")
    # the first emit pass finds which kernels host code references by address; the second writes their shims
    splitter.emit(splitter.items)
    host, device = splitter.emit(splitter.items)
    shims = "".join(k.device_definition(k.name in splitter.krefs) for k in splitter.kernels.values())
    if splitter.python:
        variants: tuple[str, ...] = ("ext",)
    elif not splitter.extension_include:
        variants = ("types",)
    elif splitter.macros_before_torch:
        variants = ("keep",)
    elif FRONTEND.search(source):
        variants = ("all",)
    else:
        variants = ("types", "all")
    return SplitPlan(
        host_template=host,
        device_source=device + "\n// cuda-agent launch shims\n" + shims,
        kernels=tuple(splitter.kernels.values()),
        host_variants=variants,
        templated=tuple(k.name for k in splitter.kernels.values() if k.template is not None),
        krefs=tuple(sorted(splitter.krefs)),
    )
