"""The rl package's modules import each other in one direction only (deferred imports inside functions count too):
a cycle, even one hidden in a function body, means two modules that cannot be understood or loaded apart."""
from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = "cuda_agent.rl"
RL = Path(__file__).resolve().parents[2] / "src" / "cuda_agent" / "rl"


def import_graph(folder: Path, package: str) -> dict[str, set[str]]:
    """Module -> the package's modules it imports anywhere in its body (``from pkg import sub`` is ``pkg.sub``)."""
    modules = {package if p.stem == "__init__" else f"{package}.{p.stem}": p for p in folder.glob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        deps: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                deps |= {a.name for a in node.names if a.name in modules}
            elif isinstance(node, ast.ImportFrom) and node.module in modules:
                subs = {f"{node.module}.{a.name}" for a in node.names} & modules.keys()
                deps |= subs or {node.module}
                if len(subs) < len(node.names):
                    deps.add(node.module)
        deps.discard(name)
        graph[name] = deps
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str]:
    """One import cycle as ``[a, b, ..., a]``, or [] when there is none."""
    state: dict[str, str] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str]:
        state[node] = "open"
        stack.append(node)
        for dep in sorted(graph.get(node, ())):
            if state.get(dep) == "open":
                return stack[stack.index(dep):] + [dep]
            if dep not in state and (cycle := visit(dep)):
                return cycle
        stack.pop()
        state[node] = "done"
        return []

    for node in sorted(graph):
        if node not in state and (cycle := visit(node)):
            return cycle
    return []


def test_the_cycle_finder_sees_a_cycle_through_a_deferred_import(tmp_path: Path) -> None:
    (tmp_path / "__init__.py").write_text("")
    (tmp_path / "a.py").write_text("from pkg.b import x\n")
    (tmp_path / "b.py").write_text("def f():\n    from pkg import a\n")
    (tmp_path / "c.py").write_text("import pkg.a\n")
    graph = import_graph(tmp_path, "pkg")
    assert graph == {"pkg": set(), "pkg.a": {"pkg.b"}, "pkg.b": {"pkg.a"}, "pkg.c": {"pkg.a"}}
    assert find_cycle(graph) == ["pkg.a", "pkg.b", "pkg.a"]


def test_the_rl_package_has_no_import_cycle() -> None:
    graph = import_graph(RL, PACKAGE)
    assert f"{PACKAGE}.small" in graph and f"{PACKAGE}.stages" in graph[PACKAGE]
    assert find_cycle(graph) == []
