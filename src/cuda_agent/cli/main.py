"""The `cuda-agent` command. Each subcommand lives in its own module exposing ``register(app)``."""
from __future__ import annotations

import importlib
import logging
import os

import typer

app = typer.Typer(
    name="cuda-agent",
    help="Teach and run LLM agents that write CUDA kernels faster than torch.compile.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_show_locals=False,
)

# Order here is the order of `cuda-agent --help`.
SUBCOMMAND_MODULES = (
    "optimize",  # the main job: run the agent on one task
    "workspace_cmds",  # build / verify / profile / submit inside a workspace, and `workspace new`
    "eval",
    "tasks",
    "bench",
    "serve",
    "serve_model",  # a local GGUF model behind an OpenAI-compatible API (llama.cpp)
    "synth",
    "train",
)


@app.callback()
def _root(verbose: bool = typer.Option(False, "--verbose", "-v", help="Log debug messages.")) -> None:
    logging.basicConfig(
        level=logging.DEBUG if verbose else getattr(logging, os.environ.get("CUDA_AGENT_LOG", "WARNING").upper(), 30),
        format="%(levelname)s %(name)s: %(message)s",
    )


def _register_all() -> None:
    for name in SUBCOMMAND_MODULES:
        try:
            module = importlib.import_module(f"cuda_agent.cli.{name}")
        except ModuleNotFoundError as exc:
            if exc.name == f"cuda_agent.cli.{name}":
                continue  # subcommand not part of this installation
            raise
        module.register(app)


_register_all()

if __name__ == "__main__":
    app()
