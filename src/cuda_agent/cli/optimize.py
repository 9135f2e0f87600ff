"""`cuda-agent optimize [model.py]`: run the agent on one task and write the best kernel and a short report.

Preconditions are checked first, in a second, before any heavy work: the task loads, nvcc exists, a GPU is there
(verification needs CUDA), and the policy is usable (an endpoint for ``--policy openai``, a script for
``--policy scripted``). Each missing piece is named with how to provide it.
"""
from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Optional

import typer
from rich.console import Console
from rich.live import Live
from rich.table import Table

from cuda_agent.cli._checks import finite
from cuda_agent.cli._options import API_KEY, MODEL
from cuda_agent.cli.run_folder import choose_run_folder
from cuda_agent.errors import ConfigError, CudaAgentError

if TYPE_CHECKING:
    from cuda_agent.agent import EpisodeResult, OpenAIConfig, Policy
    from cuda_agent.agent.step_info import StepInfo
    from cuda_agent.evaluator import EvalConfig
    from cuda_agent.tasks import Task

console = Console(stderr=True)

MAX_WALL_S = 30 * 86_400.0
# How an episode may end without a verdict: the command then exits 1, so a script tells it from a finished one.
FAILED_ENDS = frozenset({"policy_error", "context_overflow", "fatal"})
# The words each flag takes, checked before anything heavy is imported.
CHOICES = {"--policy": ("openai", "scripted"), "--mode": ("eval", "train"), "--sandbox": ("auto", "bwrap", "local"),
           "--verify": ("auto", "gpu", "skip"), "--eval-mode": ("strict", "relaxed")}


def _check_choices(given: dict[str, str]) -> None:
    """Raise `typer.BadParameter` (exit status 2) naming the first flag whose value is not one of its words."""
    for flag, value in given.items():
        if value not in CHOICES[flag]:
            raise typer.BadParameter(f"must be {' or '.join(CHOICES[flag])}, got {value!r}", param_hint=flag)


@dataclass
class _Progress:
    max_turns: int
    turn: int = 0
    tool: str = ""
    last_build: str = "-"
    last_result: str = "-"
    best: str = "-"
    tokens: int = 0
    elapsed: float = 0.0

    def update(self, info: "StepInfo") -> None:
        self.turn, self.tool = info.turn, info.tool or "(no tool call)"
        self.tokens, self.elapsed = info.tokens, info.elapsed_s
        if info.error:
            self.last_result = f"[yellow]{self.tool}: {info.error[:70]}[/yellow]"
        if info.build is not None:
            self.last_build = f"[green]ok[/green] {info.build.seconds:.1f} s" if info.build.ok else "[red]failed[/red]"
        for ev in info.evaluations:
            if ev.stage == "skipped":
                self.last_result = f"{self.tool}: skipped (no GPU)"
            elif ev.correct:
                speed = ev.speedup_compile
                self.last_result = f"[green]{self.tool}: {ev.stage}[/green]" + (
                    f", {speed:.3f}x vs compile" if speed is not None else "")
            else:
                self.last_result = f"[red]{self.tool}: {ev.stage}[/red]"
        if info.best is not None:
            self.best = f"{info.best.speedup_vs_compile:.3f}x vs compile (turn {info.best.turn})"

    def render(self) -> Table:
        table = Table.grid(padding=(0, 2))
        table.add_row("turn", f"{self.turn}/{self.max_turns}  [dim]{self.tool}[/dim]")
        table.add_row("last build", self.last_build)
        table.add_row("last result", self.last_result)
        table.add_row("best so far", self.best)
        table.add_row("tokens / time", f"{self.tokens}  /  {self.elapsed:.0f} s")
        return table


def _fail(message: str, code: int = 2) -> typer.Exit:
    console.print(f"[red]cannot run:[/red] {message}", soft_wrap=True)
    return typer.Exit(code)


def _load_task(path: Optional[Path]):
    from cuda_agent.agent.examples import example_task
    from cuda_agent.errors import TaskError
    from cuda_agent.tasks import load_task_file, resolve_task

    if path is None:
        return example_task()
    if not path.exists():  # a KernelBench id (L1/19_ReLU), or a typo
        try:
            return resolve_task(str(path))
        except TaskError as exc:
            raise _fail(f"{exc}; give a KernelBench-format model.py (Model, get_inputs, get_init_inputs)") from exc
    return load_task_file(path, validate=False)  # syntax only here: the evaluator runs the task, isolated


def optimize(
    task_path: Optional[Path] = typer.Argument(None, metavar="[MODEL.PY]",
                                               help="KernelBench-format task file (default: the bundled example)."),
    policy: str = typer.Option("openai", help="openai (a chat-completions endpoint) or scripted (replay a script)."),
    script: Optional[Path] = typer.Option(None, help="Tool-call script (JSON/YAML) for --policy scripted."),
    base_url: Optional[str] = typer.Option(None, help="Endpoint root, e.g. http://localhost:8000/v1 (env OPENAI_BASE_URL)."),
    model: Optional[str] = MODEL,
    api_key: Optional[str] = API_KEY,
    out: Optional[Path] = typer.Option(None, help="Output folder (default: runs/<task>-<time>)."),
    mode: str = typer.Option("eval", help="eval (200 turns) or train (150 turns) budget defaults."),
    max_turns: Optional[int] = typer.Option(None, min=1, help="Tool calls before the episode is cut off."),
    max_tokens: Optional[int] = typer.Option(None, min=1, help="Token budget of the episode (prompt + completion)."),
    max_wall: float = typer.Option(4 * 3600.0, help="Wall-clock budget in seconds."),
    context_tokens: int = typer.Option(131072, min=1024, help="The model's context window (older outputs are condensed)."),
    max_completion_tokens: int = typer.Option(8192, min=1, help="Most tokens one model reply may have (longer replies "
                                              "are cut, and the agent is told)."),
    temperature: float = typer.Option(0.6, help="Sampling temperature of the model."),
    request_timeout: float = typer.Option(600.0, help="Seconds one model request may take (a CPU server is slow)."),
    sandbox: str = typer.Option("auto", help="auto, bwrap or local: where bash runs."),
    verify: str = typer.Option("auto", help="auto, gpu or skip (skip: builds only, 'no GPU: verification skipped')."),
    eval_mode: str = typer.Option("strict", help="Evaluator mode: strict or relaxed."),
    resume: bool = typer.Option(False, "--resume", help="Continue the episode saved in --out."),
    require_build: bool = typer.Option(False, "--require-build-before-submit", help="Refuse submit while nothing "
                                       "has built in the episode (small models submit before writing anything)."),
) -> None:
    """Run the agent on one task; write the best kernel, report.md, result.json and the trajectory.

    Exit status: 0 when the episode ran to its end (submitted, or a budget spent); 1 when it could not (the
    model endpoint failed, the conversation outgrew the context, a fatal error); 2 when it could not start."""
    _check_choices({"--policy": policy, "--mode": mode, "--sandbox": sandbox, "--verify": verify,
                    "--eval-mode": eval_mode})
    finite(max_wall, "--max-wall", 0.0, MAX_WALL_S, low_excluded=True)
    finite(temperature, "--temperature", 0.0, 2.0)
    finite(request_timeout, "--request-timeout", 0.0, 86_400.0, low_excluded=True)
    from cuda_agent.agent import AgentConfig, AgentEnv, EnvConfig, OpenAIConfig
    from cuda_agent.agent.backend import LocalBackend
    from cuda_agent.agent.episode_outputs import write_outputs
    from cuda_agent.agent.loop import Agent

    def openai_config() -> OpenAIConfig:
        return OpenAIConfig.from_env(base_url, model, api_key, temperature=temperature,
                                     max_completion_tokens=max_completion_tokens, timeout_s=request_timeout)

    task, chosen, verify_mode = _preconditions(task_path, policy, script, verify, openai_config)
    try:
        folder = choose_run_folder(task.id, out, resume=resume)
    except ConfigError as exc:
        raise _fail(str(exc)) from exc
    defaults = EnvConfig.for_training() if mode == "train" else EnvConfig.for_evaluation()
    env_config = EnvConfig(
        max_turns=max_turns or defaults.max_turns, max_tokens=max_tokens, max_wall_s=max_wall,
        sandbox=sandbox, verify=verify_mode, workspace_root=folder.workspace, keep_workspace=True,  # type: ignore[arg-type]
        submit_requires_build=require_build,
    )
    backend = LocalBackend(verify=verify_mode, eval_config=_eval_config(verify_mode, eval_mode))
    env = AgentEnv(env_config, backend)
    progress = _Progress(env_config.max_turns)
    console.print(f"task [bold]{task.id}[/bold]; policy {policy}; output {folder.root}")
    try:
        with Live(progress.render(), console=console, refresh_per_second=4, transient=False) as live:
            def on_step(info: StepInfo) -> None:
                progress.update(info)
                live.update(progress.render())

            agent = Agent(chosen, env, AgentConfig(context_tokens=context_tokens), trajectory=folder.trajectory,
                          progress=on_step)
            result = agent.run(task, resume=resume)
    except CudaAgentError as exc:
        raise _fail(str(exc), 1)
    finally:
        env.close()
        backend.close()
    _tell(result, write_outputs(result, folder.root), verify_mode)


def _eval_config(verify_mode: str, eval_mode: str) -> "EvalConfig | None":
    """The evaluator's config where there is an evaluator (a GPU); None where verification is skipped."""
    if verify_mode != "gpu":
        return None
    from cuda_agent.evaluator import EvalConfig

    return EvalConfig(mode=eval_mode)


def _preconditions(task_path: Optional[Path], policy: str, script: Optional[Path], verify: str,
                   endpoint: "Callable[[], OpenAIConfig]") -> "tuple[Task, Policy, str]":
    """The task, the policy and the verify mode, checked in a second before anything heavy runs. Every missing
    piece (task, nvcc, endpoint or script, GPU) is printed with how to provide it, then the command exits 2."""
    from cuda_agent.agent import OpenAIPolicy, ScriptedPolicy
    from cuda_agent.agent.backend import resolve_verify_mode
    from cuda_agent.agent.examples import example_script_path

    problems: list[str] = []
    task = None
    try:
        task = _load_task(task_path)
    except CudaAgentError as exc:
        problems.append(str(exc))
    try:
        from cuda_agent.compiler import nvcc_path

        nvcc_path()
    except CudaAgentError as exc:
        problems.append(str(exc))
    try:
        verify_mode = resolve_verify_mode(verify)
    except ValueError as exc:
        raise _fail(str(exc))
    chosen: Any = None
    if policy == "scripted":
        if script is None and task_path is not None:
            problems.append("--policy scripted needs --script FILE (a JSON/YAML list of tool calls)")
        else:
            try:
                chosen = ScriptedPolicy.from_file(script or example_script_path())
            except ConfigError as exc:
                problems.append(str(exc))
    else:
        try:
            chosen = OpenAIPolicy(endpoint())
        except ConfigError as exc:
            problems.append(f"{exc}. To try the loop without a model: cuda-agent optimize --policy scripted "
                            "(replays the bundled example's script)")
    if verify_mode == "skip" and verify == "auto":
        if policy == "openai":
            problems.append(
                "no GPU: verification and profiling need CUDA (torch.cuda.is_available() is false here), so the "
                "agent could not check or time its kernels. Run on a machine with an NVIDIA GPU, or use "
                "`--policy scripted --script FILE` to exercise the build steps (verification is then skipped), "
                "or pass --verify skip to run the model anyway without verification")
        else:
            console.print("[yellow]no GPU:[/yellow] verification needs CUDA; builds run for real, verify/profile "
                          "answer 'no GPU: verification skipped'.")
    if problems or task is None:
        for problem in problems:
            console.print(f"[red]missing:[/red] {problem}", soft_wrap=True)
        raise typer.Exit(2)
    return task, chosen, verify_mode


def _tell(result: "EpisodeResult", paths: dict[str, Path], verify_mode: str) -> None:
    """Say how the episode ended and where its outputs are; exit 1 when it ended without a verdict."""
    console.print(f"ended: {result.reason} after {result.turns} turns; reward {result.reward:g}"
                  + ("" if result.reward_available else " (not available: no GPU)"))
    if result.best is not None:
        console.print(f"best kernel: {result.best.speedup_vs_compile:.3f}x vs torch.compile -> {paths['best']}")
    if "final" in paths and verify_mode == "skip":
        console.print(f"final workspace state: {paths['final']} (score it on a GPU host: cuda-agent bench offline "
                      f"--solutions {paths['final'].parent} --only-solved)")
    console.print(f"report: {paths['report']}")
    sys.stdout.write(str(paths["report"]) + "\n")
    if result.reason in FAILED_ENDS:
        console.print(f"[red]error:[/red] the episode did not finish ({result.reason}): {result.message}",
                      soft_wrap=True, highlight=False)
        raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    app.command("optimize")(optimize)
