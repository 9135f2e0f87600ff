"""The joins between packages, read from the source (no imports, so it runs anywhere in milliseconds).

One verdict travels from the evaluator to a report: `EvalResult`, which the pool's futures, the store, the agent's
backend, environment and best kernel, and `TaskOutcome.from_result` all hand on as it is. These tests fail when
someone types one of those seams `Any` again, probes a backend with ``getattr``, writes a second class of verdict
fields beside `EvalResult` and `TaskOutcome`, builds a `TaskOutcome` from verdict fields outside its module, or
writes a reward as a number instead of asking the reward schedule.
"""
from __future__ import annotations

import ast
import re
from functools import lru_cache
from pathlib import Path
from typing import Iterator

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "cuda_agent"

# The packages an evaluation passes through on its way to a report (rl/ turns verdicts into training rewards).
REPORT_PATH = ("evaluator", "pool", "store", "agent", "bench", "cli")

# (module, class or None for module level, names): functions, methods, dataclass fields or type aliases whose
# annotations hand a verdict (or a build) from one package to another.
SEAMS: tuple[tuple[str, str | None, tuple[str, ...]], ...] = (
    ("pool/base.py", "Pool", ("submit", "submit_build", "aevaluate")),
    ("pool/base.py", "QueuedPool", ("submit", "evaluate", "aevaluate", "submit_build", "abuild")),
    ("pool/base.py", "JobBook", ("__init__", "cached", "complete")),
    ("pool/base.py", None, ("await_future",)),
    ("pool/client.py", "PoolClient", ("submit", "evaluate", "aevaluate", "submit_build")),
    ("pool/builds.py", "BuildPool", ("submit",)),
    ("pool/local.py", "LocalPool", ("submit_build",)),
    ("pool/ray_pool.py", "RayPool", ("submit_build",)),
    ("pool/runs.py", None, ("Progress", "run_jobs", "resume_run")),
    ("store/store.py", "EvalRecord", ("eval_result",)),
    ("store/store.py", "Store", ("put",)),
    ("agent/backend.py", "BuildSummary", ("from_result",)),
    ("agent/backend.py", "EvalBackend", ("build", "verify", "profile", "close", "verify_mode")),
    ("agent/backend.py", "LocalBackend", ("build", "verify", "profile", "_warm_worker")),
    ("agent/backend.py", "PoolBackend", ("__init__", "build", "verify", "profile")),
    ("agent/backend.py", None, ("render_result", "skipped_result")),
    ("agent/env.py", None, ("StepResult",)),
    ("agent/env.py", "AgentEnv", ("__init__", "step", "final_reward", "_evaluate", "_record")),
    ("agent/env.py", "EnvState", ("last_evaluation", "best")),
    ("agent/step_info.py", "StepInfo", ("build", "evaluations", "best", "end")),
    ("agent/best.py", "BestKernel", ("result", "reward")),
    ("agent/best.py", None, ("is_candidate",)),
    ("agent/tool_turn.py", None, ("EnvStep", "ResultCallback")),
    ("agent/loop.py", None, ("ProgressCallback",)),
    ("agent/loop.py", "EpisodeResult", ("best", "evaluations")),
    ("bench/outcome.py", "TaskOutcome", ("from_result",)),
    ("bench/runner.py", None, ("Episode", "outcome_from_episode", "agent_episode")),
    ("bench/runner.py", "BenchRun", ("__init__",)),
    ("bench/offline.py", None, ("run_offline",)),
)

# What the verdict seams must name: the futures and readers give `EvalResult`, the environment's step a `StepInfo`.
MUST_NAME: tuple[tuple[str, str | None, str, str], ...] = (
    ("pool/base.py", "Pool", "submit", "Future[EvalResult]"),
    ("pool/base.py", "Pool", "submit_build", "Future[BuildResult]"),
    ("pool/client.py", "PoolClient", "submit", "Future[EvalResult]"),
    ("pool/runs.py", None, "run_jobs", "dict[str,EvalResult]"),
    ("store/store.py", "EvalRecord", "eval_result", "EvalResult"),
    ("agent/backend.py", "EvalBackend", "verify", "EvalResult"),
    ("agent/backend.py", "EvalBackend", "profile", "EvalResult"),
    ("agent/backend.py", "BuildSummary", "from_result", "BuildResult"),
    ("agent/backend.py", "PoolBackend", "__init__", "Pool"),
    ("agent/env.py", None, "StepResult", "StepInfo"),
    ("agent/tool_turn.py", None, "EnvStep", "StepInfo"),
    ("agent/loop.py", "EpisodeResult", "evaluations", "EvalResult"),
    ("bench/outcome.py", "TaskOutcome", "from_result", "EvalResult"),
)

# A class holding two or more of these is a verdict; only the evaluator's result and the benchmark's outcome are.
VERDICT_FIELDS = frozenset({"reward", "stage", "correct", "rules_fired", "speedup_eager", "speedup_compile",
                            "speedup_vs_eager", "speedup_vs_compile"})
VERDICT_TYPES = {("evaluator/result.py", "EvalResult"), ("bench/outcome.py", "TaskOutcome")}
# The keywords that make a `TaskOutcome` a verdict; outside bench/outcome.py only `from_result` and `failed` may
# set them.
OUTCOME_VERDICT_KEYWORDS = frozenset({"correct", "reward", "rules_fired", "speedup_vs_eager", "speedup_vs_compile",
                                      "eager_ms", "compile_ms", "candidate_ms"})
REWARD_NAMES = frozenset({"reward", "continuous_reward", "final_reward"})
# Free-form JSON payloads (an ``extra`` dict, a ``to_dict``) may hold anything; the seam's own type may not be Any.
_JSON_DICT = re.compile(r"\b(dict|Mapping)\[str, Any\]")


@lru_cache(maxsize=None)
def _tree(rel: str) -> ast.Module:
    return ast.parse((SRC / rel).read_text(), filename=rel)


def _body(rel: str, cls: str | None) -> list[ast.stmt]:
    tree = _tree(rel)
    if cls is None:
        return tree.body
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == cls:
            return node.body
    raise AssertionError(f"{rel}: no class {cls} (the seam moved: update SEAMS)")


def _annotations(rel: str, cls: str | None, name: str) -> list[str]:
    """The annotation texts of ``name`` in ``rel`` (a function's parameters and return, a field, an alias)."""
    for node in _body(rel, cls):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == name:
            args = node.args
            every = [*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg]
            found = [a.annotation for a in every if a is not None and a.annotation is not None]
            if node.returns is not None:
                found.append(node.returns)
            return [_text(a) for a in found]
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.target.id == name:
            return [_text(node.annotation)]
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in node.targets):
            return [_text(node.value)]
    raise AssertionError(f"{rel}: {cls + '.' if cls else ''}{name} not found (the seam moved: update SEAMS)")


def _text(node: ast.expr) -> str:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):  # a quoted (forward) annotation
        return node.value
    return ast.unparse(node).replace("'", "").replace('"', "")


def _report_path_nodes(skip: str = "") -> Iterator[tuple[str, ast.AST]]:
    """(module, node) for every node of every module on the report path but ``skip``."""
    for path in sorted(p for package in REPORT_PATH for p in (SRC / package).rglob("*.py")):
        rel = path.relative_to(SRC).as_posix()
        if rel != skip:
            yield from ((rel, node) for node in ast.walk(_tree(rel)))


@pytest.mark.parametrize("rel,cls,names", SEAMS, ids=[f"{r}:{c or ''}" for r, c, _ in SEAMS])
def test_no_seam_is_typed_any(rel: str, cls: str | None, names: tuple[str, ...]) -> None:
    for name in names:
        for text in _annotations(rel, cls, name):
            assert not re.search(r"\bAny\b", _JSON_DICT.sub("", text)), f"{rel} {cls}.{name}: {text}"


@pytest.mark.parametrize("rel,cls,name,needed", MUST_NAME, ids=[f"{c}.{n}" for _, c, n, _ in MUST_NAME])
def test_verdict_seams_name_their_types(rel: str, cls: str | None, name: str, needed: str) -> None:
    texts = _annotations(rel, cls, name)
    assert any(needed in text.replace(" ", "") for text in texts), f"{rel} {cls}.{name}: {texts} lacks {needed}"


def test_the_environment_and_the_runs_do_not_probe_what_they_are_given() -> None:
    for rel in ("agent/env.py", "agent/backend.py", "pool/runs.py"):
        probes = [f"{rel}:{node.lineno}" for node in ast.walk(_tree(rel)) if isinstance(node, ast.Call)
                  and isinstance(node.func, ast.Name) and node.func.id in ("getattr", "hasattr")]
        assert not probes, f"the protocol (EvalBackend, RunPool) says what it has; these probe it instead: {probes}"


def test_one_verdict_type_from_the_evaluator_to_a_report() -> None:
    verdicts = set()
    for rel, node in _report_path_nodes():
        if isinstance(node, ast.ClassDef):
            fields = {s.target.id for s in node.body if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name)}
            if len(fields & VERDICT_FIELDS) >= 2:
                verdicts.add((rel, node.name))
    assert verdicts == VERDICT_TYPES, f"a second verdict type: {sorted(verdicts - VERDICT_TYPES)}"


def test_outcomes_are_made_from_results_in_one_place() -> None:
    hand_made = [f"{rel}:{node.lineno}" for rel, node in _report_path_nodes(skip="bench/outcome.py")
                 if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "TaskOutcome"
                 and {k.arg for k in node.keywords} & OUTCOME_VERDICT_KEYWORDS]
    assert not hand_made, f"TaskOutcome built from verdict fields by hand (use TaskOutcome.from_result): {hand_made}"


def _is_number(node: ast.expr | None) -> bool:
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        node = node.operand
    return isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and not isinstance(node.value, bool)


def test_rewards_come_from_the_reward_schedule() -> None:
    """No reward written as a number on the report path: not as a keyword (``reward=-1.0``), a field default, or
    what a reward function returns (``return 0.0 if ... else -1.0``). The schedule's constants name them."""
    literal = []
    for rel, node in _report_path_nodes(skip="evaluator/reward_schedule.py"):
        if isinstance(node, ast.Call):
            literal += [f"{rel}:{k.value.lineno} {k.arg}=" for k in node.keywords
                        if k.arg in REWARD_NAMES and _is_number(k.value)]
        elif (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)
              and node.target.id in REWARD_NAMES and _is_number(node.value)):
            literal.append(f"{rel}:{node.lineno} {node.target.id} default")
        elif isinstance(node, ast.FunctionDef) and "reward" in node.name:
            returns = [inner for inner in ast.walk(node) if isinstance(inner, ast.Return) and inner.value is not None]
            literal += [f"{rel}:{inner.lineno} return in {node.name}" for inner in returns
                        if any(isinstance(leaf, ast.expr) and _is_number(leaf) for leaf in ast.walk(inner.value))]
    assert not literal, f"rewards written as numbers instead of the schedule's: {literal}"
