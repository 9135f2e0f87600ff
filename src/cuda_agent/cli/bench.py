"""`cuda-agent bench`: run a policy over a task set, score a folder of existing solutions, measure or convert
baselines, and write reports. The logic lives in `cuda_agent.bench`; this module parses flags and shows progress."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Optional

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from cuda_agent.cli._options import API_KEY, BASE_URL, LIMIT, MODEL
from cuda_agent.errors import CudaAgentError

console = Console()


def _fail(message: str, code: int = 2) -> typer.Exit:
    console.print(f"[red]error:[/red] {message}", soft_wrap=True)
    return typer.Exit(code)


def _tasks(spec: str, levels: Optional[str], ids: Optional[str], limit: Optional[int]) -> Any:
    from cuda_agent.errors import ConfigError
    from cuda_agent.locations import kernelbench_root
    from cuda_agent.tasks import load_tasks

    if spec == "kernelbench":
        try:
            root = kernelbench_root()
        except ConfigError as exc:
            raise _fail(str(exc))
        if root is None:
            raise _fail("no KernelBench folder found; pass --tasks PATH, set CUDA_AGENT_KERNELBENCH, or download it "
                        "with: cuda-agent data fetch kernelbench")
        spec = str(root)
    try:
        tasks = load_tasks(spec, validate=False)
    except CudaAgentError as exc:
        raise _fail(f"--tasks: {exc}") from exc
    wanted = [int(x) for x in levels.split(",")] if levels else None
    tasks = tasks.filter(levels=wanted, ids=ids.split(",") if ids else None)
    if limit is not None:
        tasks = type(tasks)(tasks.tasks[:limit], tasks.failures)
    if not len(tasks):
        chosen = "".join(f" {flag} {value}" for flag, value in (("--levels", levels), ("--ids", ids)) if value)
        raise _fail(f"no tasks selected from {spec}" + (f" with{chosen}" if chosen else ""))
    if tasks.failures:
        console.print(f"[yellow]{len(tasks.failures)} task file(s) failed to load[/yellow]; "
                      f"`cuda-agent tasks {spec}` lists them with the reason")
    return tasks


def _progress() -> Progress:
    return Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                    TextColumn("{task.fields[last]}"), console=console)


def _summary(results: Any, faster_threshold: float) -> None:
    from cuda_agent.bench import MetricsConfig, compute_metrics

    metrics = compute_metrics(results.outcomes, results.tasks, MetricsConfig(faster_threshold=faster_threshold))
    table = Table(title=f"{results.name}")
    for col in ("Subset", "Tasks", "Pass", "Faster vs eager", "Faster vs compile", "Geomean eager", "Geomean compile"):
        table.add_column(col, justify="right" if col != "Subset" else "left")

    def x(v: float | None) -> str:
        return "n/a" if v is None else f"{v:.2f}x"

    for g in (metrics.overall, *metrics.levels):
        table.add_row(g.name, str(g.tasks), f"{100 * g.pass_rate:.1f}%", f"{100 * g.faster_than_eager_rate:.1f}%",
                      f"{100 * g.faster_than_compile_rate:.1f}%", x(g.geomean_speedup_vs_eager),
                      x(g.geomean_speedup_vs_compile))
    console.print(table)


def _open_pool(store_url: Optional[str], gpus: Optional[str], standin: bool, *,
               standin_flag: bool = True) -> tuple[Any, Any]:
    """The local pool the bench commands evaluate on; without a GPU, exit naming the flags that help."""
    from cuda_agent.pool import LocalPool, StandInEvaluator
    from cuda_agent.pool.local import detect_gpus
    from cuda_agent.store import Store

    gpu_list = gpus.split(",") if gpus else None
    if not standin and gpu_list is None:
        gpu_list = detect_gpus()
        if not gpu_list:
            help_text = "pass --gpus IDS (e.g. --gpus 0,1) to name them"
            if standin_flag:
                help_text += ", or --standin to exercise the pipeline on this CPU with the stand-in evaluator"
            raise _fail(f"no GPU found here (nvidia-smi lists none and CUDA_VISIBLE_DEVICES is empty); {help_text}")
    store = Store.open(store_url)
    if standin:
        pool = LocalPool(gpus=gpu_list or ["0"], evaluator=StandInEvaluator(), store=store)
    else:
        pool = LocalPool(gpus=gpu_list, store=store)
    return pool, store


def _policy_factory(policy: str, script: Optional[Path], base_url: Optional[str], model: Optional[str],
                    api_key: Optional[str]) -> Callable[[Any], Any]:
    """A policy per task for `bench run`: ``scripted`` replays ``script`` from its start for each task; ``openai``
    asks the endpoint. Exits naming the flag when the choice cannot work; raises `ConfigError` for a bad endpoint."""
    from cuda_agent.agent import OpenAIConfig, OpenAIPolicy, ScriptedPolicy

    if policy == "scripted":
        if script is None:
            raise _fail("--policy scripted needs --script FILE")
        scripted = ScriptedPolicy.from_file(script)
        return lambda task: scripted
    if policy == "openai":
        cfg = OpenAIConfig.from_env(base_url, model, api_key)
        return lambda task: OpenAIPolicy(cfg)
    raise _fail(f"--policy must be openai or scripted, got {policy!r}")


def run_cmd(
    tasks: str = typer.Option("kernelbench", help="Task spec: a KernelBench folder, a file/folder, a parquet "
                              "file, hub:<id>; 'kernelbench' = levels 1-3 of the local KernelBench."),
    out: Path = typer.Option(..., help="Run folder (results.json, kernels/, trajectories/); rerun to resume."),
    levels: Optional[str] = typer.Option(None, help="Comma-separated levels, e.g. 1,2,3."),
    ids: Optional[str] = typer.Option(None, help="Comma-separated task ids or patterns (L1/1*)."),
    limit: Optional[int] = LIMIT,
    policy: str = typer.Option("openai", help="openai (a chat-completions endpoint) or scripted."),
    script: Optional[Path] = typer.Option(None, help="Tool-call script for --policy scripted (same for all tasks)."),
    base_url: Optional[str] = BASE_URL,
    model: Optional[str] = MODEL,
    api_key: Optional[str] = API_KEY,
    concurrency: int = typer.Option(8, help="Episodes in flight at once (they share the GPU pool)."),
    max_turns: int = typer.Option(200, help="Tool calls per episode (the paper evaluates with 200)."),
    store: Optional[str] = typer.Option(None, help="Store URL (default: ~/.cache/cuda-agent/store.db)."),
    gpus: Optional[str] = typer.Option(None, help="GPU ids for the pool (default: all)."),
    name: str = typer.Option("agent", help="Name shown in the report."),
    report: bool = typer.Option(True, help="Write report.md / report.html into the run folder at the end."),
    faster_threshold: float = typer.Option(1.05, help="'Faster' means speedup strictly above this."),
) -> None:
    """Run a policy over a task set (resumable: finished tasks in --out are skipped)."""
    from cuda_agent.agent import AgentConfig, EnvConfig
    from cuda_agent.bench import MetricsConfig
    from cuda_agent.bench.report_pages import write_report
    from cuda_agent.bench.runner import BenchRun, RunConfig, agent_episode

    task_set = _tasks(tasks, levels, ids, limit)
    try:
        factory = _policy_factory(policy, script, base_url, model, api_key)
        pool, _ = _open_pool(store, gpus, standin=False, standin_flag=False)
    except CudaAgentError as exc:
        raise _fail(str(exc)) from exc
    try:
        episode = agent_episode(factory, pool=pool, env_config=EnvConfig(max_turns=max_turns),
                                agent_config=AgentConfig())
        run = BenchRun(task_set, out, episode, RunConfig(concurrency=concurrency, name=name))
        with _progress() as bar:
            handle = bar.add_task("episodes", total=len(task_set), completed=len(run.finished), last="")

            def on_done(done: int, total: int, outcome: Any) -> None:
                speed = f"{outcome.speedup_vs_compile:.2f}x" if outcome.speedup_vs_compile else outcome.stage
                bar.update(handle, completed=done, last=f"{outcome.task_id}: {speed}")

            results = run.run(on_done)
    finally:
        pool.close()
    _summary(results, faster_threshold)
    if report:
        files = write_report(results, out, config=MetricsConfig(faster_threshold=faster_threshold), link_base=out)
        console.print(f"report: {files.markdown} and {files.html}")

def offline_cmd(
    solutions: Path = typer.Option(..., help="Folder of solutions: <task key>/ (model_new.py + kernels/), "
                                   "<task key>.py, level<N>/<name>.py or KernelBench's run naming."),
    tasks: str = typer.Option("kernelbench", help="Task spec (see `bench run`)."),
    out: Path = typer.Option(Path("bench-offline"), help="Where results.json and the report go."),
    levels: Optional[str] = typer.Option(None, help="Comma-separated levels."),
    ids: Optional[str] = typer.Option(None, help="Comma-separated task ids or patterns."),
    only_solved: bool = typer.Option(False, "--only-solved", help="Score only tasks that have a solution (default: every "
                                     "selected task; those without one count as failures)."),
    run_id: Optional[str] = typer.Option(None, help="Run id in the store (default: from the solutions folder; "
                                         "the same id resumes; give a new one after changing solutions)."),
    store: Optional[str] = typer.Option(None, help="Store URL (default: ~/.cache/cuda-agent/store.db)."),
    gpus: Optional[str] = typer.Option(None, help="GPU ids for the pool (default: all)."),
    standin: bool = typer.Option(False, "--standin", help="Use the stand-in evaluator (no GPU; exercises the pipeline)."),
    mode: str = typer.Option("strict", help="Evaluator mode: strict or relaxed (KernelBench's rules)."),
    name: Optional[str] = typer.Option(None, help="Name shown in the report."),
    faster_threshold: float = typer.Option(1.05, help="'Faster' means speedup strictly above this."),
) -> None:
    """Evaluate a folder of existing solutions with the same evaluator and metrics as agent runs."""
    from cuda_agent.bench import MetricsConfig
    from cuda_agent.bench.offline import find_solutions, run_offline
    from cuda_agent.bench.report_pages import write_report
    from cuda_agent.bench.results import save_results

    config = None if standin else _eval_config(mode)
    task_set = _tasks(tasks, levels, ids, None)
    try:
        if only_solved:
            found, _ = find_solutions(solutions, task_set)
            task_set = task_set.filter(ids=list(found))
        pool, st = _open_pool(store, gpus, standin)
    except CudaAgentError as exc:
        raise _fail(str(exc)) from exc
    try:
        with _progress() as bar:
            handle = bar.add_task("evaluations", total=None, last="")

            def on_done(done: int, total: int, result: Any) -> None:
                bar.update(handle, completed=done, total=total,
                           last=f"{getattr(result, 'task_id', '')}: {getattr(result, 'stage', '')}")

            run = run_offline(task_set, solutions, pool=pool, store=st,
                              run_id=run_id or f"offline:{solutions.resolve()}", config=config,
                              name=name or "", progress=on_done)
    except CudaAgentError as exc:
        raise _fail(str(exc)) from exc
    finally:
        pool.close()
    save_results(run.results, out / "results.json")
    _summary(run.results, faster_threshold)
    files = write_report(run.results, out, config=MetricsConfig(faster_threshold=faster_threshold),
                         link_base=solutions)
    console.print(f"results: {out / 'results.json'}; report: {files.markdown} and {files.html}")

def single_turn_cmd(
    out: Path = typer.Option(..., help="Output folder: solutions/<task key>.py, responses/, generation.json "
                             "(rerun to continue)."),
    tasks: str = typer.Option("kernelbench", help="Task spec (see `bench run`)."),
    levels: Optional[str] = typer.Option(None, help="Comma-separated levels."),
    ids: Optional[str] = typer.Option(None, help="Comma-separated task ids or patterns."),
    limit: Optional[int] = LIMIT,
    base_url: Optional[str] = BASE_URL,
    model: Optional[str] = MODEL,
    api_key: Optional[str] = API_KEY,
    max_tokens: int = typer.Option(2048, help="Most tokens of one reply (replies are cut there)."),
    temperature: float = typer.Option(0.0, help="Sampling temperature (0: greedy)."),
    timeout: float = typer.Option(1800.0, help="Seconds one request may take (CPU servers are slow)."),
) -> None:
    """Generate one single-file solution per task with the RL warm-up prompt; score them with `bench offline`."""
    import shlex
    import sys

    from cuda_agent.agent import OpenAIConfig, OpenAIPolicy
    from cuda_agent.bench.single_turn import generate_single_turn
    from cuda_agent.errors import ConfigError

    task_set = _tasks(tasks, levels, ids, limit)
    try:
        config = OpenAIConfig.from_env(base_url, model, api_key, temperature=temperature,
                                       max_completion_tokens=max_tokens, timeout_s=timeout, max_retries=2)
    except ConfigError as exc:
        raise _fail(str(exc)) from exc
    meta = {"model": config.model, "max_tokens": max_tokens, "temperature": temperature,
            "command": "cuda-agent " + " ".join(shlex.quote(a) for a in sys.argv[1:])}
    with _progress() as bar:
        handle = bar.add_task("replies", total=len(task_set), last="")

        def on_row(row: Any) -> None:
            rate = f", {row.tokens_per_s:.1f} tok/s" if row.tokens_per_s else ""
            bar.update(handle, advance=1, last=f"{row.task_id}: {'solution' if row.has_solution else 'none'}"
                                               f" ({row.completion_tokens} tokens{rate})")

        summary = generate_single_turn(task_set, OpenAIPolicy(config), out, meta=meta, progress=on_row)
    data = summary.to_dict()
    console.print(f"{data['with_solution']}/{data['tasks']} replies hold a solution; {data['completion_tokens']} "
                  f"tokens in {data['seconds']:.0f} s. Score them (on a GPU host):\n  cuda-agent bench offline "
                  f"--solutions {out / 'solutions'} --tasks {tasks} --ids {','.join(t.id for t in task_set)} "
                  f"--out {out / 'scored'}")

def report_cmd(
    results: Path = typer.Argument(..., help="A results.json written by `bench run` or `bench offline`."),
    out: Optional[Path] = typer.Option(None, help="Report folder (default: beside the results file)."),
    links: Optional[Path] = typer.Option(None, help="Folder kernel/trajectory paths are relative to."),
    faster_threshold: float = typer.Option(1.05, help="'Faster' means speedup strictly above this."),
    no_reference: bool = typer.Option(False, "--no-reference", help="Leave out the paper's Table 1."),
) -> None:
    """Write report.md, report.html and metrics.json from stored results (no GPU needed)."""
    from cuda_agent.bench import MetricsConfig
    from cuda_agent.bench.report_pages import write_report
    from cuda_agent.bench.results import load_results

    try:
        res = load_results(results)
        files = write_report(res, out or results.parent, config=MetricsConfig(faster_threshold=faster_threshold),
                             with_reference=not no_reference, link_base=links or results.parent)
    except CudaAgentError as exc:
        raise _fail(str(exc)) from exc
    _summary(res, faster_threshold)
    console.print(f"report: {files.markdown} and {files.html}")

def baselines_cmd(
    tasks: str = typer.Option("kernelbench", help="Task spec (see `bench run`)."),
    out: Path = typer.Option(Path("baselines.json"), help="The baseline table (resumed if it exists)."),
    levels: Optional[str] = typer.Option(None, help="Comma-separated levels."),
    ids: Optional[str] = typer.Option(None, help="Comma-separated task ids or patterns."),
    import_eager: Optional[Path] = typer.Option(None, "--import", help="Import KernelBench's "
                                                "baseline_time_torch.json instead of measuring."),
    import_compile: Optional[Path] = typer.Option(None, help="With --import: KernelBench's compile timings."),
    export: Optional[Path] = typer.Option(None, help="Also write KernelBench's two timing files in this folder."),
    reps: int = typer.Option(50, help="Timed repetitions per baseline."),
) -> None:
    """Measure eager and torch.compile times per task on this GPU (or import KernelBench's files)."""
    from cuda_agent.bench.baselines import BaselineTable, import_kernelbench, measure_tasks

    try:
        if import_eager is not None:
            table = import_kernelbench(import_eager, import_compile)
            table.save(out)
        else:
            task_set = _tasks(tasks, levels, ids, None)
            existing = BaselineTable.load(out) if out.exists() else None
            with _progress() as bar:
                handle = bar.add_task("baselines", total=len(task_set), last="")

                def on_task(task: Any, entry: Any, error: str) -> None:
                    text = f"{task.id}: eager {entry.eager.mean:.3f} ms, compile {entry.compile.mean:.3f} ms" \
                        if entry is not None else f"{task.id}: failed ({error[:60]})"
                    bar.update(handle, advance=1, last=text)

                table = measure_tasks(task_set, existing=existing, save_to=out, reps=reps, progress=on_task)
        if export is not None:
            paths = table.export_kernelbench(export)
            console.print(f"KernelBench files: {paths[0]}, {paths[1]}")
    except CudaAgentError as exc:
        raise _fail(str(exc)) from exc
    console.print(f"{len(table.entries)} tasks in {out} ({table.hardware or 'unknown GPU'})")


def register(app: typer.Typer) -> None:
    bench = typer.Typer(help="Benchmarks: agent runs, offline scoring of existing kernels, baselines, reports.",
                        no_args_is_help=True)
    app.add_typer(bench, name="bench")
    bench.command("run")(run_cmd)
    bench.command("offline")(offline_cmd)
    bench.command("single-turn")(single_turn_cmd)
    bench.command("report")(report_cmd)
    bench.command("baselines")(baselines_cmd)


def _eval_config(mode: str) -> Any:
    from cuda_agent.cli._checks import eval_config

    return eval_config({"mode": "--mode"}, mode=mode)
