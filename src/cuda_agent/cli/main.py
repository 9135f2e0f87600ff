"""The `cuda-agent` command. Each subcommand lives in its own module exposing ``register(app)``."""
from __future__ import annotations

import importlib
import logging
import os
from typing import Any

import typer
from typer.core import TyperCommand, TyperGroup


def _without_flag_types(params: list[Any]) -> list[Any]:
    """Flags take no value, so help shows no type for them (typer would print ``<bool>`` as if they took one).
    Matched by attribute: typer's options derive from its own copy of click's classes."""
    for param in params:
        if getattr(param, "is_flag", False) and not getattr(param, "count", False) and param.metavar is None:
            param.metavar = ""
    return params


class _Command(TyperCommand):
    def get_params(self, ctx: Any) -> list[Any]:
        return _without_flag_types(super().get_params(ctx))


class _Group(TyperGroup):
    def get_params(self, ctx: Any) -> list[Any]:
        return _without_flag_types(super().get_params(ctx))


app = typer.Typer(
    cls=_Group,
    name="cuda-agent",
    help="Teach and run LLM agents that write CUDA kernels faster than torch.compile.",
    no_args_is_help=True,
    pretty_exceptions_show_locals=False,
)

# Order here is the order of `cuda-agent --help`.
SUBCOMMAND_MODULES = (
    "optimize",  # the main job: run the agent on one task
    "workspace_cmds",  # build / verify / profile / submit inside a workspace, and `workspace new`
    "eval",
    "tasks",
    "data",
    "bench",
    "serve",
    "serve_model",  # a local GGUF model behind an OpenAI-compatible API (llama.cpp)
    "synth",
    "train",
)


# Subcommands that start worker processes: they run under `cuda_agent.procs.guard` semantics (SIGTERM, SIGINT and
# SIGHUP end every worker; none outlives the command). `serve` makes its first signal a graceful stop.
WORKER_COMMANDS = frozenset({"optimize", "eval", "tasks", "bench", "serve", "synth"})


def _print_version(value: bool) -> None:
    if value:
        from cuda_agent import __version__

        typer.echo(f"cuda-agent {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    ctx: typer.Context,
    verbose: bool = typer.Option(False, "--verbose", "-v", help="Log debug messages."),
    version: bool = typer.Option(False, "--version", callback=_print_version, is_eager=True,
                                 help="Print the version and exit."),
) -> None:
    logging.basicConfig(
        level=logging.DEBUG if verbose else getattr(logging, os.environ.get("CUDA_AGENT_LOG", "WARNING").upper(), 30),
        format="%(levelname)s %(name)s: %(message)s",
    )
    if ctx.invoked_subcommand in WORKER_COMMANDS:
        from cuda_agent import procs

        procs.install()
        ctx.call_on_close(procs.shutdown)


def _register_all() -> None:
    for name in SUBCOMMAND_MODULES:
        try:
            module = importlib.import_module(f"cuda_agent.cli.{name}")
        except ModuleNotFoundError as exc:
            if exc.name == f"cuda_agent.cli.{name}":
                continue  # subcommand not part of this installation
            raise
        module.register(app)
    _use_our_classes(app)


def _use_our_classes(typer_app: typer.Typer) -> None:
    """Every command and group of ``typer_app`` (sub-apps included) built with `_Command` and `_Group`."""
    for command in typer_app.registered_commands:
        if command.cls in (None, TyperCommand):
            command.cls = _Command
    for group in typer_app.registered_groups:
        sub = group.typer_instance
        if sub is not None:
            sub.info.cls = _Group
            _use_our_classes(sub)


_register_all()

if __name__ == "__main__":
    app()
