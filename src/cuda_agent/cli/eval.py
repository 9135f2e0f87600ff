"""`cuda-agent eval`: evaluate one solution against one task, print a table, write JSON."""
from __future__ import annotations

from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table

from cuda_agent.cli._checks import eval_config, finite
from cuda_agent.errors import CudaAgentError
from cuda_agent.tasks import resolve_task


MAX_TIMEOUT_S = 24 * 3600.0
FLAGS = {"mode": "--mode", "tolerance": "--tolerance", "timeout_s": "--timeout", "device": "--device"}


def _fmt(value: float | None, unit: str = "", digits: int = 4) -> str:
    return "-" if value is None else f"{value:.{digits}g}{unit}"


def render(result, console: Console) -> None:  # result: EvalResult
    table = Table(title=f"{result.task_id}: {result.stage}", show_header=True)
    table.add_column("item")
    table.add_column("value", overflow="fold")
    table.add_row("stage", result.stage)
    table.add_row("correct", str(result.correct))
    if result.reason:
        table.add_row("reason", result.reason[:600])
    for violation in result.rules_fired:
        table.add_row(f"rule {violation.rule}", violation.detail or violation.description)
    for name in ("eager", "compile", "candidate"):
        stats = getattr(result, name)
        if stats is not None:
            table.add_row(f"{name} time", f"{stats.median_ms:.4g} ms (cv {stats.cv:.3f}, n={stats.n})")
    if result.eager_paired is not None and result.baseline_drift is not None:
        table.add_row("eager again", f"{result.eager_paired.median_ms:.4g} ms on the candidate's inputs; baselines "
                                     f"scaled by {result.baseline_drift:.3f}x")
    if result.speedup_eager is not None:
        table.add_row("speedup vs eager", f"{result.speedup_eager:.3f}x "
                                          f"[{_fmt(result.speedup_eager_low)}, {_fmt(result.speedup_eager_high)}]")
    if result.speedup_compile is not None:
        table.add_row("speedup vs compile", f"{result.speedup_compile:.3f}x "
                                            f"[{_fmt(result.speedup_compile_low)}, {_fmt(result.speedup_compile_high)}]")
    if result.sol_fraction is not None:
        table.add_row("speed of light", f"{100 * result.sol_fraction:.1f}% of the floor "
                                        f"({_fmt(result.sol_floor_ms, ' ms')}, {result.sol_bound}-bound)")
    precision = result.precision_summary()
    if precision:
        table.add_row("precision", precision)
    table.add_row("reward", f"{result.reward} (continuous {result.continuous_reward:.3f})")
    table.add_row("input sets checked", str(result.input_sets_checked))
    table.add_row("seconds", f"build {_fmt(result.build_seconds)}, verify {_fmt(result.verify_seconds)}, "
                             f"profile {_fmt(result.profile_seconds)}, total {_fmt(result.total_seconds)}")
    for note in result.notes[:6]:
        table.add_row("note", note)
    console.print(table)
    _print_breakdowns(result, console)


def _print_breakdowns(result, console: Console) -> None:  # result: EvalResult
    from cuda_agent.evaluator.profile import format_breakdown_rows

    for title, rows in (("your kernels per call", result.kernel_breakdown),
                        ("torch.compile's kernels per call", result.compile_kernel_breakdown)):
        text = format_breakdown_rows(rows)
        if text:
            console.print(f"{title}:\n{text}", markup=False, highlight=False)


def register(app: typer.Typer) -> None:
    @app.command("eval")
    def eval_command(
        task: str = typer.Option(..., "--task", "-t", help="A task file or a KernelBench id like L1/19_ReLU."),
        solution: Path = typer.Option(..., "--solution", "-s", help="A workspace folder or a single-file .py."),
        mode: str = typer.Option("strict", "--mode", help="strict (custom kernels only) or relaxed."),
        json_out: Path | None = typer.Option(None, "--json", help="Write the full result as JSON here."),
        no_profile: bool = typer.Option(False, "--no-profile", help="Verify only; skip timing."),
        tolerance: str = typer.Option("paper", "--tolerance",
                                      help="paper (1e-2), tight, or kernelbench (KernelBench's current 1e-4 for fp32)."),
        timeout: float = typer.Option(300.0, "--timeout", help="Seconds before the evaluation is killed."),
        device: str = typer.Option("auto", "--device", help="auto, cpu, cuda or cuda:N."),
        breakdown: bool = typer.Option(False, "--breakdown", help="Add a per-kernel time breakdown (GPU)."),
        unsafe_no_sandbox: bool = typer.Option(
            False, "--unsafe-trusted-code-no-sandbox",
            help="Run the candidate WITHOUT the sandbox (it can read your files and environment). Only for code "
                 "you wrote yourself, on a machine where no sandbox can be made."),
    ) -> None:
        """Verify and time a solution (the judge and the sandboxed candidate in processes of their own); print the
        verdict and the reward."""
        from cuda_agent.evaluator import evaluate

        console = Console()
        finite(timeout, "--timeout", 0.0, MAX_TIMEOUT_S, low_excluded=True)
        try:
            task_obj = resolve_task(task)
            config = eval_config(FLAGS, mode=mode, profile=not no_profile, tolerance=tolerance, timeout_s=timeout,
                                 device=device, kernel_breakdown=breakdown,
                                 unsandboxed_trusted_code=unsafe_no_sandbox)
            if unsafe_no_sandbox:
                console.print("[bold red]WARNING: --unsafe-trusted-code-no-sandbox: the candidate runs outside the "
                              "sandbox, with your rights.[/bold red]")
            with console.status(f"evaluating {solution} on {task_obj.id} ({mode})"):
                result = evaluate(task_obj, solution, config)
        except CudaAgentError as exc:
            console.print(f"[red]error:[/red] {exc}", soft_wrap=True)
            raise typer.Exit(2) from exc
        render(result, console)
        if json_out is not None:
            json_out.parent.mkdir(parents=True, exist_ok=True)
            json_out.write_text(result.to_json())
            console.print(f"wrote {json_out}")
        raise typer.Exit(0 if result.correct else 1)
