"""`cuda-agent train <stage> --config configs/rl/<stage>.yaml [key=value ...]`: one stage of the RL recipe."""
from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

STAGE_HELP = "warmup | collect | rft | critic | ppo"


def register(app: typer.Typer) -> None:
    @app.command("train", context_settings={"allow_extra_args": False})
    def train(
        stage: str = typer.Argument(..., help=STAGE_HELP),
        overrides: Optional[List[str]] = typer.Argument(None, help="key=value overrides, e.g. actor_lr=1e-6 "
                                                        "cluster.gpus_per_node=4 verl.trainer.save_freq=5"),
        config: Optional[Path] = typer.Option(None, "--config", "-c", help="stage YAML (default "
                                              "$CUDA_AGENT_RL_CONFIGS/<stage>.yaml, else configs/rl/<stage>.yaml)"),
        dry_run: bool = typer.Option(False, "--dry-run", help="write the data and the engine config, print the "
                                     "launch command, do not launch"),
    ) -> None:
        """Run one stage: write the engine config it generates (verl) and launch the engine, or run the
        small-scale TRL path (engine=trl)."""
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

        from cuda_agent.errors import CudaAgentError
        from cuda_agent.rl.config import STAGES, load_stage_config
        from cuda_agent.rl.stages import run_stage

        console = Console()
        if stage not in STAGES:
            console.print(f"[red]unknown stage {stage!r}[/]; use one of {', '.join(STAGES)}")
            raise typer.Exit(2)
        try:
            if config is None:
                from cuda_agent.locations import rl_config_path

                config = rl_config_path(stage)
            cfg = load_stage_config(config, overrides or [], stage=stage)
            console.print(f"[bold]{stage}[/] with engine [bold]{cfg.engine}[/] from {config}")
            with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), console=console,
                          transient=True) as bar:
                job = bar.add_task(stage, total=None)

                def progress(name: str, done: int, total: int) -> None:
                    bar.update(job, description=name, completed=done, total=total)

                result = run_stage(cfg, dry_run=dry_run, progress=progress)
        except CudaAgentError as exc:
            console.print(f"[red]error:[/] {exc}", soft_wrap=True, highlight=False)
            raise typer.Exit(1) from exc
        for name, path in result.files.items():
            console.print(f"{name}: {path}")
        for name, value in result.metrics.items():
            console.print(f"{name} = {value:g}")
        if result.command:
            console.print("launch: " + " ".join(result.command))
        if result.returncode:
            console.print(f"[red]{result.engine} exited with code {result.returncode}[/]")
            raise typer.Exit(result.returncode)
