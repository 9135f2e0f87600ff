"""The Python binding of an inline extension, without compiling PyTorch's headers for every solution.

torch's ``main.cpp`` is ``#include <torch/extension.h>``, the ``cpp_sources`` and one ``m.def(name,
torch::wrap_pybind_function(fn), doc)`` per function. Even with a precompiled header that file costs about 7 s on a
16-core H200 host, nearly all of it pybind11 and torch's Python headers emitting the same inline code into every
object. When ``cpp_sources`` holds only prototypes of simple signatures (the usual KernelBench case) we build:

* one object per *signature* (``cak_bind_<key>``: the very ``m.def(name, torch::wrap_pybind_function(fn), doc)``
  that torch writes, for a function pointer of that type), compiled once and cached for every later solution;
* a small module file that includes only ``Python.h``, declares the prototypes (so the function is found by its
  external name at link time, as ``main.cpp`` finds it) and, from a multi-phase ``PyInit`` with the slots
  pybind11's ``PYBIND11_MODULE`` declares, calls those objects to define each function on the module.

The wrapped function is the same lambda torch builds (torch captures the function as a pointer either way), so the
module's functions convert arguments, report errors and describe their signatures exactly as torch's do. Prototypes
we cannot type with certainty (user types, pointers, defaults, anything but a short list) mean the binding is
built from torch's own ``main.cpp`` text instead (`main_cpp`).
"""
from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

from cuda_agent.compiler.inline.cxxlex import LexError, significant, split_commas, split_items, tokenize
from cuda_agent.compiler.inline.spec import InlineSpec

_SAFE_INCLUDES = frozenset({"torch/extension.h", "torch/torch.h", "torch/types.h", "torch/all.h", "ATen/ATen.h",
                            "vector", "cstdint", "cstddef", "optional", "string", "tuple"})
_TENSOR = {"torch::Tensor", "at::Tensor", "Tensor", "::torch::Tensor", "::at::Tensor"}
_CORE_TYPES: dict[str, str] = {
    **{t: "at::Tensor" for t in _TENSOR},
    "int": "int", "long": "long", "int64_t": "int64_t", "std::int64_t": "int64_t", "int32_t": "int32_t",
    "float": "float", "double": "double", "bool": "bool", "size_t": "size_t", "std::size_t": "size_t",
    **{f"std::vector<{t}>": "std::vector<at::Tensor>" for t in _TENSOR},
    "std::vector<int64_t>": "std::vector<int64_t>", "std::vector<int>": "std::vector<int>",
    "std::vector<float>": "std::vector<float>", "std::vector<double>": "std::vector<double>",
    **{f"{o}<{t}>": "std::optional<at::Tensor>" for o in ("c10::optional", "std::optional", "torch::optional",
                                                           "at::optional") for t in _TENSOR},
    **{f"{ns}::IntArrayRef": "c10::ArrayRef<int64_t>" for ns in ("at", "c10", "torch")},
}
_DOC = re.compile(r"[ -!#-\[\]-~]*")  # printable ASCII without '"' and '\\'
MODULE_PRELUDE = (
    "#include <cstdint>\n#include <cstddef>\n"
    "namespace at { class Tensor; }\nnamespace c10 { template <typename T> class ArrayRef; }\n"
)


class BindingError(LexError):
    """The prototypes cannot be typed with certainty: build torch's main.cpp instead."""


@dataclass(frozen=True)
class Signature:
    ret: str
    params: tuple[str, ...]

    @property
    def pointer_type(self) -> str:
        return f"{self.ret} (*)({', '.join(self.params)})"

    def declaration(self, name: str) -> str:
        return f"{self.ret} {name}({', '.join(self.params)});"


@dataclass(frozen=True)
class BindingPlan:
    """How to bind: ``functions`` in order with their signature and docstring."""

    functions: tuple[tuple[str, str, Signature], ...]
    error_handling: bool

    def sig_key(self, sig: Signature) -> str:
        text = f"{sig.pointer_type}|wrap={self.error_handling}"
        return hashlib.sha256(text.encode()).hexdigest()[:20]

    def signatures(self) -> dict[str, Signature]:
        return {self.sig_key(s): s for _, _, s in self.functions}

    def sig_source(self, key: str) -> str:
        """The per-signature object: exactly the m.def torch writes, for a pointer of this type, behind a C entry
        point that reports a failure as a Python error (as PYBIND11_MODULE's initialiser does)."""
        sig = self.signatures()[key]
        # *fn is a function lvalue, the same argument torch passes (the function's name), so the same templates
        # are instantiated
        wrapped = "torch::wrap_pybind_function(*fn)" if self.error_handling else "*fn"
        return (f"#include <torch/extension.h>\nusing cak_fn_{key} = {sig.pointer_type};\n"
                f'extern "C" int cak_bind_{key}(PyObject* module, const char* name, void* p, const char* doc) {{\n'
                f"  try {{\n"
                f"    auto m = pybind11::reinterpret_borrow<pybind11::module_>(module);\n"
                f"    cak_fn_{key} fn = reinterpret_cast<cak_fn_{key}>(p);\n"
                f"    m.def(name, {wrapped}, doc);\n"
                f"    return 0;\n"
                f"  }} catch (pybind11::error_already_set& e) {{\n    e.restore();\n"
                f"  }} catch (const std::exception& e) {{\n"
                f'    PyErr_SetString(PyExc_ImportError, (std::string("initialization failed: ") + e.what()).c_str());\n'
                f"  }}\n  return -1;\n}}\n")

    def module_source(self) -> str:
        """The module file: Python.h only (no pybind11, no torch). Prototypes as external references (as main.cpp
        has them), and a multi-phase PyInit whose exec slot defines each function through its signature's object,
        with the slots pybind11's PYBIND11_MODULE declares."""
        text = " ".join(s.pointer_type for _, _, s in self.functions)
        lines = ["#include <Python.h>", MODULE_PRELUDE]
        lines += [f"#include <{h}>" for h in ("vector", "optional") if f"std::{h}" in text]
        declared: set[str] = set()
        for name, _, sig in self.functions:
            if name not in declared:
                lines.append(sig.declaration(name))
                declared.add(name)
        for key in self.signatures():
            lines.append(f'extern "C" int cak_bind_{key}(PyObject*, const char*, void*, const char*);')
        lines.append("namespace {\nint cak_exec(PyObject* m) {")
        for name, doc, sig in self.functions:
            lines.append(f'  if (cak_bind_{self.sig_key(sig)}(m, "{name}", reinterpret_cast<void*>(&{name}), '
                         f'"{doc}") != 0) return -1;')
        lines.append(_MODULE_TAIL)
        return "\n".join(lines) + "\n"


_MODULE_TAIL = """  return 0;
}
PyModuleDef_Slot cak_slots[] = {
    {Py_mod_exec, reinterpret_cast<void*>(&cak_exec)},
#if PY_VERSION_HEX >= 0x030C0000
    {Py_mod_multiple_interpreters, Py_MOD_MULTIPLE_INTERPRETERS_NOT_SUPPORTED},
#endif
#if PY_VERSION_HEX >= 0x030D0000
    {Py_mod_gil, Py_MOD_GIL_USED},
#endif
    {0, nullptr}};
#define CAK_STR2(x) #x
#define CAK_STR(x) CAK_STR2(x)
#define CAK_CAT2(a, b) a##b
#define CAK_CAT(a, b) CAK_CAT2(a, b)
PyModuleDef cak_def = {PyModuleDef_HEAD_INIT, CAK_STR(TORCH_EXTENSION_NAME), nullptr, 0, nullptr, cak_slots,
                       nullptr, nullptr, nullptr};
}  // namespace
extern "C" __attribute__((visibility("default"))) PyObject* CAK_CAT(PyInit_, TORCH_EXTENSION_NAME)(void) {
  return PyModuleDef_Init(&cak_def);
}"""


def _canonical(tokens: list[str], *, is_return: bool) -> str:
    words = list(tokens)
    const = words.count("const")
    words = [w for w in words if w != "const"]
    ref = ""
    while words and words[-1] == "&":
        ref += "&"
        words.pop()
    core = "".join(words)
    if core == "void" and is_return and not const and not ref:
        return "void"
    if core not in _CORE_TYPES or const > 1 or len(ref) > 2:
        raise BindingError(f"type {' '.join(tokens)!r} is not one the fast binding types")
    canon = _CORE_TYPES[core]
    if is_return and (const or ref):
        raise BindingError("a const or reference return type")
    return ("const " if const else "") + canon + (" " + ref if ref else "")


def _prototype(tokens: list) -> tuple[str, Signature]:
    texts = [t.text for t in tokens]
    if not texts or texts[-1] != ";" or "(" not in texts:
        raise BindingError(f"{' '.join(texts)!r} is not a function prototype")
    open_ = texts.index("(")
    if texts[open_ + 1:].count("(") or texts[-2] != ")":
        raise BindingError(f"{' '.join(texts)!r} is not a simple prototype")
    name = tokens[open_ - 1]
    if name.kind != "id" or open_ < 2:
        raise BindingError(f"{' '.join(texts)!r} has no return type or name")
    ret = _canonical(texts[:open_ - 1], is_return=True)
    params = []
    inner = tokens[open_ + 1:-2]
    if [t.text for t in inner] not in ([], ["void"]):
        for part in split_commas(inner):
            words = [t.text for t in part]
            if "=" in words:
                raise BindingError("default arguments in a prototype")
            try:
                params.append(_canonical(words, is_return=False))
            except BindingError:
                if part[-1].kind != "id" or len(part) < 2:
                    raise
                params.append(_canonical(words[:-1], is_return=False))
    return name.text, Signature(ret, tuple(params))


_T = "at::Tensor"
COMMON_SIGNATURES: tuple[Signature, ...] = tuple(Signature(_T, params) for params in (
    (_T,), (_T, _T), (_T, _T, _T), (_T, _T, _T, _T), (_T, _T, _T, _T, _T),
    (_T, "double"), (_T, "float"), (_T, "int"), (_T, "int64_t"), (_T, "bool"),
    (_T, "double", "double"), (_T, "float", "float"), (_T, "int", "int"), (_T, "int64_t", "int64_t"),
    (_T, "int", "int", "int"), (_T, "int", "int", "int", "int"),
    (_T, _T, "double"), (_T, _T, "float"), (_T, _T, "int"), (_T, _T, "int64_t"),
    (_T, _T, _T, "double"), (_T, _T, _T, "float"), (_T, _T, _T, "int", "int"),
))
"""Signatures most single-file solutions bind (a tensor in, a tensor out, a few scalars): `warm_up` builds their
binding objects once per toolchain, in one file, so that a solution with one of them compiles no binding code."""


def plan_binding(spec: InlineSpec) -> BindingPlan:
    """The fast binding for ``spec``, or `BindingError` when torch's main.cpp must be compiled instead."""
    if spec.functions is None:
        raise BindingError("the sources define their own module (functions=None)")
    if spec.no_implicit_headers:
        raise BindingError("no_implicit_headers: the prototypes' context is the user's")
    text = "\n".join(spec.cpp_sources)
    toks = tokenize(text)
    prototypes: dict[str, Signature] = {}
    for item in split_items(toks):
        if item.kind == "trivia":
            continue
        if item.kind == "pp":
            m = re.fullmatch(r"#\s*include\s*<([\w/.]+)>\s*|#\s*pragma\s+once\s*", toks[item.hi - 1].text)
            if not m or (m.group(1) and m.group(1) not in _SAFE_INCLUDES):
                raise BindingError(f"cpp_sources line {toks[item.hi - 1].text!r}")
            continue
        if item.kind != "decl":
            raise BindingError("cpp_sources holds a namespace or extern block")
        sig_toks = significant(toks, item.lo, item.hi)
        words = [t.text for t in sig_toks]
        if words[:2] == ["using", "namespace"] and words[2:] in (["torch", ";"], ["at", ";"], ["std", ";"]):
            continue
        name, signature = _prototype(sig_toks)
        if name in prototypes and prototypes[name] != signature:
            raise BindingError(f"{name} is declared twice with different signatures")
        prototypes[name] = signature
    functions = []
    for name, doc in spec.functions:
        if name not in prototypes:
            raise BindingError(f"function {name!r} has no prototype in cpp_sources")
        if not _DOC.fullmatch(doc) or "??" in doc:
            raise BindingError(f"the docstring of {name!r} needs escaping")
        functions.append((name, doc, prototypes[name]))
    return BindingPlan(tuple(functions), spec.with_pytorch_error_handling)


def main_cpp(spec: InlineSpec) -> str:
    """torch's main.cpp for ``spec``, as load_inline writes it (implicit include, sources, bindings)."""
    sources = list(spec.cpp_sources)
    if not spec.no_implicit_headers:
        sources.insert(0, "#include <torch/extension.h>")
    if spec.functions is not None:
        sources.append("PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {")
        for name, doc in spec.functions:
            target = f"torch::wrap_pybind_function({name})" if spec.with_pytorch_error_handling else name
            sources.append(f'm.def("{name}", {target}, "{doc}");')
        sources.append("}")
    return "\n".join(sources)


def cuda_source(spec: InlineSpec) -> str:
    """torch's cuda.cu for ``spec`` (with its implicit includes)."""
    sources = list(spec.cuda_sources)
    if not spec.no_implicit_headers:
        sources = ["#include <torch/types.h>", "#include <cuda.h>", "#include <cuda_runtime.h>", *sources]
    return "\n".join(sources)
