"""Write an episode's outputs: the best kernel's files, the workspace's final state in the layout `cuda-agent bench
offline` reads, a short Markdown report and a JSON summary."""
from __future__ import annotations

import json
import logging
from pathlib import Path

log = logging.getLogger(__name__)

from cuda_agent.agent.loop import EpisodeResult
from cuda_agent.errors import CudaAgentError
from cuda_agent.workspace import Workspace


def _fmt(value: float | None, suffix: str = "x") -> str:
    return "n/a" if value is None else f"{value:.3f}{suffix}"


def render_report(result: EpisodeResult) -> str:
    """A short Markdown report of ``result``."""
    lines = [
        f"# cuda-agent episode: {result.task_id}",
        "",
        f"- ended: **{result.reason}** after {result.turns} turns, {result.elapsed_s:.1f} s",
        f"- reward: **{result.reward:g}**" + ("" if result.reward_available else " (not available: verification skipped, no GPU)"),
        f"- malformed tool calls (answered with an error): {result.malformed_tool_calls}",
        f"- tokens: {result.usage.prompt_tokens} prompt + {result.usage.completion_tokens} completion "
        f"in {result.usage.calls} model calls; cost {result.usage.cost:.4f}",
    ]
    if result.trajectory:
        lines.append(f"- trajectory: `{result.trajectory}`")
    lines += ["", "## Best kernel", ""]
    best = result.best
    if best is None:
        lines.append("No correct, profiled kernel was produced in this episode.")
    else:
        lines += [
            f"Measured at turn {best.turn}: speedup vs torch.compile **{_fmt(best.result.speedup_compile)}**, "
            f"vs eager {_fmt(best.result.speedup_eager)}, reward {best.reward:g}.",
            "",
            "Files (in `best/`): " + ", ".join(f"`{name}`" for name in sorted(best.files)),
        ]
    if result.evaluations:
        lines += ["", "## Evaluations", "", "| # | stage | correct | vs eager | vs compile | reward |",
                  "| --- | --- | --- | --- | --- | --- |"]
        for number, ev in enumerate(result.evaluations, start=1):
            correct = "skipped" if ev.stage == "skipped" else ("yes" if ev.correct else "no")
            reward = "" if ev.stage == "skipped" else ev.reward
            lines.append(f"| {number} | {ev.stage} | {correct} | {_fmt(ev.speedup_eager)} | "
                         f"{_fmt(ev.speedup_compile)} | {reward} |")
    if result.message:
        lines += ["", "## Last message", "", "```", result.message.strip()[:3000], "```"]
    return "\n".join(lines) + "\n"


def write_final(result: EpisodeResult, out_dir: Path) -> Path | None:
    """Copy the workspace's final ``model_new.py`` and ``kernels/`` to ``out_dir/final/<task key>/`` (the task id
    with ``/`` as ``_``), the layout `cuda-agent bench offline --solutions out_dir/final` scores: on a machine
    without a GPU that is how an episode's work is evaluated later. None when the workspace is gone or empty."""
    if result.workspace is None or not Path(result.workspace).is_dir():
        return None
    try:
        files = Workspace.open(Path(result.workspace)).solution_files()
    except CudaAgentError as exc:
        log.warning("%s: cannot read the final workspace: %s", result.workspace, exc)
        return None
    if "model_new.py" not in files:
        return None
    target = out_dir / "final" / result.task_id.replace("/", "_")
    for rel, content in files.items():
        (target / rel).parent.mkdir(parents=True, exist_ok=True)
        (target / rel).write_bytes(content)
    return target


def write_outputs(result: EpisodeResult, out_dir: Path) -> dict[str, Path]:
    """Write ``best/`` (the best kernel's files, if any), ``final/<task key>/`` (the workspace's last state, see
    `write_final`), ``report.md`` and ``result.json`` under ``out_dir``."""
    out_dir.mkdir(parents=True, exist_ok=True)
    paths: dict[str, Path] = {}
    if result.best is not None:
        result.best.write(out_dir / "best")
        paths["best"] = out_dir / "best"
    final = write_final(result, out_dir)
    if final is not None:
        paths["final"] = final
    report = out_dir / "report.md"
    report.write_text(render_report(result))
    paths["report"] = report
    summary = out_dir / "result.json"
    evaluations = [ev.to_dict() for ev in result.evaluations]
    summary.write_text(json.dumps({**result.to_dict(), "evaluations": evaluations}, indent=2, default=str) + "\n")
    paths["result"] = summary
    return paths
