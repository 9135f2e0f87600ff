"""The recorder: run a solution's top level with load_inline replaced, and write the calls' arguments as JSON.

The fallback when `extract_inline_specs` cannot read a call statically (sources built by a function, read from a
loop, ...). It runs the candidate's code, so the caller runs it in the sandbox:

    python -m cuda_agent.compiler.inline.record SOLUTION.py OUT.json

Each load_inline call is recorded and answered with a placeholder; the run stops (a `RecordingStopped` sentinel,
which ``except Exception`` in the solution does not catch) as soon as anything touches a placeholder, since that
code needs the real extension. The JSON is ``{"specs": [...], "complete": bool, "error": str | null}``;
`read_recording` parses it back on the trusted side, validating every field (the file came from candidate code).
"""
from __future__ import annotations

import json
import runpy
import sys
import traceback
from pathlib import Path
from typing import Any

from cuda_agent.compiler.inline.spec import InlineSpec, InlineSpecError
from cuda_agent.errors import BuildError

MAX_RECORDING_BYTES = 8 * 1024 * 1024


class RecordingStopped(BaseException):
    """Raised into the solution when its import needs an extension's real functions."""


class _Placeholder:
    def __init__(self, name: str) -> None:
        object.__setattr__(self, "_cak_name", name)

    def __getattr__(self, attr: str) -> Any:
        raise RecordingStopped(f"the solution used extension {self._cak_name!r} ({attr}) while importing")

    def __setattr__(self, attr: str, value: Any) -> None:
        raise RecordingStopped("the solution modified an extension while importing")


def record(solution: Path) -> dict[str, Any]:
    """Run ``solution`` with load_inline recorded; return the JSON-ready result."""
    import torch.utils.cpp_extension as cpp_extension

    from cuda_agent.compiler.inline.loader import call_to_spec

    specs: list[dict[str, Any]] = []

    def load_inline(*args: Any, **kwargs: Any) -> _Placeholder:
        spec = call_to_spec(args, kwargs)
        specs.append(spec.to_dict())
        return _Placeholder(spec.name)

    cpp_extension.load_inline = load_inline
    complete, error = True, None
    sys.path.insert(0, str(solution.parent))
    try:
        runpy.run_path(str(solution), run_name="cuda_agent_solution")
    except RecordingStopped as stop:
        complete, error = False, str(stop)
    except BaseException as exc:  # noqa: BLE001 - the solution may raise anything; report it
        complete, error = False, "".join(traceback.format_exception_only(type(exc), exc)).strip()
    return {"specs": specs, "complete": complete, "error": error}


def read_recording(text: str) -> list[InlineSpec]:
    """The specs in a recorder's output; raises `BuildError` when it is not a valid recording."""
    if len(text) > MAX_RECORDING_BYTES:
        raise BuildError("the recording is too large")
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise BuildError(f"the recording is not JSON: {exc}") from exc
    if not isinstance(data, dict) or not isinstance(data.get("specs"), list):
        raise BuildError("the recording has no list of specs")
    try:
        return [InlineSpec.from_dict(item) for item in data["specs"]]
    except InlineSpecError as exc:
        raise BuildError(f"the recording holds an invalid load_inline call: {exc}") from exc


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2:
        sys.stderr.write("usage: python -m cuda_agent.compiler.inline.record SOLUTION.py OUT.json\n")
        return 2
    result = record(Path(args[0]).resolve())
    Path(args[1]).write_text(json.dumps(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
