"""Our own modules are imported plainly: an ``except ImportError`` around an import of ``cuda_agent`` hides a real
bug (a cycle, a renamed name, a broken module) behind a quiet fallback. Optional third-party packages (ray,
transformers, matplotlib, a database driver) may still be guarded."""
from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "cuda_agent"
IMPORT_ERRORS = {"ImportError", "ModuleNotFoundError"}


def _catches_import_error(handler: ast.ExceptHandler) -> bool:
    kinds = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
    return any(isinstance(k, ast.Name) and k.id in IMPORT_ERRORS for k in kinds)


def _imports_our_own(body: list[ast.stmt]) -> bool:
    for node in ast.walk(ast.Module(body=body, type_ignores=[])):
        if isinstance(node, ast.Import) and any(a.name.split(".")[0] == "cuda_agent" for a in node.names):
            return True
        if isinstance(node, ast.ImportFrom) and (node.level > 0 or (node.module or "").split(".")[0] == "cuda_agent"):
            return True
    return False


def guarded_own_imports(root: Path) -> list[str]:
    """``file:line`` of every try whose body imports cuda_agent and that has an ImportError handler."""
    found = []
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Try) and any(_catches_import_error(h) for h in node.handlers if h.type) \
                    and _imports_our_own(node.body):
                found.append(f"{path.relative_to(root.parent)}:{node.lineno}")
    return found


def test_the_guard_finds_the_pattern(tmp_path: Path) -> None:
    (tmp_path / "bad.py").write_text("try:\n    from cuda_agent.x import y\nexcept (ImportError, OSError):\n    y = 1\n")
    (tmp_path / "fine.py").write_text("try:\n    import ray\nexcept ImportError:\n    ray = None\n")
    assert guarded_own_imports(tmp_path) == [f"{tmp_path.name}/bad.py:1"]


def test_no_module_guards_an_import_of_our_own() -> None:
    assert guarded_own_imports(SRC) == []
