"""What a CUDA source declares, read from its tokens: kernels (name, template and parameters), launches, the names
each declaration introduces, and whether a declaration names torch or Python. The split (``split.py``) decides
with these where each declaration goes; anything it cannot read with certainty raises `SplitError`."""
from __future__ import annotations

import re
from dataclasses import dataclass

from cuda_agent.compiler.inline.cxxlex import (
    Item, LexError, Tok, match_angle, match_close, significant, split_commas, text_of,
)

DEVICE_KW = frozenset({"__device__", "__constant__", "__shared__", "__managed__"})
TORCH_NS = frozenset({"torch", "at", "c10", "caffe2", "pybind11", "py"})
TORCH_PREFIXES = ("TORCH_", "AT_", "C10_", "PYBIND11_", "THP", "Py", "_Py", "CAFFE_")
PYTHON_PREFIXES = ("Py", "_Py", "PY", "THP", "PYBIND11_")
TORCH_INCLUDE = re.compile(r'#\s*include\s*[<"](torch|ATen|c10|caffe2|pybind11|Python\.h|THC)[/>.]')
PYTHON_INCLUDE = re.compile(r'#\s*include\s*[<"](torch/(extension|python|torch)\.h|pybind11|Python\.h)')
EXTENSION_INCLUDE = re.compile(r'#\s*include\s*[<"]torch/(extension|torch)\.h[>"]')
_ATTR_CALLS = frozenset({"__launch_bounds__", "__attribute__", "__declspec", "alignas", "__cluster_dims__",
                         "__maxnreg__", "decltype", "__align__"})
TYPE_WORDS = frozenset({"int", "float", "double", "char", "short", "long", "unsigned", "signed", "bool", "void",
                         "const", "volatile", "__restrict__", "__restrict", "restrict", "auto", "struct", "typename"})
PREFIX = "cak_"

class SplitError(LexError):
    """This source cannot be split safely; build it whole."""


@dataclass(frozen=True)
class Param:
    decl: str  # without the default argument
    default: str  # "= value" or ""
    name: str
    type_only: str  # decl with the name removed


@dataclass(frozen=True)
class Kernel:
    name: str
    params: tuple[Param, ...]
    template: str | None  # the text inside template<...>
    template_names: tuple[str, ...] = ()

    @property
    def shim_params(self) -> str:
        return "dim3 cak_grid_, dim3 cak_block_, size_t cak_shmem_, cudaStream_t cak_stream_"

    def host_declaration(self, kref: bool) -> str:
        head = f"template <{self.template}> " if self.template is not None else ""
        params = "".join(f", {p.decl} {p.default}".rstrip() for p in self.params)
        text = f"{head}void {PREFIX}launch_{self.name}({self.shim_params}{params});"
        if kref:
            # the kernel's address as the runtime API takes it (gcc sees only the C API, not nvcc's templates)
            text += f" const void* {PREFIX}kref_{self.name}();"
        return text

    def device_definition(self, kref: bool) -> str:
        head = f"template <{self.template}>\n" if self.template is not None else ""
        params = "".join(f", {p.decl}" for p in self.params)
        targs = f"<{', '.join(self.template_names)}>" if self.template is not None else ""
        names = ", ".join(p.name for p in self.params)
        text = (f"{head}void {PREFIX}launch_{self.name}({self.shim_params}{params}) {{\n"
                f"  {self.name}{targs}<<<cak_grid_, cak_block_, cak_shmem_, cak_stream_>>>({names});\n}}\n")
        if kref:
            text += f"const void* {PREFIX}kref_{self.name}() {{ return reinterpret_cast<const void*>(&{self.name}); }}\n"
        return text


def ids(sig: list[Tok]) -> set[str]:
    return {t.text for t in sig if t.kind == "id"}


def _qualified(sig: list[Tok], k: int) -> bool:
    return k + 2 < len(sig) and sig[k + 1].text == ":" and sig[k + 2].text == ":"


def names_torch(sig: list[Tok]) -> bool:
    for k, t in enumerate(sig):
        if t.kind != "id":
            continue
        if (t.text in TORCH_NS and _qualified(sig, k)) or t.text.startswith(TORCH_PREFIXES):
            return True
        if t.text in TORCH_NS and k >= 2 and sig[k - 1].text == "namespace" and sig[k - 2].text == "using":
            return True
    return False


def names_python(sig: list[Tok]) -> bool:
    for k, t in enumerate(sig):
        if t.kind == "id" and ((t.text in ("py", "pybind11") and _qualified(sig, k))
                               or t.text.startswith(PYTHON_PREFIXES)
                               or (t.text == "python" and k >= 2 and sig[k - 1].text == ":")):
            return True
    return False


def type_name(sig: list[Tok]) -> str | None:
    """The name a type-like declaration introduces (struct/class/union/enum, typedef, alias, constexpr/const
    variable), so that device code using a host-only one (e.g. a specialisation naming c10::Half) is noticed."""
    start = skip_template_head(sig)
    words = [t.text for t in sig[start:]]
    if not words:
        return None
    if words[0] in ("struct", "class", "union", "enum"):
        rest = [t for t in sig[start + 1:] if t.kind == "id" and t.text not in ("class", "struct")]
        return rest[0].text if rest else None
    if words[0] == "using" and len(words) > 2 and words[2] == "=":
        return words[1]
    if words[0] == "typedef":
        ids = [t.text for t in sig[start:] if t.kind == "id"]
        return ids[-1] if ids else None
    head: list[Tok] = []
    for t in sig[start:]:
        if t.text in ("(", "{", "=", ";", "["):
            break
        head.append(t)
    if any(t.text in ("constexpr", "const") for t in head):
        named = [t.text for t in head if t.kind == "id" and t.text not in TYPE_WORDS and t.text != "constexpr"]
        return named[-1] if named else None
    return None


def skip_template_head(sig: list[Tok]) -> int:
    if len(sig) > 1 and sig[0].text == "template" and sig[1].text == "<":
        depth = 0
        for k, t in enumerate(sig):
            depth += {"<": 1, ">": -1}.get(t.text, 0) if t.kind == "punct" else 0
            if depth == 0 and k > 0:
                return k + 1
    return 0


def function_paren(toks: list[Tok], lo: int, hi: int) -> int | None:
    """Token index of the parameter list's '(' of a function declaration in toks[lo:hi], skipping attributes."""
    prev: Tok | None = None
    j = lo
    while j < hi:
        t = toks[j]
        if t.kind == "punct" and t.text in "([":
            if t.text == "(" and prev is not None and prev.kind == "id" and prev.text not in _ATTR_CALLS:
                return j
            j = match_close(toks, j) + 1
            prev = toks[j - 1]
            continue
        if t.kind == "punct" and t.text in ("=", "{", ";"):
            return None
        if t.significant:
            prev = t
        j += 1
    return None


def declared_name(toks: list[Tok], item: Item) -> str | None:
    """The name a declaration introduces (function or variable), or None for types and others."""
    sig = significant(toks, item.lo, item.hi)
    start = skip_template_head(sig)
    if start < len(sig) and sig[start].text in ("struct", "class", "union", "enum", "typedef", "using"):
        return None
    paren = function_paren(toks, item.lo, item.hi)
    if paren is not None:
        back = paren - 1
        while toks[back].kind in ("ws", "comment"):
            back -= 1
        return toks[back].text if toks[back].kind == "id" else None
    last = None
    for t in sig[start:]:
        if t.text in ("=", ";", "[", "{"):
            break
        if t.kind == "id":
            last = t.text
    return last


def _params(toks: list[Tok], open_: int, close: int, what: str) -> tuple[Param, ...]:
    parts = split_commas(significant(toks, open_ + 1, close))
    if len(parts) == 1 and [t.text for t in parts[0]] == ["void"]:
        return ()
    out = []
    for part in parts:
        texts = [t.text for t in part]
        if "(" in texts or "[" in texts or "." in texts:
            raise SplitError(f"{what}: parameter {' '.join(texts)!r} is an array, function pointer or pack")
        eq = texts.index("=") if "=" in texts else len(part)
        decl, default = part[:eq], part[eq:]
        if len(decl) < 2 or decl[-1].kind != "id" or decl[-1].text in TYPE_WORDS:
            raise SplitError(f"{what}: parameter {' '.join(texts)!r} has no name")
        decl_text = " ".join(t.text for t in decl)
        out.append(Param(decl_text, " ".join(t.text for t in default), decl[-1].text,
                         " ".join(t.text for t in decl[:-1])))
    return tuple(out)


def read_kernel(toks: list[Tok], item: Item) -> tuple[Kernel, bool]:
    """The kernel an item declares and whether the item is its definition."""
    sig = significant(toks, item.lo, item.hi)
    what = f"kernel at offset {sig[0].start}"
    template = None
    names: tuple[str, ...] = ()
    lo = item.lo
    while toks[lo].kind in ("ws", "comment"):
        lo += 1
    if sig[0].text == "template" and len(sig) > 1 and sig[1].text == "<":
        lt = next(j for j in range(lo, item.hi) if toks[j].text == "<")
        gt = match_angle(toks, lt)
        template = text_of(toks, lt + 1, gt).strip()
        tparams = split_commas(significant(toks, lt + 1, gt))
        tnames = []
        for part in tparams:
            texts = [t.text for t in part]
            if "..." in "".join(texts) or "template" in texts:
                raise SplitError(f"{what}: template parameter packs or template template parameters")
            eq = texts.index("=") if "=" in texts else len(texts)
            if eq < 2 or part[eq - 1].kind != "id":
                raise SplitError(f"{what}: unnamed template parameter")
            tnames.append(part[eq - 1].text)
        names = tuple(tnames)
        lo = gt + 1
    paren = function_paren(toks, lo, item.hi)
    if paren is None:
        raise SplitError(f"{what}: cannot find the parameter list")
    back = paren - 1
    while toks[back].kind in ("ws", "comment"):
        back -= 1
    name = toks[back].text
    if toks[back].kind != "id" or name.startswith(PREFIX):
        raise SplitError(f"{what}: cannot read the kernel's name")
    close = match_close(toks, paren)
    params = _params(toks, paren, close, f"kernel {name}")
    if any(p.name.startswith(PREFIX) for p in params):
        raise SplitError(f"kernel {name}: a parameter name starts with {PREFIX}")
    is_def = any(t.text == "{" for t in significant(toks, close, item.hi))
    return Kernel(name, params, template, names), is_def


@dataclass
class Launch:
    start: int  # token index of the kernel expression's first token
    end: int  # token index after the argument list's ')'
    text: str


def find_launches(toks: list[Tok], lo: int, hi: int, kernels: dict[str, Kernel]) -> list[Launch]:
    found: list[Launch] = []
    j = lo
    while j + 2 < hi:
        if not (toks[j].text == toks[j + 1].text == toks[j + 2].text == "<" and toks[j].kind == "punct"
                and toks[j].end == toks[j + 1].start and toks[j + 1].end == toks[j + 2].start):
            j += 1
            continue
        k = j - 1
        while toks[k].kind in ("ws", "comment"):
            k -= 1
        targs = ""
        if toks[k].text == ">":
            depth = 0
            m = k
            while m > lo:
                depth += {">": 1, "<": -1}.get(toks[m].text, 0) if toks[m].kind == "punct" else 0
                if depth == 0:
                    break
                m -= 1
            targs = text_of(toks, m, k + 1)
            k = m - 1
            while toks[k].kind in ("ws", "comment"):
                k -= 1
        name = toks[k].text
        if toks[k].kind != "id" or name not in kernels:
            raise SplitError(f"launch at offset {toks[j].start}: {name!r} is not a kernel defined in this source")
        q = k - 1
        while toks[q].kind in ("ws", "comment"):
            q -= 1
        if toks[q].text == ":":
            raise SplitError(f"launch of {name}: qualified kernel names are not split")
        cfg_start = j + 3
        config: list[str] = []
        piece = cfg_start
        m = cfg_start
        while m + 2 < hi:
            t = toks[m]
            if t.kind == "punct" and t.text in "([{":
                m = match_close(toks, m) + 1
                continue
            if (t.text == toks[m + 1].text == toks[m + 2].text == ">" and t.kind == "punct"
                    and t.end == toks[m + 1].start and toks[m + 1].end == toks[m + 2].start):
                break
            if t.kind == "punct" and t.text == ",":
                config.append(text_of(toks, piece, m).strip())
                piece = m + 1
            m += 1
        else:
            raise SplitError(f"launch of {name}: no closing >>>")
        config.append(text_of(toks, piece, m).strip())
        if not 2 <= len(config) <= 4:
            raise SplitError(f"launch of {name}: {len(config)} launch configuration values")
        a = m + 3
        while toks[a].kind in ("ws", "comment"):
            a += 1
        if toks[a].text != "(":
            raise SplitError(f"launch of {name}: no argument list")
        close = match_close(toks, a)
        args = text_of(toks, a + 1, close).strip()
        config += ["0"] * (4 - len(config))
        text = f"::{PREFIX}launch_{name}{targs}({', '.join(config)}{', ' + args if args else ''})"
        found.append(Launch(k, close + 1, text))
        j = close + 1
    return found
