"""`cuda-agent synth`: synthesise training tasks (rule-based or LLM composer) into a parquet task set."""
from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from cuda_agent.errors import CudaAgentError


def register(app: typer.Typer) -> None:
    # No default output: a bare `cuda-agent synth` prints its help instead of starting a long run in the current
    # folder.
    @app.command("synth", no_args_is_help=True)
    def synth_command(
        out: Path = typer.Option(..., "--out", help="Parquet to write (required); its .state.jsonl makes the run "
                                                    "resumable."),
        n: int = typer.Option(300, "--n", min=1, help="Accepted tasks wanted."),
        composer: str = typer.Option("rule", "--composer", help="rule (no LLM) or llm."),
        device: str = typer.Option("cpu", "--device", help="cpu or cuda: where tasks run and are timed."),
        seed: int = typer.Option(0, help="Composer seed."),
        workers: int = typer.Option(0, help="Filter worker processes (0: in this process, no time cap)."),
        task_timeout: float = typer.Option(120.0, help="Per-candidate cap in a worker, seconds."),
        min_ms: Optional[float] = typer.Option(None, help="Runtime band low end, ms (default 1 on cuda, 5 on cpu)."),
        max_ms: Optional[float] = typer.Option(None, help="Runtime band high end, ms (default 100 on cuda, 500 on cpu)."),
        no_compile: bool = typer.Option(False, "--no-compile", help="Skip the torch.compile filter."),
        catalog: Optional[Path] = typer.Option(None, help="Operator catalog JSON (crawled and saved if missing)."),
        no_transformers: bool = typer.Option(False, "--no-transformers", help="Crawl torch only."),
        kernelbench: Optional[str] = typer.Option(None, help="KernelBench folder for decontamination."),
        time_budget: Optional[float] = typer.Option(None, help="Stop submitting candidates after this many seconds."),
        base_url: Optional[str] = typer.Option(None, help="LLM composer: OpenAI-compatible API root (.../v1)."),
        model: Optional[str] = typer.Option(None, help="LLM composer: model name."),
    ) -> None:
        """Compose candidate tasks, filter them (eager, compile, determinism, degeneracy, runtime band,
        decontamination, near-duplicates) and write the accepted ones as parquet (columns ops, data_source, code)."""
        from cuda_agent.synth import FilterConfig, SynthConfig, SynthRun, load_or_crawl

        console = Console()
        if composer not in {"rule", "llm"}:
            console.print(f"[red]error:[/red] --composer must be rule or llm, not {composer!r}")
            raise typer.Exit(2)
        gpu = device.startswith("cuda")
        filters = FilterConfig(
            device=device, min_ms=min_ms if min_ms is not None else (1.0 if gpu else 5.0),
            max_ms=max_ms if max_ms is not None else (100.0 if gpu else 500.0), check_compile=not no_compile,
            max_input_bytes=(4 << 30) if gpu else (256 << 20),
        )
        config = SynthConfig(n=n, seed=seed, workers=workers, task_timeout_s=task_timeout, kernelbench=kernelbench,
                             time_budget_s=time_budget, filters=filters)
        try:
            with console.status("loading or crawling the operator catalog ...") as status:
                cat = load_or_crawl(catalog or out.with_name(out.name + ".catalog.json"),
                                    include_transformers=not no_transformers,
                                    progress=lambda name: status.update(f"crawling {name}"))
            console.print(f"catalog: {len(cat)} operators ({len(cat.composable())} composable, "
                          f"{len(cat.standalone())} standalone)")
            if composer == "rule":
                from cuda_agent.synth import RuleComposer

                comp = RuleComposer(cat, seed=seed)
            else:
                from cuda_agent.synth import LLMComposer, OpenAIChatClient

                comp = LLMComposer(cat, OpenAIChatClient.from_env(base_url, model), seed=seed)
            with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                          console=console) as bar:
                task = bar.add_task("accepted", total=n)
                seen = bar.add_task("candidates", total=None)

                def on_progress(p) -> None:  # type: ignore[no-untyped-def]
                    bar.update(task, completed=p.accepted)
                    bar.update(seen, completed=p.generated,
                               description=f"candidates (last: {p.last.reason or 'accepted'})" if p.last else "candidates")

                summary = SynthRun(comp, config, out, progress=on_progress).run()
        except CudaAgentError as exc:
            console.print(f"[red]error:[/red] {exc}")
            raise typer.Exit(2) from exc
        table = Table(title=f"synthesis: {summary.accepted} accepted of {summary.generated} candidates "
                            f"({summary.resumed} resumed) in {summary.seconds:.0f} s")
        table.add_column("outcome")
        table.add_column("count", justify="right")
        table.add_row("accepted", str(summary.accepted))
        for reason, count in sorted(summary.rejected.items(), key=lambda kv: -kv[1]):
            table.add_row(f"rejected: {reason}", str(count))
        console.print(table)
        console.print(f"wrote {summary.out} (state: {summary.state}); load it with: cuda-agent tasks {summary.out}")
