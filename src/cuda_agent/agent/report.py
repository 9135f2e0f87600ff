"""Write an episode's outputs: the best kernel's files, a short Markdown report and a JSON summary."""
from __future__ import annotations

import json
from pathlib import Path

from cuda_agent.agent.loop import EpisodeResult


def _fmt(value: float | None, suffix: str = "x") -> str:
    return "n/a" if value is None else f"{value:.3f}{suffix}"


def render_report(result: EpisodeResult) -> str:
    """A short Markdown report of ``result``."""
    lines = [
        f"# cuda-agent episode: {result.task_id}",
        "",
        f"- ended: **{result.reason}** after {result.turns} turns, {result.elapsed_s:.1f} s",
        f"- reward: **{result.reward:g}**" + ("" if result.reward_available else " (not available: verification skipped, no GPU)"),
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
        ev = best.evaluation
        lines += [
            f"Measured at turn {best.turn}: speedup vs torch.compile **{_fmt(ev.speedup_vs_compile)}**, "
            f"vs eager {_fmt(ev.speedup_vs_eager)}, reward {best.reward:g}.",
            "",
            "Files (in `best/`): " + ", ".join(f"`{name}`" for name in sorted(best.files)),
        ]
    if result.evaluations:
        lines += ["", "## Evaluations", "", "| # | kind | stage | correct | vs eager | vs compile | reward |",
                  "| --- | --- | --- | --- | --- | --- | --- |"]
        for number, ev in enumerate(result.evaluations, start=1):
            correct = "skipped" if ev.get("stage") == "skipped" else ("yes" if ev.get("correct") else "no")
            lines.append(f"| {number} | {ev.get('kind')} | {ev.get('stage')} | {correct} | "
                         f"{_fmt(ev.get('speedup_vs_eager'))} | {_fmt(ev.get('speedup_vs_compile'))} | "
                         f"{'' if ev.get('reward') is None else ev.get('reward')} |")
    if result.message:
        lines += ["", "## Last message", "", "```", result.message.strip()[:3000], "```"]
    return "\n".join(lines) + "\n"


def write_outputs(result: EpisodeResult, out_dir: Path) -> dict[str, Path]:
    """Write ``best/`` (the best kernel's files, if any), ``report.md`` and ``result.json`` under ``out_dir``."""
    out_dir.mkdir(parents=True, exist_ok=True)
    paths: dict[str, Path] = {}
    if result.best is not None:
        result.best.write(out_dir / "best")
        paths["best"] = out_dir / "best"
    report = out_dir / "report.md"
    report.write_text(render_report(result))
    paths["report"] = report
    summary = out_dir / "result.json"
    summary.write_text(json.dumps({**result.to_dict(), "evaluations": list(result.evaluations)}, indent=2, default=str) + "\n")
    paths["result"] = summary
    return paths
