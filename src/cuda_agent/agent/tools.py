"""The agent's tools: small functions whose signature and docstring become the JSON schema sent to the model.

Each tool takes a `ToolContext` (the environment) and keyword arguments, and returns the text the agent reads.
A tool that cannot do what was asked raises `ToolError`; `call_tool` turns that, an unknown tool name or bad
arguments into an error observation, so a malformed call never stops an episode.
"""
from __future__ import annotations

import inspect
import re
import typing
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Protocol, Sequence

from cuda_agent.agent.files import ToolError, WorkspaceFiles
from cuda_agent.agent.types import ToolArgumentError, ToolCall


class MalformedCallError(ToolError):
    """A tool call that cannot be run as sent: no or an unknown tool name, or bad arguments. Counted per episode
    (`AgentEnv.malformed_calls`): a real model's rate of these is a health signal of its tool calling."""


class ToolContext(Protocol):
    """What tools may use: the workspace's files, bash, and the build/verify/profile/submit commands."""

    files: WorkspaceFiles

    def run_bash(self, command: str, timeout: float) -> str: ...

    def run_command(self, command: str, args: Sequence[str] = ()) -> str: ...


def bash(ctx: ToolContext, command: str, timeout: int = 300) -> str:
    """Run a bash command in the workspace (a sandbox: no network; the workspace is the current folder).

    Args:
        command: the command line, e.g. `nvcc --version` or `cuda-agent build`.
        timeout: seconds before the command and all its children are killed (at most the environment's limit).
    """
    return ctx.run_bash(command, float(timeout))


def read(ctx: ToolContext, path: str, offset: int = 1, limit: int = 2000) -> str:
    """Read a text file of the workspace, with line numbers.

    Args:
        path: file path relative to the workspace, e.g. model.py or kernels/relu.cu.
        offset: first line to show (counting from 1).
        limit: most lines to show.
    """
    return ctx.files.read(path, offset, limit)


def write(ctx: ToolContext, path: str, content: str) -> str:
    """Create or overwrite a file in the workspace (model_new.py or files under kernels/; protected files refuse).

    Args:
        path: file path relative to the workspace, e.g. kernels/relu.cu.
        content: the complete new content of the file.
    """
    return ctx.files.write(path, content)


def edit(ctx: ToolContext, path: str, old_string: str, new_string: str, replace_all: bool = False) -> str:
    """Replace an exact string in a file. Fails if old_string is not found, or occurs more than once without replace_all.

    Args:
        path: file path relative to the workspace.
        old_string: the exact text to replace, whitespace included.
        new_string: the text to put in its place.
        replace_all: replace every occurrence instead of requiring exactly one.
    """
    return ctx.files.edit(path, old_string, new_string, replace_all)


def multi_edit(ctx: ToolContext, path: str, edits: list[dict[str, Any]]) -> str:
    """Apply several exact-string edits to one file, in order, all or none.

    Args:
        path: file path relative to the workspace.
        edits: a list of objects {"old_string": ..., "new_string": ..., "replace_all": false}.
    """
    return ctx.files.multi_edit(path, edits)


def glob(ctx: ToolContext, pattern: str) -> str:
    """List workspace files matching a glob pattern.

    Args:
        pattern: a pattern relative to the workspace, e.g. kernels/*.cu or **/*.py.
    """
    return ctx.files.glob(pattern)


def grep(ctx: ToolContext, pattern: str, path: str = ".", include: str = "", ignore_case: bool = False) -> str:
    """Search workspace files for a regular expression; prints file:line: text for each match.

    Args:
        pattern: a Python regular expression.
        path: a file or folder relative to the workspace.
        include: only files whose name matches this glob, e.g. *.cu.
        ignore_case: match case-insensitively.
    """
    return ctx.files.grep(pattern, path, include, ignore_case)


def build(ctx: ToolContext) -> str:
    """Compile the kernels under kernels/ (incremental); prints the first compiler errors, with file and line."""
    return ctx.run_command("build")


def verify(ctx: ToolContext) -> str:
    """Build, then check ModelNew against the reference Model on fresh random inputs and the anti-cheat rules."""
    return ctx.run_command("verify")


def profile(ctx: ToolContext, breakdown: bool = False) -> str:
    """Build and verify, then time ModelNew against eager PyTorch and torch.compile; prints the speedups.

    Args:
        breakdown: also list the time of each of your kernels per call (where the time goes).
    """
    return ctx.run_command("profile", ["--breakdown"] if breakdown else [])


def submit(ctx: ToolContext) -> str:
    """Finish the episode: the current solution gets a final evaluation; the best correct kernel so far is kept."""
    return ctx.run_command("submit")


ToolFunction = Callable[..., str]
DEFAULT_TOOLS: tuple[ToolFunction, ...] = (
    bash, read, write, edit, multi_edit, glob, grep, build, verify, profile, submit,
)


@dataclass(frozen=True)
class Tool:
    """A tool and its function-calling schema."""

    name: str
    function: ToolFunction
    description: str
    parameters: Mapping[str, Any]

    def schema(self) -> dict[str, Any]:
        """The OpenAI ``tools`` entry."""
        return {
            "type": "function",
            "function": {"name": self.name, "description": self.description, "parameters": dict(self.parameters)},
        }


def _json_type(annotation: Any) -> dict[str, Any]:
    origin = typing.get_origin(annotation)
    if annotation is str:
        return {"type": "string"}
    if annotation is bool:
        return {"type": "boolean"}
    if annotation is int:
        return {"type": "integer"}
    if annotation is float:
        return {"type": "number"}
    if origin is list:
        (item,) = typing.get_args(annotation) or (Any,)
        return {"type": "array", "items": _json_type(item) if item is not Any else {}}
    if origin is dict or annotation is dict:
        return {"type": "object"}
    raise TypeError(f"tool parameter type {annotation!r} has no JSON schema mapping")


def _doc_parts(doc: str) -> tuple[str, dict[str, str]]:
    doc = inspect.cleandoc(doc or "")
    head, _, rest = doc.partition("\nArgs:")
    params: dict[str, str] = {}
    for match in re.finditer(r"^\s+(\w+): (.+?)(?=^\s+\w+: |\Z)", rest, re.M | re.S):
        params[match.group(1)] = " ".join(match.group(2).split())
    return " ".join(head.split()), params


def make_tool(function: ToolFunction) -> Tool:
    """Build a `Tool` from a function ``f(ctx, **params) -> str``; its docstring's ``Args:`` describe the params."""
    hints = typing.get_type_hints(function)
    description, docs = _doc_parts(function.__doc__ or "")
    properties: dict[str, Any] = {}
    required: list[str] = []
    for index, (name, param) in enumerate(inspect.signature(function).parameters.items()):
        if index == 0:
            continue
        prop = _json_type(hints[name])
        if name in docs:
            prop["description"] = docs[name]
        if param.default is inspect.Parameter.empty:
            required.append(name)
        else:
            prop["default"] = param.default
        properties[name] = prop
    parameters = {"type": "object", "properties": properties, "required": required, "additionalProperties": False}
    return Tool(function.__name__, function, description, parameters)


class ToolRegistry:
    """The tools of an environment, by name."""

    def __init__(self, functions: tuple[ToolFunction, ...] = DEFAULT_TOOLS) -> None:
        self.tools = {tool.name: tool for tool in map(make_tool, functions)}

    def schemas(self) -> list[dict[str, Any]]:
        return [tool.schema() for tool in self.tools.values()]

    def validate(self, call: ToolCall) -> tuple[Tool, dict[str, Any]]:
        """The tool and its checked arguments. A reply without any call raises `ToolError`; a call the environment
        cannot run as sent (no or an unknown tool name, arguments that are not a JSON object, unknown, missing or
        mistyped arguments) raises `MalformedCallError`, saying what is wrong with it."""
        if not call.name:
            if call.arguments_json().strip() not in ("", "{}"):
                raise MalformedCallError(
                    f"malformed tool call: no tool name could be read from {call.arguments_json()[:300]!r}; send "
                    "{\"name\": <tool>, \"arguments\": {...}} with one of: " + ", ".join(self.tools))
            raise ToolError("no tool call in your reply; call a tool (write, edit, build, verify, profile, ...) "
                            "or call submit when you are done")
        tool = self.tools.get(call.name)
        if tool is None:
            raise MalformedCallError(f"unknown tool {call.name!r}; available tools: {', '.join(self.tools)}")
        try:
            args = call.parsed_arguments()
        except ToolArgumentError as exc:
            raise MalformedCallError(str(exc)) from exc
        props: Mapping[str, Any] = tool.parameters["properties"]
        unknown = sorted(set(args) - set(props))
        if unknown:
            raise MalformedCallError(f"{call.name}: unknown argument(s) {', '.join(unknown)}; it takes "
                                     f"{', '.join(props) or 'none'}")
        missing = [name for name in tool.parameters["required"] if name not in args]
        if missing:
            raise MalformedCallError(f"{call.name}: missing required argument(s) {', '.join(missing)}")
        for name, value in args.items():
            if not _matches(props[name], value):
                raise MalformedCallError(f"{call.name}: argument {name!r} must be {props[name]['type']}, got "
                                         f"{type(value).__name__}")
        return tool, args


def _matches(schema: Mapping[str, Any], value: Any) -> bool:
    kind = schema.get("type")
    if kind == "string":
        return isinstance(value, str)
    if kind == "boolean":
        return isinstance(value, bool)
    if kind == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if kind == "array":
        return isinstance(value, list)
    if kind == "object":
        return isinstance(value, dict)
    return True


def trim(text: str, budget: int) -> str:
    """``text`` cut to about ``budget`` characters: the head (where the first compiler error is) and the tail,
    with a note saying how much was left out."""
    if budget <= 0 or len(text) <= budget:
        return text
    head = budget * 2 // 3
    tail = budget - head
    left_out = len(text) - head - tail
    note = (
        f"\n[... output trimmed: {left_out} of {len(text)} characters left out (budget {budget}); "
        "narrow the command (grep, head, tail) to see the rest ...]\n"
    )
    return text[:head] + note + text[len(text) - tail :]
