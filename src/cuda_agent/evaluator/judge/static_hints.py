"""A static pass over the candidate's Python source: early, readable hints, never a verdict.

What the candidate's code does is judged at run time (outputs, the kernel tap, the judge's clock); this pass only
points at lines that look like a rule's concern (PyTorch compute called through ``torch``/``F`` in a strict
forward, run-time code, changed backend flags), and its findings reach the result as notes. A method called on any
other object (``ext.matmul``, ``fused.linear``) is the solution's business: its name decides nothing.
"""
from __future__ import annotations

import ast
from dataclasses import dataclass

_INTROSPECTION_MODULES = {"gc", "inspect", "ctypes", "_ctypes", "cffi", "faulthandler", "tracemalloc", "dis",
                          "traceback", "sysconfig", "builtins"}
_THREAD_MODULES = {"threading", "_thread", "multiprocessing", "concurrent", "subprocess", "asyncio", "sched",
                   "signal", "atexit", "pty"}
_DYNAMIC_MODULES = {"importlib", "runpy", "pickle", "marshal", "types", "codeop", "code"}
_INTROSPECTION_ATTRS = {"_getframe", "settrace", "setprofile", "f_back", "f_locals", "f_globals", "gi_frame",
                        "tb_frame", "cr_frame", "__globals__", "__code__", "__closure__", "__subclasses__",
                        "_python_dispatch", "_DisableTorchDispatch", "_disable_current_modes",
                        "_get_current_dispatch_mode", "_get_current_dispatch_mode_stack", "_pop_mode",
                        "_push_mode", "_len_torch_dispatch_stack", "_len_torch_function_stack", "addaudithook",
                        "_current_frames", "get_objects", "get_referrers", "modules"}
_STREAM_ATTRS = {"Stream", "stream", "set_stream", "ExternalStream", "StreamContext"}
_HALF_NAMES = {"half", "bfloat16", "float16"}
_FALLBACK_ATTRS = {"compile", "jit", "_dynamo", "_inductor", "script", "trace"}
# Rationale (strict mode): forward may allocate, reshape and call the workspace's kernels, nothing else of torch.
STRICT_ALLOWED_TORCH = {"empty", "empty_like", "empty_strided", "zeros", "zeros_like", "ones", "ones_like", "full",
                        "full_like", "Size", "device", "float32", "float16", "bfloat16", "float64", "int32", "int64",
                        "int8", "uint8", "bool", "no_grad", "inference_mode", "is_tensor", "finfo", "iinfo",
                        "contiguous_format", "channels_last", "strided", "dtype", "Tensor", "tensor"}


@dataclass(frozen=True)
class StaticHit:
    rule: str
    detail: str


class _Visitor(ast.NodeVisitor):
    def __init__(self, *, strict: bool, fp32_task: bool, single_file: bool) -> None:
        self.strict = strict
        self.fp32_task = fp32_task
        self.single_file = single_file
        self.hits: list[StaticHit] = []
        self.in_forward = 0

    def hit(self, rule: str, node: ast.AST, what: str) -> None:
        self.hits.append(StaticHit(rule, f"line {getattr(node, 'lineno', '?')}: {what}"))

    def _check_module(self, name: str, node: ast.AST) -> None:
        root = name.split(".")[0]
        if root == "model":
            self.hit("torch_fallback", node, f"imports the reference module {name!r}")
        elif root == "cuda_agent":
            self.hit("evaluator_access", node, f"imports {name!r}")
        elif root in _INTROSPECTION_MODULES:
            self.hit("forbidden_introspection", node, f"imports {name!r}")
        elif root in _THREAD_MODULES:
            self.hit("background_thread", node, f"imports {name!r}")
        elif root in _DYNAMIC_MODULES:
            self.hit("dynamic_code", node, f"imports {name!r}")
        elif root in {"time", "timeit"}:
            self.hit("patched_trusted_function", node, f"imports {name!r} (timers belong to the evaluator)")

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self._check_module(alias.name, node)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.level == 0 and node.module:
            self._check_module(node.module, node)
        elif node.module in {"model"}:
            self.hit("torch_fallback", node, "imports the reference module")

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        for base in node.bases:
            name = base.id if isinstance(base, ast.Name) else base.attr if isinstance(base, ast.Attribute) else ""
            if name == "Model":
                self.hit("torch_fallback", node, f"class {node.name} inherits the reference Model")
        self.generic_visit(node)

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        forward = node.name == "forward"
        self.in_forward += forward
        self.generic_visit(node)
        self.in_forward -= forward

    def visit_Try(self, node: ast.Try) -> None:
        if self.in_forward and node.handlers:
            # Rationale: a try/except in forward exists to fall back (to PyTorch) when the kernel fails.
            self.hit("torch_fallback", node, "try/except in forward (a fallback path)")
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        if isinstance(func, ast.Name) and func.id in {"exec", "eval", "compile", "__import__", "globals", "vars"}:
            self.hit("dynamic_code", node, f"calls {func.id}()")
        if isinstance(func, ast.Name) and func.id == "Model":
            self.hit("torch_fallback", node, "instantiates the reference Model")
        if self.in_forward and self.strict and isinstance(func, ast.Attribute):
            base = func.value
            if isinstance(base, ast.Name) and base.id in {"torch", "F"} and func.attr not in STRICT_ALLOWED_TORCH:
                self.hit("torch_compute_in_forward", node, f"calls {base.id}.{func.attr}() in forward")
            elif isinstance(base, ast.Attribute) and base.attr == "functional":
                self.hit("torch_compute_in_forward", node, f"calls functional.{func.attr}() in forward")
        self.generic_visit(node)

    def visit_Attribute(self, node: ast.Attribute) -> None:
        if node.attr in _INTROSPECTION_ATTRS and not (node.attr == "modules" and not _is_sys(node.value)):
            self.hit("forbidden_introspection", node, f"uses .{node.attr}")
        if node.attr in _STREAM_ATTRS and _mentions(node.value, "cuda"):
            self.hit("foreign_stream", node, f"uses torch.cuda.{node.attr} (launch on the current stream only)")
        if node.attr in _FALLBACK_ATTRS and _is_name(node.value, "torch"):
            self.hit("torch_fallback", node, f"uses torch.{node.attr}")
        if node.attr == "set_float32_matmul_precision" or (node.attr in {"allow_tf32", "allow_fp16_reduced_precision_reduction", "allow_bf16_reduced_precision_reduction", "benchmark", "deterministic"} and isinstance(node.ctx, ast.Store)):
            self.hit("backend_flags_changed", node, f"changes {node.attr}")
        if self.fp32_task and node.attr in _HALF_NAMES:
            self.hit("lowered_precision", node, f"uses {node.attr} in an fp32 task")
        self.generic_visit(node)

    def visit_Assign(self, node: ast.Assign) -> None:
        for target in node.targets:
            if isinstance(target, ast.Attribute) and _root_name(target) in {"torch", "time", "F", "nn", "math", "np",
                                                                           "numpy", "sys", "binding", "ops"}:
                self.hit("patched_trusted_function", node, f"assigns to {ast.unparse(target)}")
        self.generic_visit(node)

    def visit_Global(self, node: ast.Global) -> None:
        if self.in_forward:
            # Rationale: module-level state written from forward is how results are cached across calls.
            self.hit("cached_output", node, f"forward writes module globals {', '.join(node.names)}")
        self.generic_visit(node)


def _is_name(node: ast.AST, name: str) -> bool:
    return isinstance(node, ast.Name) and node.id == name


def _is_sys(node: ast.AST) -> bool:
    """``sys``, or the ``sys`` module reached through another module (``threading._sys``, ``torch.sys``...)."""
    return _is_name(node, "sys") or (isinstance(node, ast.Attribute) and node.attr in {"sys", "_sys"})


def _mentions(node: ast.AST, name: str) -> bool:
    return any(isinstance(n, (ast.Name, ast.Attribute)) and getattr(n, "id", getattr(n, "attr", "")) == name
               for n in ast.walk(node))


def _root_name(node: ast.AST) -> str:
    while isinstance(node, ast.Attribute):
        node = node.value
    return node.id if isinstance(node, ast.Name) else ""


def scan_source(source: str, *, filename: str = "model_new.py", strict: bool, fp32_task: bool,
                single_file: bool = False) -> list[StaticHit]:
    """Rule hits in ``source``; a syntax error is returned as no hits (the import will report it)."""
    try:
        tree = ast.parse(source, filename=filename)
    except SyntaxError:
        return []
    visitor = _Visitor(strict=strict, fp32_task=fp32_task, single_file=single_file)
    visitor.visit(tree)
    seen: dict[tuple[str, str], None] = {}
    for hit in visitor.hits:
        seen.setdefault((hit.rule, hit.detail), None)
    return [StaticHit(rule, detail) for rule, detail in seen]
