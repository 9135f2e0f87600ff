"""Commands run inside a workspace: `build`, `verify`, `profile`, `submit`; and `workspace new` to make one.

Inside the agent sandbox a stand-alone `cuda-agent` client forwards the same four commands to the host's pools;
outside it (a person working by hand) they run here, on this machine's compiler and GPU.
"""
from __future__ import annotations

import json
from pathlib import Path

import typer
from rich.console import Console

from cuda_agent.errors import CudaAgentError

console = Console()
UNSAFE_FLAG = "--unsafe-trusted-code-no-sandbox"
UNSAFE_HELP = ("Run the compiler (and, for verify and profile, the candidate) WITHOUT the sandbox. Only for code you "
               "wrote yourself, on a machine where no sandbox can be made.")


def _workspace(path: Path):
    from cuda_agent.workspace import Workspace

    try:
        return Workspace.open(path)
    except CudaAgentError as exc:
        console.print(f"[red]error:[/red] {exc}", soft_wrap=True)
        raise typer.Exit(2) from exc


def _evaluate(path: Path, profile: bool, breakdown: bool = False, unsafe: bool = False) -> None:
    from cuda_agent.cli.eval import render
    from cuda_agent.evaluator import EvalConfig, evaluate

    workspace = _workspace(path)
    config = EvalConfig(profile=profile, kernel_breakdown=breakdown, unsandboxed_trusted_code=unsafe)
    try:
        with console.status("verifying and profiling ..." if profile else "verifying ..."):
            result = evaluate(workspace.task, workspace.root, config)
    except CudaAgentError as exc:
        console.print(f"[red]error:[/red] {exc}", soft_wrap=True)
        raise typer.Exit(2) from exc
    render(result, console)
    raise typer.Exit(0 if result.correct else 1)


def register(app: typer.Typer) -> None:
    workspace_app = typer.Typer(help="Create workspaces.", no_args_is_help=True)
    app.add_typer(workspace_app, name="workspace")

    @workspace_app.command("new")
    def new(
        task: str = typer.Argument(..., help="Task file or KernelBench id (L1/19_ReLU)."),
        folder: Path = typer.Argument(..., help="Folder to create."),
        force: bool = typer.Option(False, "--force", help="Replace the folder if it holds a workspace."),
    ) -> None:
        """Make a workspace for a task: model.py, model_new.py, kernels/, binding files and SKILL.md."""
        from cuda_agent.tasks import resolve_task
        from cuda_agent.workspace import create_workspace

        try:
            workspace = create_workspace(resolve_task(task), folder, overwrite=force)
        except CudaAgentError as exc:
            console.print(f"[red]error:[/red] {exc}", soft_wrap=True)
            raise typer.Exit(2) from exc
        except OSError as exc:  # a parent that is a file, a read-only or virtual file system, no permission
            where = f" ({exc.filename})" if exc.filename else ""
            console.print(f"[red]error:[/red] cannot create a workspace at {folder}: {exc.strerror or exc}{where}",
                          soft_wrap=True, highlight=False)
            raise typer.Exit(2) from exc
        console.print(f"workspace for {workspace.task.id} at {workspace.root}; read {workspace.root / 'SKILL.md'}")

    @app.command("build")
    def build(
        folder: Path = typer.Argument(Path("."), help="Workspace folder."),
        arch: str = typer.Option(None, help="GPU architecture (90, sm_90, 90a); default: detected."),
        as_json: bool = typer.Option(False, "--json", help="Print the result as JSON."),
        unsafe: bool = typer.Option(False, UNSAFE_FLAG, help=UNSAFE_HELP),
    ) -> None:
        """Compile kernels/ (only what changed); print the first compiler error first."""
        from cuda_agent.compiler.confined import build_confined

        _workspace(folder)
        try:
            result = build_confined(folder, arch=arch, allow_unsandboxed=unsafe)
        except CudaAgentError as exc:
            console.print(f"[red]error:[/red] {exc}", soft_wrap=True)
            raise typer.Exit(2) from exc
        if as_json:
            print(json.dumps(result.to_dict(), indent=2))
        elif result.ok:
            what = ", ".join(result.compiled) or "nothing changed"
            console.print(f"build ok in {result.seconds:.2f} s (compiled: {what})")
        else:
            console.print(f"build failed in {result.seconds:.2f} s:\n{result.diagnostics}", markup=False)
        raise typer.Exit(0 if result.ok else 1)

    @app.command("verify")
    def verify(
        folder: Path = typer.Argument(Path("."), help="Workspace folder."),
        unsafe: bool = typer.Option(False, UNSAFE_FLAG, help=UNSAFE_HELP),
    ) -> None:
        """Build, then check ModelNew against Model on fresh inputs; print any rule that fired."""
        _evaluate(folder, profile=False, unsafe=unsafe)

    @app.command("profile")
    def profile(
        folder: Path = typer.Argument(Path("."), help="Workspace folder."),
        breakdown: bool = typer.Option(False, "--breakdown", help="Add the time of each of your kernels per call."),
        unsafe: bool = typer.Option(False, UNSAFE_FLAG, help=UNSAFE_HELP),
    ) -> None:
        """Verify, then time eager, torch.compile and ModelNew; print speedups and the reward."""
        _evaluate(folder, profile=True, breakdown=breakdown, unsafe=unsafe)

    @app.command("submit")
    def submit(
        folder: Path = typer.Argument(Path("."), help="Workspace folder."),
        unsafe: bool = typer.Option(False, UNSAFE_FLAG, help=UNSAFE_HELP),
    ) -> None:
        """End the episode (meaningful inside an agent episode; by hand it runs a final profile)."""
        _evaluate(folder, profile=True, unsafe=unsafe)
