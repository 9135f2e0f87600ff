"""Checks for what arrives over HTTP: JSON without NaN or Infinity, every field typed, every number finite and
within bounds, and no field that names a path on the server.

Why here and not only in the classes the fields end up in: a value that passes a dataclass (``NaN <= 0`` is
false, so a NaN timeout passed ``timeout_s > 0``) can still break a thread far from the request; the service
must refuse it with a 400 that says which field, before anything is queued.

Every function raises `RequestError` (a `ConfigError`) naming the field.
"""
from __future__ import annotations

import json
import math
import re
import types
import typing
from typing import Any, Mapping

from cuda_agent.errors import RequestError

MAX_TIMEOUT_S = 24 * 3600.0
MAX_WAIT_S = 60.0
MAX_WAIT_IDS = 500
MAX_TASK_CODE_CHARS = 4 * 1024 * 1024
MAX_TEXT_CHARS = 1024
MAX_PATH_CHARS = 4096
MAX_LIST_ITEMS = 1000
MAX_SOLUTION_FILES = 1000
GENERIC_NUMBER_LIMIT = 1e9
JOB_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]{0,127}")

JOB_FIELDS = frozenset({"task", "solution", "kind", "config", "job_id", "run_id", "force", "timeout_s"})
TASK_FIELDS = frozenset({"id", "code", "source", "level", "name", "ops", "path", "metadata"})
SOLUTION_FIELDS = frozenset({"kind", "files", "encoding"})
# EvalConfig fields that name a folder on the server: a client must not choose where the server writes.
SERVER_ONLY_CONFIG = frozenset({"baseline_cache_dir", "build_cache_dir"})
# (low, high, low excluded) for EvalConfig's numbers; any other number must lie within +-GENERIC_NUMBER_LIMIT.
CONFIG_BOUNDS: dict[str, tuple[float, float, bool]] = {
    "timeout_s": (0.0, MAX_TIMEOUT_S, True),
    "judge_allowance_s": (0.0, MAX_TIMEOUT_S, False),
    "n_trials": (5, 1000, False),
    "warmup": (0, 10_000, False),
    "reps": (1, 100_000, False),
    "atol": (0.0, 1e6, False),
    "rtol": (0.0, 1e6, False),
    "speed_threshold": (0.0, 10.0, False),
    "sol_tolerance": (0.0, 10.0, False),
    "baseline_drift_limit": (0.0, 1.0, False),
    "max_log_chars": (0, 10_000_000, False),
    "seed": (0, 2**63 - 1, False),
}
ARCH = re.compile(r"[0-9]{2,3}[a-z]?")
# C0 and C1 control characters and DEL: in a name or a path they are never meant (a NUL ends a C string early, a
# newline or an escape sequence forges log lines and terminal output), so a request carrying one is refused.
CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def parse_json(raw: bytes) -> Any:
    """Decode a request body; NaN or Infinity anywhere (named by its path, e.g. ``config.timeout_s``), bad
    UTF-8, nesting too deep for the parser and numbers too long to convert are all a `RequestError`."""
    try:
        value = json.loads(raw or b"null")
    except RecursionError as exc:
        raise RequestError("request body is nested too deeply") from exc
    except (ValueError, UnicodeDecodeError) as exc:
        raise RequestError(f"request body is not JSON: {exc}") from exc
    _reject_nonfinite(value)
    return value


def _reject_nonfinite(value: Any) -> None:
    """Raise `RequestError` naming the first NaN or infinite number in a decoded JSON value."""
    stack: list[tuple[str, Any]] = [("", value)]
    while stack:
        path, item = stack.pop()
        if isinstance(item, float) and not math.isfinite(item):
            raise RequestError(f"{path or 'the request body'} must be a finite number, got {item} (NaN and "
                               "Infinity are not JSON)")
        if isinstance(item, dict):
            stack.extend((f"{path}.{key}" if path else str(key), child) for key, child in item.items())
        elif isinstance(item, list):
            stack.extend((f"{path}[{i}]", child) for i, child in enumerate(item))


def number(value: Any, name: str, low: float, high: float, *, integer: bool = False,
           low_excluded: bool = False) -> float | int:
    """``value`` as a finite number in [low, high] (``(low, high]`` with ``low_excluded``); booleans are not
    numbers; with ``integer``, only whole numbers are accepted."""
    kinds = "an integer" if integer else "a number"
    if isinstance(value, bool) or not isinstance(value, (int, float)) or (integer and not isinstance(value, int)):
        raise RequestError(f"{name} must be {kinds}, got {type(value).__name__} {_show(value)}")
    if isinstance(value, float) and not math.isfinite(value):
        raise RequestError(f"{name} must be finite, got {value}")
    below = value <= low if low_excluded else value < low
    if below or value > high:
        bracket = "(" if low_excluded else "["
        raise RequestError(f"{name} must be in {bracket}{low:g}, {high:g}], got {_show(value)}")
    return value


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def text(value: Any, name: str, *, limit: int = MAX_TEXT_CHARS, optional: bool = False,
         allow_empty: bool = True, printable: bool = True) -> str | None:
    """``value`` as a string of at most ``limit`` characters (None allowed with ``optional``); with ``printable``
    (names, paths, ids: everything but code and file contents) it must hold no control character."""
    if value is None and optional:
        return None
    if not isinstance(value, str):
        raise RequestError(f"{name} must be a string, got {type(value).__name__}")
    if len(value) > limit:
        raise RequestError(f"{name} is {len(value)} characters; the limit is {limit}")
    if not allow_empty and not value.strip():
        raise RequestError(f"{name} must not be empty")
    if printable:
        check_printable(value, name)
    return value


def check_printable(value: str, name: str) -> None:
    """Raise `RequestError` naming ``name`` when ``value`` holds a control character (NUL, newline, escape...)."""
    found = CONTROL.search(value)
    if found:
        raise RequestError(f"{name} {_show(value)} contains the control character {found.group()!r}; names and "
                           "paths must be printable")


def _object(value: Any, name: str, allowed: frozenset[str] | None = None) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise RequestError(f"{name} must be a JSON object, got {type(value).__name__}")
    if allowed is not None:
        unknown = sorted(set(value) - allowed)
        if unknown:
            raise RequestError(f"{name} has unknown field(s) {', '.join(unknown)}; known: {', '.join(sorted(allowed))}")
    return value


def check_task(value: Any) -> None:
    """A `Task.to_dict()`: ``id`` and ``code`` required, every other field typed."""
    task = _object(value, "task", TASK_FIELDS)
    for required in ("id", "code"):
        if required not in task:
            raise RequestError(f"task.{required} is required")
    text(task["id"], "task.id", allow_empty=False)
    text(task["code"], "task.code", limit=MAX_TASK_CODE_CHARS, allow_empty=False, printable=False)
    text(task.get("source", "user"), "task.source")
    text(task.get("name", ""), "task.name")
    text(task.get("path"), "task.path", limit=MAX_PATH_CHARS, optional=True)
    if task.get("level") is not None:
        number(task["level"], "task.level", 0, 100, integer=True)
    ops = task.get("ops", [])
    if not isinstance(ops, list) or len(ops) > MAX_LIST_ITEMS:
        raise RequestError(f"task.ops must be a list of at most {MAX_LIST_ITEMS} strings")
    for i, op in enumerate(ops):
        text(op, f"task.ops[{i}]")
    _object(task.get("metadata", {}), "task.metadata")


def check_solution(value: Any) -> None:
    """``{"kind", "files": {path: content}, "encoding"}`` with string paths and contents."""
    solution = _object(value, "solution", SOLUTION_FIELDS)
    text(solution.get("kind", "workspace"), "solution.kind")
    text(solution.get("encoding", "text"), "solution.encoding")
    files = _object(solution.get("files"), "solution.files")
    if len(files) > MAX_SOLUTION_FILES:
        raise RequestError(f"solution.files has {len(files)} files; the limit is {MAX_SOLUTION_FILES}")
    for path, content in files.items():
        text(path, "solution.files path", limit=MAX_PATH_CHARS, allow_empty=False)
        if not isinstance(content, str):
            raise RequestError(f"solution.files[{path!r}] must be a string (text or base64)")


def _hint_accepts(hint: Any, value: Any) -> bool:
    if isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union:
        return any(_hint_accepts(arg, value) for arg in typing.get_args(hint))
    if hint is type(None):
        return value is None
    if hint is bool:
        return isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if hint is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if hint is str:
        return isinstance(value, str)
    return True


def check_config(value: Any) -> dict[str, Any]:
    """An `EvalConfig` as a JSON object: known fields only, each of its declared type, numbers finite and within
    `CONFIG_BOUNDS`, no server paths; then `EvalConfig.from_dict` applies its own rules. Returns the object."""
    from cuda_agent.evaluator.config import EvalConfig

    config = dict(_object(value, "config"))
    hints = typing.get_type_hints(EvalConfig)
    for key, item in config.items():
        name = f"config.{key}"
        if key not in hints:
            raise RequestError(f"{name} is not an EvalConfig field")
        if key in SERVER_ONLY_CONFIG and item is not None:
            raise RequestError(f"{name} names a folder on the server; the server chooses its own caches")
        if not _hint_accepts(hints[key], item):
            raise RequestError(f"{name} must be {hints[key]}, got {type(item).__name__} {_show(item)}")
        if isinstance(item, (int, float)) and not isinstance(item, bool):
            low, high, excluded = CONFIG_BOUNDS.get(key, (-GENERIC_NUMBER_LIMIT, GENERIC_NUMBER_LIMIT, False))
            number(item, name, low, high, integer=isinstance(item, int) and hints[key] is int,
                   low_excluded=excluded)
        if key == "arch" and item is not None and not ARCH.fullmatch(item):
            raise RequestError(f"{name} must be a compute capability such as 90 or 90a, got {_show(item)}")
    try:
        EvalConfig.from_dict(config)
    except (TypeError, ValueError) as exc:
        raise RequestError(f"config: {exc}") from exc
    return config


def check_job_request(body: Any) -> Mapping[str, Any]:
    """A ``POST /v1/evaluations`` body (docs/http_api.md); returns it once every field has passed."""
    job = _object(body, "the request body", JOB_FIELDS)
    for required in ("task", "solution"):
        if required not in job:
            raise RequestError(f"{required} is required")
    check_task(job["task"])
    check_solution(job["solution"])
    text(job.get("kind", "full"), "kind")
    if job.get("config") is not None:
        check_config(job["config"])
    job_id = job.get("job_id")
    if job_id is not None and (not isinstance(job_id, str) or not JOB_ID.fullmatch(job_id)):
        raise RequestError("job_id must be 1-128 letters, digits, '.', '_', ':' or '-', starting with a letter or "
                           "digit")
    text(job.get("run_id"), "run_id", optional=True)
    if not isinstance(job.get("force", False), bool):
        raise RequestError("force must be true or false")
    if job.get("timeout_s") is not None:
        number(job["timeout_s"], "timeout_s", 0.0, MAX_TIMEOUT_S, low_excluded=True)
    return job


def check_wait_request(body: Any) -> tuple[list[str], float]:
    """A ``POST /v1/evaluations/wait`` body: ``ids`` (at most MAX_WAIT_IDS strings) and ``wait_s`` in [0, 60]."""
    request = _object(body, "the request body", frozenset({"ids", "wait_s"}))
    ids = request.get("ids")
    if not isinstance(ids, list) or len(ids) > MAX_WAIT_IDS:
        raise RequestError(f"ids must be a list of at most {MAX_WAIT_IDS} job ids")
    for i, job_id in enumerate(ids):
        text(job_id, f"ids[{i}]", limit=128)
    return ids, float(number(request.get("wait_s", 0), "wait_s", 0.0, MAX_WAIT_S))


def check_wait_query(raw: str) -> float:
    """The ``?wait=SECONDS`` of ``GET /v1/evaluations/{id}``: a number in [0, 60]."""
    try:
        value = float(raw)
    except ValueError as exc:
        raise RequestError(f"wait must be a number of seconds, got {_show(raw)}") from exc
    return float(number(value, "wait", 0.0, MAX_WAIT_S))


def check_build_request(body: Any) -> Mapping[str, Any]:
    """A ``POST /v1/builds`` body: ``task`` and a workspace ``solution``."""
    request = _object(body, "the request body", frozenset({"task", "solution"}))
    for required in ("task", "solution"):
        if required not in request:
            raise RequestError(f"a build request needs {required}")
    check_task(request["task"])
    check_solution(request["solution"])
    return request
