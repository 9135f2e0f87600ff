"""Decontamination: how alike two tasks' ``Model`` classes are, after renaming and constants are normalised away.

Each statement of the class (in ``__init__``, ``forward`` and any helper) is reduced to a canonical string: local
names, arguments and ``self`` attributes become ``v0, v1, ...`` in order of first use, numbers and strings become
``C``, docstrings and ``super().__init__()`` go, and the torch API (``torch.*``, ``nn.*``, ``F.*``) stays as written
with ``F``/``nn`` spelled out. Similarity is difflib's ratio over the two statement sequences. A copy with other
names and sizes scores 1.0; replacing one operator of a four-operator chain scores about 0.75. Statements (not
tokens) are the unit because two chains differing in one operator share almost every token, and are still
different tasks.
"""
from __future__ import annotations

import ast
import difflib
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

log = logging.getLogger(__name__)

_API_ROOTS = {"torch": "torch", "nn": "torch.nn", "F": "torch.nn.functional", "math": "math"}


def _dotted(node: ast.AST) -> str | None:
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name) and node.id in _API_ROOTS:
        return ".".join([_API_ROOTS[node.id], *reversed(parts)])
    return None


class _Canon(ast.NodeTransformer):
    def __init__(self) -> None:
        self.names: dict[str, str] = {}

    def _rename(self, name: str) -> str:
        return self.names.setdefault(name, f"v{len(self.names)}")

    def visit_Attribute(self, node: ast.Attribute) -> ast.AST:
        api = _dotted(node)
        if api is not None:
            return ast.Name(id=api, ctx=node.ctx)
        if isinstance(node.value, ast.Name) and node.value.id == "self":
            return ast.Name(id=self._rename("self." + node.attr), ctx=node.ctx)
        node.value = self.visit(node.value)
        return node

    def visit_Name(self, node: ast.Name) -> ast.AST:
        if node.id in _API_ROOTS or node.id in {"self", "super", "len", "range", "min", "max", "abs", "sum"}:
            return ast.Name(id=_API_ROOTS.get(node.id, node.id), ctx=node.ctx)
        return ast.Name(id=self._rename(node.id), ctx=node.ctx)

    def visit_arg(self, node: ast.arg) -> ast.AST:
        return ast.arg(arg="self" if node.arg == "self" else self._rename(node.arg), annotation=None)

    def visit_Constant(self, node: ast.Constant) -> ast.AST:
        return ast.Constant(value="C")


def _is_noise(stmt: ast.stmt) -> bool:
    if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant) and isinstance(stmt.value.value, str):
        return True
    if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
        func = stmt.value.func
        if isinstance(func, ast.Attribute) and func.attr == "__init__" and isinstance(func.value, ast.Call):
            inner = func.value.func
            return isinstance(inner, ast.Name) and inner.id == "super"
    return isinstance(stmt, ast.Pass)


def _flatten(body: list[ast.stmt]) -> Iterable[ast.stmt]:
    for stmt in body:
        if _is_noise(stmt):
            continue
        if isinstance(stmt, (ast.For, ast.While, ast.If, ast.With)):
            header = type(stmt)(**{f: getattr(stmt, f) for f in stmt._fields if f not in {"body", "orelse"}},
                                body=[], orelse=[]) if not isinstance(stmt, ast.With) else ast.With(items=stmt.items, body=[])
            yield header
            yield from _flatten(stmt.body)
            yield from _flatten(getattr(stmt, "orelse", []))
        else:
            yield stmt


def model_signature(code: str, class_name: str = "Model") -> tuple[str, ...] | None:
    """The canonical statement sequence of ``class_name`` in ``code``; None if the code has no such class."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return None
    cls = next((n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == class_name), None)
    if cls is None:
        return None
    canon = _Canon()
    out: list[str] = []
    for item in cls.body:
        if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
            args = canon.visit(item.args)
            out.append(f"def {item.name}({ast.dump(args, annotate_fields=False)})")
            for stmt in _flatten(item.body):
                stmt = canon.visit(stmt)
                if isinstance(stmt, ast.AnnAssign):
                    stmt = ast.Assign(targets=[stmt.target], value=stmt.value)
                out.append(ast.dump(stmt, annotate_fields=False, include_attributes=False))
        elif not _is_noise(item):
            out.append(ast.dump(canon.visit(item), annotate_fields=False))
    return tuple(out)


def similarity(a: tuple[str, ...], b: tuple[str, ...]) -> float:
    """difflib ratio of two statement sequences (1.0: the same statements in the same order)."""
    if not a and not b:
        return 1.0
    return difflib.SequenceMatcher(None, a, b, autojunk=False).ratio()


@dataclass(frozen=True)
class Match:
    """The most similar indexed task and its similarity."""

    key: str
    score: float


class SimilarityIndex:
    """Signatures of many tasks, searchable for the nearest one (KernelBench, or the tasks accepted so far)."""

    def __init__(self) -> None:
        self._keys: list[str] = []
        self._sigs: list[tuple[str, ...]] = []
        self._exact: dict[tuple[str, ...], str] = {}

    def __len__(self) -> int:
        return len(self._keys)

    def add(self, key: str, code_or_signature: str | tuple[str, ...]) -> bool:
        sig = model_signature(code_or_signature) if isinstance(code_or_signature, str) else code_or_signature
        if sig is None:
            return False
        self._keys.append(key)
        self._sigs.append(sig)
        self._exact.setdefault(sig, key)
        return True

    def nearest(self, code_or_signature: str | tuple[str, ...], threshold: float = 0.0) -> Match | None:
        """The best match scoring at least ``threshold`` (checks cheap upper bounds first), or None."""
        sig = model_signature(code_or_signature) if isinstance(code_or_signature, str) else code_or_signature
        if sig is None:
            return None
        if sig in self._exact:
            return Match(self._exact[sig], 1.0)
        best: Match | None = None
        matcher = difflib.SequenceMatcher(None, autojunk=False)
        matcher.set_seq2(sig)
        floor = threshold
        for key, other in zip(self._keys, self._sigs):
            matcher.set_seq1(other)
            if matcher.real_quick_ratio() < floor or matcher.quick_ratio() < floor:
                continue
            score = matcher.ratio()
            if score >= floor and (best is None or score > best.score):
                best, floor = Match(key, score), score
        return best


def kernelbench_index(root: str | Path | None) -> SimilarityIndex:
    """Index every ``level*/*.py`` under a KernelBench task folder (parsed, never executed); empty if ``root`` is
    None or missing, with a warning, because then decontamination cannot run."""
    index = SimilarityIndex()
    if root is None or not Path(root).is_dir():
        log.warning("no KernelBench folder (%s): decontamination against evaluation tasks is off", root)
        return index
    for path in sorted(Path(root).glob("level*/*.py")):
        try:
            index.add(f"{path.parent.name}/{path.stem}", path.read_text())
        except OSError as exc:
            log.warning("cannot read %s: %s", path, exc)
    return index
