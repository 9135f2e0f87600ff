"""`cuda-agent data fetch kernelbench|ops6k`: download a public task set from the hub into the cache, once."""
from __future__ import annotations

import enum

import typer
from rich.console import Console

from cuda_agent.errors import CudaAgentError

console = Console(stderr=True)


class DataSet(str, enum.Enum):
    kernelbench = "kernelbench"
    ops6k = "ops6k"


_AFTER = {
    DataSet.kernelbench: "KernelBench ids (L1/19_ReLU), hub:kernelbench and `bench --tasks kernelbench` now find it "
                         "(CUDA_AGENT_KERNELBENCH, when set, comes first)",
    DataSet.ops6k: "hub:ops6k now loads it; or give its path to `cuda-agent tasks`",
}


def register(app: typer.Typer) -> None:
    data_app = typer.Typer(help="Task data: fetch KernelBench or CUDA-Agent-Ops-6K into the cache.",
                           no_args_is_help=True)
    app.add_typer(data_app, name="data")

    @data_app.command("fetch")
    def fetch(
        name: DataSet = typer.Argument(..., help="kernelbench (levels 1-3) or ops6k (CUDA-Agent-Ops-6K)."),
        force: bool = typer.Option(False, "--force", help="Download again even if the cache holds a copy."),
    ) -> None:
        """Download a task set from the Hugging Face hub into the cache (once; later commands find it there).
        The path is printed on stdout."""
        from cuda_agent.tasks.hub import FETCHERS

        try:
            with console.status(f"fetching {name.value} ..."):
                fetched = FETCHERS[name.value](force=force)
        except CudaAgentError as exc:
            console.print(f"[red]error:[/red] {exc}", soft_wrap=True, highlight=False)
            raise typer.Exit(2) from exc
        state = "fetched into the cache" if fetched.downloaded else "already in the cache"
        console.print(f"{name.value}: {state} at {fetched.path}; {_AFTER[name]}", soft_wrap=True, highlight=False)
        typer.echo(fetched.path)
