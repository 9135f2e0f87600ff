"""The packages of cuda_agent form layers: no import cycle between them, counting imports inside functions.

Why count function-local imports: a cycle hidden inside a function is still a cycle. It decides which package can be
understood, tested and changed without the other, and an import moved into a function to dodge a start-up error is
the usual sign of one. So the graph is read from every module's syntax tree, module-level and function-local imports
alike (``if TYPE_CHECKING`` blocks included), with one node per top-level package or module of ``cuda_agent``
(``tasks``, ``sandbox``, ``errors``, ...). Files in folders without an ``__init__.py`` are not modules of the package
(``workspace/infra/binding.py`` is a file copied into each workspace), so they are left out.
"""
from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"
ROOT = "cuda_agent"

# edges[a][b]: the places (file:line) where package a imports package b
Edges = dict[str, dict[str, list[str]]]


def _module_name(path: Path, src: Path) -> tuple[str, ...] | None:
    """The dotted parts of the module at ``path``, or None where a folder on the way has no ``__init__.py``."""
    rel = path.relative_to(src).with_suffix("")
    for depth in range(1, len(rel.parts)):
        if not (src.joinpath(*rel.parts[:depth]) / "__init__.py").is_file():
            return None
    return rel.parts[:-1] if rel.name == "__init__" else rel.parts


def _imported(node: ast.Import | ast.ImportFrom, module: tuple[str, ...], is_package: bool) -> list[str]:
    """The absolute names one import statement imports (``from cuda_agent import x`` names ``cuda_agent.x``)."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if node.level:
        base = module if is_package else module[:-1]
        base = base[:len(base) - (node.level - 1)]
        prefix = ".".join(base + ((node.module,) if node.module else ()))
    else:
        prefix = node.module or ""
    return [f"{prefix}.{alias.name}" for alias in node.names]


def package_edges(src: Path, root: str = ROOT) -> Edges:
    """Every import between different top-level packages (or modules) of ``root`` under ``src``."""
    edges: Edges = defaultdict(lambda: defaultdict(list))
    for path in sorted((src / root).rglob("*.py")):
        module = _module_name(path, src)
        if module is None or len(module) < 2:
            continue
        here = module[1]
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        for node in ast.walk(tree):
            if not isinstance(node, (ast.Import, ast.ImportFrom)):
                continue
            for name in _imported(node, module, path.name == "__init__.py"):
                parts = name.split(".")
                place = f"{path.relative_to(src)}:{node.lineno}"
                if parts[0] == root and len(parts) > 1 and parts[1] != here and place not in edges[here][parts[1]]:
                    edges[here][parts[1]].append(place)
    return edges


def find_cycle(edges: Edges) -> list[str] | None:
    """One cycle of packages (its first package repeated at the end), or None where the graph has none."""
    state: dict[str, str] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = "open"
        stack.append(node)
        for nxt in sorted(edges.get(node, {})):
            if state.get(nxt) == "open":
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state:
                found = visit(nxt)
                if found:
                    return found
        stack.pop()
        state[node] = "done"
        return None

    for start in sorted(edges):
        if start not in state:
            found = visit(start)
            if found:
                return found
    return None


def describe(cycle: list[str], edges: Edges) -> str:
    """The cycle with, for each step, where the import is written (up to three places)."""
    lines = [" -> ".join(cycle)]
    for a, b in zip(cycle, cycle[1:]):
        places = edges[a][b]
        more = f" (+{len(places) - 3} more)" if len(places) > 3 else ""
        lines.append(f"  {a} -> {b}: {', '.join(places[:3])}{more}")
    return "\n".join(lines)


def _edges_of(root: Path, files: dict[str, str]) -> Edges:
    """The package edges of a made-up ``cuda_agent`` under ``root`` holding ``files`` (path -> source)."""
    for rel, text in files.items():
        (root / ROOT / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / ROOT / rel).write_text(text)
    return package_edges(root)


def test_a_cycle_through_a_function_local_import_is_found(tmp_path: Path) -> None:
    edges = _edges_of(tmp_path, {
        "__init__.py": "",
        "a/__init__.py": "from cuda_agent.b.m import x\n",
        "b/__init__.py": "",
        "b/m.py": "def f():\n    from ..c import y\n",
        "c.py": "from cuda_agent import a\n",
        "d/data/skip.py": "import cuda_agent.a\n",
    })
    cycle = find_cycle(edges)
    assert cycle == ["a", "b", "c", "a"]
    assert "b -> c: cuda_agent/b/m.py:2" in describe(cycle, edges)
    assert "d" not in edges  # a folder without __init__.py holds no module


def test_layers_without_a_cycle_pass(tmp_path: Path) -> None:
    root_init = {"__init__.py": "from cuda_agent.errors import E\n", "errors.py": ""}
    edges = _edges_of(tmp_path, {**root_init, "a/__init__.py": "from cuda_agent import errors\nfrom . import inner\n",
                                 "a/inner.py": "from cuda_agent.a import x\n",
                                 "b/__init__.py": "def f():\n    import cuda_agent.a.inner\n"})
    assert {a: sorted(b) for a, b in edges.items()} == {"a": ["errors"], "b": ["a"]}
    assert find_cycle(edges) is None


def test_no_import_cycle_between_the_packages_of_cuda_agent() -> None:
    edges = package_edges(SRC)
    assert "compiler" in edges and "evaluator" in edges  # the graph was read (a wrong path would find nothing)
    cycle = find_cycle(edges)
    assert cycle is None, "import cycle between packages of cuda_agent:\n" + describe(cycle, edges)


def test_what_the_sandbox_is_shipped_imports_nothing_of_cuda_agent() -> None:
    """The candidate runner and the kernel ABI run where no cuda_agent is importable (`runner_copy` stages them as
    ``ca_runner``): each may import only the standard library, torch, and each other relatively."""
    from cuda_agent.evaluator.judge.candidate import runner_copy

    staged = Path(runner_copy()) / "ca_runner"
    shipped = sorted(staged.glob("*.py"))
    assert {"kernel_abi.py", "serve.py", "boot.py"} <= {p.name for p in shipped}
    for path in shipped:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.level:  # a sibling: it must be staged too
                siblings = [node.module] if node.module else [a.name for a in node.names]
                assert all((staged / f"{s}.py").is_file() for s in siblings), f"{path.name}:{node.lineno}"
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
                assert not any(n.split(".")[0] == ROOT for n in names), f"{path.name}:{node.lineno} imports {ROOT}"
