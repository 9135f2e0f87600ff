"""`cuda-agent tasks SPEC`: load a task set and list it, with the files that failed to load."""
from __future__ import annotations

from typing import Optional

import typer
from rich.console import Console
from rich.table import Table

from cuda_agent.errors import CudaAgentError


def register(app: typer.Typer) -> None:
    @app.command("tasks")
    def tasks_command(
        spec: str = typer.Argument(..., help="KernelBench folder, task file or folder, .parquet (Ops-6K layout), "
                                             "or hub:kernelbench / hub:ops6k."),
        level: Optional[list[int]] = typer.Option(None, "--level", "-l", help="Keep these levels."),
        ids: Optional[list[str]] = typer.Option(None, "--id", help="Keep these ids or names (shell patterns)."),
        op: Optional[list[str]] = typer.Option(None, "--op", help="Keep tasks using any of these operators."),
        sample: Optional[int] = typer.Option(None, help="Keep a random sample of this many tasks."),
        seed: int = typer.Option(0, help="Seed for --sample."),
        limit: int = typer.Option(50, help="Rows to show (0: all)."),
        validate: bool = typer.Option(True, "--validate/--no-validate",
                                      help="Dry-run each task in the sandbox (default), or check syntax only."),
        task_timeout: Optional[float] = typer.Option(None, "--task-timeout", help="Seconds each task's dry run may "
                                                     "take before it is killed and reported (default 30)."),
    ) -> None:
        """List a task set: ids, levels, operators; and every file that failed to load, with the reason.

        Task code is untrusted: it is executed only inside the sandbox (no network, the host's files out of
        sight), each task with a time limit."""
        import os

        from cuda_agent.tasks import load_tasks
        from cuda_agent.tasks.sandboxed import TIME_LIMIT_ENV, check_time_limit

        if not spec.strip():  # Path("") is the current folder: never walk a folder the user did not name
            raise typer.BadParameter("is empty; name a task file or folder, a .parquet file or hub:<name>",
                                     param_hint="SPEC")
        console = Console()
        try:
            if task_timeout is not None:
                os.environ[TIME_LIMIT_ENV] = str(check_time_limit(task_timeout, "--task-timeout"))
            with console.status(f"loading {spec} ..."):
                task_set = load_tasks(spec, validate=validate)
        except CudaAgentError as exc:
            console.print(f"[red]error:[/red] {exc}", soft_wrap=True, highlight=False)
            raise typer.Exit(2) from exc
        loaded = len(task_set)
        task_set = task_set.filter(levels=level, ids=ids, ops=op)
        if sample:
            task_set = task_set.sample(sample, seed)
        if len(task_set):
            table = Table(title=f"{len(task_set)} tasks from {spec}")
            for column in ("id", "level", "source", "ops"):
                table.add_column(column)
            for task in task_set.tasks[: limit or None]:
                table.add_row(task.id, str(task.level or ""), task.source, ", ".join(task.ops[:6]))
            console.print(table)
        if limit and len(task_set) > limit:
            console.print(f"... {len(task_set) - limit} more (use --limit 0 to show all)")
        for failure in task_set.failures:
            console.print(f"[yellow]skipped[/yellow] {one_line(failure.reason)}", soft_wrap=True, highlight=False)
        if task_set.failures:
            console.print(f"[yellow]{len(task_set.failures)} file(s) failed to load[/yellow]")
        if not loaded:
            console.print(f"[red]error:[/red] no task loaded from {spec}", soft_wrap=True)
            raise typer.Exit(1)
        if not len(task_set):
            console.print(f"[red]error:[/red] none of the {loaded} tasks from {spec} matches the filters",
                          soft_wrap=True)
            raise typer.Exit(1)


def one_line(text: str) -> str:
    """The first line of a message (a task's import error can carry a traceback-like tail)."""
    lines = text.strip().splitlines()
    return lines[0] + (" ..." if len(lines) > 1 else "") if lines else ""
