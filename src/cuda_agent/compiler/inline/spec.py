"""`InlineSpec`: one ``torch.utils.cpp_extension.load_inline`` call, as data; and finding such calls statically.

A KernelBench single-file solution builds its extension at import time. To build it elsewhere (a CPU build worker,
before the candidate process starts, from a content cache) we need the call's arguments without running the file.
`extract_inline_specs` reads them from the module's syntax tree: string constants, concatenations, f-strings and
``%``/``.format``/``.join`` of constants, lists, dicts and keyword arguments, following module-level names. Anything
it cannot evaluate raises `InlineExtractionError`; the caller then falls back to the recorder (``record.py``), which
runs the file's top level in a sandbox with ``load_inline`` replaced.
"""
from __future__ import annotations

import ast
import hashlib
import json
import keyword
import textwrap
from dataclasses import asdict, dataclass, field
from typing import Any, Iterable, Mapping

from cuda_agent.errors import BuildError

# load_inline's parameters in the order torch declares them (the first three are positional in every version we
# support; later positions moved when SYCL arguments were added, so we accept only those three positionally).
POSITIONAL = ("name", "cpp_sources", "cuda_sources")
KNOWN_ARGS = frozenset({
    "name", "cpp_sources", "cuda_sources", "sycl_sources", "functions", "extra_cflags", "extra_cuda_cflags",
    "extra_sycl_cflags", "extra_ldflags", "extra_include_paths", "build_directory", "verbose", "with_cuda",
    "with_sycl", "is_python_module", "with_pytorch_error_handling", "keep_intermediates", "use_pch",
    "no_implicit_headers",
})
# Arguments that change where or how loudly torch builds, never what it builds.
_IGNORED = frozenset({"build_directory", "verbose", "keep_intermediates", "use_pch"})
MAX_SOURCE_CHARS = 2_000_000


class InlineExtractionError(BuildError):
    """A load_inline call's arguments are not static (or not valid): run the recorder instead."""


class InlineSpecError(BuildError):
    """A load_inline call asks for something this builder does not support (SYCL sources, a bad name)."""


def _as_tuple(value: Any, what: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        return (value,)
    if isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value):
        return tuple(value)
    raise InlineSpecError(f"load_inline: {what} must be a string or a list of strings, got {type(value).__name__}")


def _functions(value: Any) -> tuple[tuple[str, str], ...] | None:
    if value is None:
        return None
    if isinstance(value, str):
        return ((value, value),)
    if isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value):
        return tuple((v, v) for v in value)
    if isinstance(value, Mapping) and all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
        return tuple((k, v) for k, v in value.items())
    raise InlineSpecError("load_inline: functions must be a string, a list of names or a dict of name -> docstring")


@dataclass(frozen=True)
class InlineSpec:
    """The arguments of one load_inline call that decide what is built, normalised as torch normalises them.

    ``functions`` is a tuple of (name, docstring) pairs (torch turns a list into name -> name), or None when the
    sources define their own PYBIND11_MODULE. ``with_cuda`` None means "if there are CUDA sources", as in torch.
    """

    name: str
    cpp_sources: tuple[str, ...]
    cuda_sources: tuple[str, ...] = ()
    functions: tuple[tuple[str, str], ...] | None = None
    extra_cflags: tuple[str, ...] = ()
    extra_cuda_cflags: tuple[str, ...] = ()
    extra_ldflags: tuple[str, ...] = ()
    extra_include_paths: tuple[str, ...] = ()
    with_cuda: bool | None = None
    is_python_module: bool = True
    with_pytorch_error_handling: bool = True
    no_implicit_headers: bool = False
    origin: str = field(default="", compare=False)

    @classmethod
    def from_call(cls, kwargs: Mapping[str, Any], *, origin: str = "") -> "InlineSpec":
        """Build a spec from load_inline's keyword arguments (positional ones already named).

        Raises `InlineSpecError` for unknown arguments, SYCL sources, wrong types or a name that is not an
        identifier (torch pastes the name into C++ and a file name; anything else fails there too).
        """
        unknown = set(kwargs) - KNOWN_ARGS
        if unknown:
            raise InlineSpecError(f"load_inline got unexpected argument(s) {sorted(unknown)}")
        if "name" not in kwargs or "cpp_sources" not in kwargs:
            raise InlineSpecError("load_inline needs name and cpp_sources")
        name = kwargs["name"]
        if not isinstance(name, str) or not name.isidentifier() or keyword.iskeyword(name):
            raise InlineSpecError(f"load_inline: the extension name {name!r} must be a Python identifier")
        if _as_tuple(kwargs.get("sycl_sources"), "sycl_sources") or kwargs.get("with_sycl"):
            raise InlineSpecError("load_inline: SYCL sources are not supported by this builder")
        for flag in ("is_python_module", "with_pytorch_error_handling", "no_implicit_headers"):
            if flag in kwargs and not isinstance(kwargs[flag], bool):
                raise InlineSpecError(f"load_inline: {flag} must be True or False")
        with_cuda = kwargs.get("with_cuda")
        if with_cuda is not None and not isinstance(with_cuda, bool):
            raise InlineSpecError("load_inline: with_cuda must be True, False or None")
        spec = cls(
            name=name,
            cpp_sources=_as_tuple(kwargs["cpp_sources"], "cpp_sources"),
            cuda_sources=_as_tuple(kwargs.get("cuda_sources"), "cuda_sources"),
            functions=_functions(kwargs.get("functions")),
            extra_cflags=_as_tuple(kwargs.get("extra_cflags"), "extra_cflags"),
            extra_cuda_cflags=_as_tuple(kwargs.get("extra_cuda_cflags"), "extra_cuda_cflags"),
            extra_ldflags=_as_tuple(kwargs.get("extra_ldflags"), "extra_ldflags"),
            extra_include_paths=_as_tuple(kwargs.get("extra_include_paths"), "extra_include_paths"),
            with_cuda=with_cuda,
            is_python_module=kwargs.get("is_python_module", True),
            with_pytorch_error_handling=kwargs.get("with_pytorch_error_handling", True),
            no_implicit_headers=kwargs.get("no_implicit_headers", False),
            origin=origin,
        )
        if sum(map(len, spec.cpp_sources + spec.cuda_sources)) > MAX_SOURCE_CHARS:
            raise InlineSpecError(f"load_inline {name!r}: sources over {MAX_SOURCE_CHARS} characters")
        return spec

    @property
    def uses_cuda(self) -> bool:
        """Whether torch would build the CUDA file (it does when there are CUDA sources, whatever with_cuda says)."""
        return bool(self.cuda_sources)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["functions"] = None if self.functions is None else [list(p) for p in self.functions]
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "InlineSpec":
        """The inverse of `to_dict`; validates like `from_call` (the data may come from an untrusted recorder)."""
        if not isinstance(data, Mapping):
            raise InlineSpecError("an inline spec must be a JSON object")
        kwargs = {k: v for k, v in data.items() if k in KNOWN_ARGS}
        functions = kwargs.get("functions")
        if isinstance(functions, list) and all(isinstance(p, list) and len(p) == 2 for p in functions):
            kwargs["functions"] = {str(p[0]): p[1] for p in functions}
        origin = data.get("origin", "")
        return cls.from_call(kwargs, origin=origin if isinstance(origin, str) else "")

    def key(self) -> str:
        """A content hash of everything the spec says about the build (not its origin)."""
        data = self.to_dict()
        data.pop("origin", None)
        return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()


class _NotStatic(Exception):
    """Internal: an expression cannot be evaluated without running the module."""


_UNKNOWN = object()


class _Evaluator:
    """Evaluates the small expression language solutions use to assemble their sources."""

    def __init__(self, env: dict[str, Any], dedent_names: set[str]) -> None:
        self.env = env
        self.dedent_names = dedent_names

    def eval(self, node: ast.AST) -> Any:
        method = getattr(self, f"_{type(node).__name__}", None)
        if method is None:
            raise _NotStatic(f"{type(node).__name__} at line {getattr(node, 'lineno', '?')}")
        return method(node)

    def _Constant(self, node: ast.Constant) -> Any:
        if isinstance(node.value, (str, int, float, bool)) or node.value is None:
            return node.value
        raise _NotStatic(f"constant {node.value!r}")

    def _Name(self, node: ast.Name) -> Any:
        if node.id in ("True", "False", "None"):
            return {"True": True, "False": False, "None": None}[node.id]
        value = self.env.get(node.id, _UNKNOWN)
        if value is _UNKNOWN:
            raise _NotStatic(f"name {node.id!r} (line {node.lineno}) has no static value")
        return value

    def _List(self, node: ast.List) -> list[Any]:
        return [self.eval(e) for e in node.elts]

    def _Tuple(self, node: ast.Tuple) -> list[Any]:
        return [self.eval(e) for e in node.elts]

    def _Dict(self, node: ast.Dict) -> dict[Any, Any]:
        if any(k is None for k in node.keys):
            raise _NotStatic("dict unpacking")
        return {self.eval(k): self.eval(v) for k, v in zip(node.keys, node.values)}  # type: ignore[arg-type]

    def _JoinedStr(self, node: ast.JoinedStr) -> str:
        parts: list[str] = []
        for value in node.values:
            if isinstance(value, ast.Constant):
                parts.append(str(value.value))
                continue
            assert isinstance(value, ast.FormattedValue)
            inner = self.eval(value.value)
            if value.conversion == ord("r"):
                inner = repr(inner)
            elif value.conversion == ord("a"):
                inner = ascii(inner)
            spec = self._JoinedStr(value.format_spec) if value.format_spec is not None else ""
            parts.append(format(inner, spec))
        return "".join(parts)

    def _BinOp(self, node: ast.BinOp) -> Any:
        left, right = self.eval(node.left), self.eval(node.right)
        if isinstance(node.op, ast.Add) and type(left) is type(right) and isinstance(left, (str, list)):
            return left + right
        if isinstance(node.op, ast.Add) and all(isinstance(v, (int, float)) for v in (left, right)):
            return left + right
        if isinstance(node.op, ast.Mult) and isinstance(left, (str, list)) and isinstance(right, int):
            return left * right
        if isinstance(node.op, ast.Mod) and isinstance(left, str):
            return left % (tuple(right) if isinstance(right, list) else right)
        raise _NotStatic(f"operator {type(node.op).__name__} on {type(left).__name__}")

    def _Call(self, node: ast.Call) -> Any:
        func = node.func
        if any(isinstance(a, ast.Starred) for a in node.args) or any(k.arg is None for k in node.keywords):
            raise _NotStatic("call with * or ** arguments")
        args = [self.eval(a) for a in node.args]
        kwargs = {k.arg: self.eval(k.value) for k in node.keywords}
        if isinstance(func, ast.Name) and func.id in self.dedent_names and len(args) == 1 and isinstance(args[0], str):
            return textwrap.dedent(args[0])
        if (isinstance(func, ast.Attribute) and func.attr == "dedent" and isinstance(func.value, ast.Name)
                and func.value.id == "textwrap" and len(args) == 1 and isinstance(args[0], str)):
            return textwrap.dedent(args[0])
        if isinstance(func, ast.Name) and func.id == "dict" and len(args) <= 1:
            return dict(*args, **kwargs)
        if isinstance(func, ast.Name) and func.id in ("str", "list") and not kwargs and len(args) <= 1:
            return {"str": str, "list": list}[func.id](*args)
        if isinstance(func, ast.Attribute):
            owner = self.eval(func.value)
            if isinstance(owner, str) and func.attr in ("join", "format", "replace", "strip", "lstrip", "rstrip"):
                if func.attr == "join" and len(args) == 1 and all(isinstance(a, str) for a in args[0]):
                    return owner.join(args[0])
                if func.attr != "join":
                    return getattr(owner, func.attr)(*args, **kwargs)
        raise _NotStatic(f"call at line {node.lineno}")


def _is_load_inline(func: ast.AST, aliases: set[str]) -> bool:
    if isinstance(func, ast.Name):
        return func.id in aliases
    return isinstance(func, ast.Attribute) and func.attr == "load_inline"


def _call_kwargs(call: ast.Call, evaluator: _Evaluator) -> dict[str, Any]:
    if len(call.args) > len(POSITIONAL):
        raise _NotStatic(f"more than {len(POSITIONAL)} positional arguments")
    if any(isinstance(a, ast.Starred) for a in call.args):
        raise _NotStatic("*args")
    kwargs: dict[str, Any] = {}
    for name, arg in zip(POSITIONAL, call.args):
        kwargs[name] = evaluator.eval(arg)
    for kw in call.keywords:
        if kw.arg is None:
            splat = evaluator.eval(kw.value)
            if not isinstance(splat, dict):
                raise _NotStatic("** of a non-dict")
            kwargs.update(splat)
        elif kw.arg not in _IGNORED:
            kwargs[kw.arg] = evaluator.eval(kw.value)
    return {k: v for k, v in kwargs.items() if k not in _IGNORED}


def _assigned_names(node: ast.AST) -> Iterable[str]:
    for sub in ast.walk(node):
        if isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Store):
            yield sub.id


def extract_inline_specs(source: str, *, origin: str = "<solution>") -> list[InlineSpec]:
    """Every load_inline call in ``source`` with its arguments evaluated statically, in source order.

    Module-level statements are followed in order (so a call sees the values its names have at that point); calls
    inside functions and classes see the module's final values. Raises `InlineExtractionError` naming the first
    argument that is not static (or a syntax error), and `InlineSpecError` when a call's values are invalid.
    """
    try:
        tree = ast.parse(source, filename=origin)
    except SyntaxError as exc:
        raise InlineExtractionError(f"{origin}: cannot parse the solution: {exc}") from exc
    aliases = {"load_inline"}
    dedent_names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module in ("torch.utils.cpp_extension", "textwrap"):
            for alias in node.names:
                if alias.name == "load_inline":
                    aliases.add(alias.asname or alias.name)
                if alias.name == "dedent":
                    dedent_names.add(alias.asname or alias.name)
    env: dict[str, Any] = {}
    evaluator = _Evaluator(env, dedent_names)
    found: list[tuple[int, InlineSpec]] = []

    def collect(root: ast.AST) -> None:
        for sub in ast.walk(root):
            if isinstance(sub, ast.Call) and _is_load_inline(sub.func, aliases):
                try:
                    kwargs = _call_kwargs(sub, evaluator)
                except _NotStatic as exc:
                    raise InlineExtractionError(
                        f"{origin}:{sub.lineno}: load_inline arguments are not static ({exc}); "
                        "use the recorder to capture them") from exc
                found.append((sub.lineno, InlineSpec.from_call(kwargs, origin=f"{origin}:{sub.lineno}")))

    deferred: list[ast.AST] = []
    for stmt in tree.body:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            deferred.append(stmt)
            env.pop(stmt.name, None)
            continue
        collect(stmt)
        if isinstance(stmt, ast.Assign):
            try:
                value = evaluator.eval(stmt.value)
            except _NotStatic:
                value = _UNKNOWN
            for target in stmt.targets:
                for name in _assigned_names(target):
                    if isinstance(target, ast.Name) and value is not _UNKNOWN:
                        env[name] = value
                    else:
                        env.pop(name, None)
        elif isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) and stmt.value is not None:
            try:
                env[stmt.target.id] = evaluator.eval(stmt.value)
            except _NotStatic:
                env.pop(stmt.target.id, None)
        elif isinstance(stmt, ast.AugAssign) and isinstance(stmt.target, ast.Name):
            try:
                env[stmt.target.id] = evaluator.eval(ast.BinOp(stmt.target, stmt.op, stmt.value))
            except _NotStatic:
                env.pop(stmt.target.id, None)
        else:
            for name in _assigned_names(stmt):
                env.pop(name, None)
    for stmt in deferred:
        collect(stmt)
    return [spec for _, spec in sorted(found, key=lambda item: item[0])]
