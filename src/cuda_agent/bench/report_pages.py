"""Benchmark reports: Markdown (figures as PNG files beside it) and one self-contained HTML page (figures embedded as
base64 PNG), with the paper-style table beside the paper's Table 1, speedup distributions, fast_p curves, and a
per-task table linking each task's best kernel and trajectory."""
from __future__ import annotations

import base64
import html
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from cuda_agent.bench.metrics import BenchMetrics, GroupMetrics, MetricsConfig, compute_metrics
from cuda_agent.bench.outcome import TaskOutcome
from cuda_agent.bench.reference import METRIC_KEYS, PAPER_MODEL, ReferenceTable, paper_table
from cuda_agent.bench.results import BenchResults

_HEADERS = ("Pass rate", "Faster vs eager", "Faster vs compile", "Geomean vs eager", "Geomean vs compile")


@dataclass(frozen=True)
class ReportFiles:
    markdown: Path
    html: Path
    metrics: Path
    figures: tuple[Path, ...]


def _pct(value: float | None) -> str:
    return "unknown" if value is None else f"{100 * value:.1f}%"


def _x(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.2f}x"


def _cells(values: dict[str, float | None]) -> list[str]:
    return [_pct(values[k]) if "rate" in k else _x(values[k]) for k in METRIC_KEYS]


def _ours(group: GroupMetrics) -> dict[str, float | None]:
    return {k: getattr(group, k) for k in METRIC_KEYS}


def _table_rows(metrics: BenchMetrics, name: str, reference: ReferenceTable | None) -> list[tuple[str, str, list[str]]]:
    rows: list[tuple[str, str, list[str]]] = []
    for group in (metrics.overall, *metrics.levels):
        subset = group.name
        rows.append((subset, f"{name} ({group.correct}/{group.tasks} correct)", _cells(_ours(group))))
        ref = reference.get(subset, PAPER_MODEL) if reference else None
        if reference is not None:
            cells = _cells({k: ref.value(k) for k in METRIC_KEYS}) if ref else ["unknown"] * len(METRIC_KEYS)
            rows.append((subset, "CUDA Agent (paper, Table 1)", cells))
    return rows


def _link(path: str | None, base: Path | None, out_dir: Path) -> str | None:
    if not path:
        return None
    target = Path(path)
    if not target.is_absolute() and base is not None:
        target = base / target
    if target.is_absolute() or base is not None:
        return os.path.relpath(target, out_dir)
    return path


def _task_rows(outcomes: list[TaskOutcome], missing: list[str], levels: dict[str, int | None]) -> list[TaskOutcome]:
    rows = list(outcomes) + [TaskOutcome(task_id=t, level=levels.get(t), stage="missing", error="no result")
                             for t in missing]
    return sorted(rows, key=lambda o: (o.level if o.level is not None else 99, _num(o.task_id), o.task_id))


def _num(task_id: str) -> int:
    head = task_id.rsplit("/", 1)[-1].split("_", 1)[0]
    return int(head) if head.isdigit() else 10**9


def _ms(value: float | None) -> str:
    return "" if value is None else f"{value:.3f}"


def _definitions(config: MetricsConfig) -> str:
    return (
        f"Faster: correct and speedup strictly above {config.faster_threshold:g}x, over all tasks of the subset "
        "(missing tasks count as failures). Geomeans: over correct, timed kernels; the overall geomean weights each "
        "level's geomean by its number of tasks, as the paper's Table 1 does. fast_p: correct and speedup > p, over "
        "all tasks (KernelBench)."
    )


def render_markdown(results: BenchResults, metrics: BenchMetrics, *, reference: ReferenceTable | None,
                    figures: dict[str, str], link: Callable[[str | None], str | None]) -> str:
    lines = [f"# Benchmark report: {results.name}", ""]
    meta = {k: v for k, v in results.meta.items() if isinstance(v, (str, int, float))}
    if meta:
        lines += [", ".join(f"**{k}**: {v}" for k, v in meta.items()), ""]
    lines += [_definitions(metrics.config), ""]
    lines += ["## Results beside the paper's Table 1", "", "| Subset | Model | " + " | ".join(_HEADERS) + " |",
              "| --- | --- | " + " | ".join("---:" for _ in _HEADERS) + " |"]
    lines += [f"| {s} | {m} | " + " | ".join(c) + " |" for s, m, c in _table_rows(metrics, "this run", reference)]
    if reference is not None:
        lines += ["", f"Reference: {reference.source}."]
    lines += ["", "## fast_p (correct and speedup > p, over all tasks)", ""]
    ps = list(metrics.config.fast_p)
    lines += ["| Subset | vs | " + " | ".join(f"p={p:g}" for p in ps) + " |",
              "| --- | --- | " + " | ".join("---:" for _ in ps) + " |"]
    for group in (metrics.overall, *metrics.levels):
        for versus, values in (("compile", group.fast_p_vs_compile), ("eager", group.fast_p_vs_eager)):
            lines.append(f"| {group.name} | {versus} | " + " | ".join(_pct(values[p]) for p in ps) + " |")
    for title, path in figures.items():
        lines += ["", f"## {title}", "", f"![{title}]({path})"]
    lines += ["", "## Tasks", "", "| Task | Level | Stage | Correct | vs eager | vs compile | eager ms | compile ms | "
              "kernel ms | Kernel | Trajectory | Note |", "| --- | ---: | --- | --- | ---: | ---: | ---: | ---: | ---: | "
              "--- | --- | --- |"]
    for o in _task_rows(list(results.outcomes), results.missing, results.tasks):
        kernel, traj = link(o.solution), link(o.trajectory)
        note = (", ".join(o.rules_fired) or o.error).replace("|", "/").replace("\n", " ")[:120]
        lines.append(
            f"| {o.task_id} | {o.level if o.level is not None else ''} | {o.stage} | {'yes' if o.correct else 'no'} | "
            f"{_x(o.speedup_vs_eager) if o.correct else ''} | {_x(o.speedup_vs_compile) if o.correct else ''} | "
            f"{_ms(o.eager_ms)} | {_ms(o.compile_ms)} | {_ms(o.candidate_ms)} | "
            f"{f'[kernel]({kernel})' if kernel else ''} | {f'[trajectory]({traj})' if traj else ''} | {note} |"
        )
    return "\n".join(lines) + "\n"


_CSS = """body{font-family:system-ui,sans-serif;margin:2em auto;max-width:1200px;color:#222}
table{border-collapse:collapse;margin:1em 0;font-size:13px}th,td{border:1px solid #ccc;padding:3px 7px}
th{background:#f3f3f3}td.num{text-align:right}tr.paper td{color:#666;font-style:italic}
tr.bad td{background:#fff4f4}img{max-width:100%;border:1px solid #ddd}"""

# Writes each figure's decoded size into the page, so a headless browser's DOM dump shows whether it rendered.
_IMAGE_CHECK = """<script>
window.addEventListener('load', function () {
  var out = document.getElementById('image-check');
  var imgs = document.querySelectorAll('img.figure');
  var parts = [];
  for (var i = 0; i < imgs.length; i++) {
    parts.push(imgs[i].id + '=' + imgs[i].naturalWidth + 'x' + imgs[i].naturalHeight + ':' + imgs[i].complete);
  }
  out.textContent = parts.join(';');
  out.setAttribute('data-loaded', String(imgs.length));
});
</script>"""


def render_html(results: BenchResults, metrics: BenchMetrics, *, reference: ReferenceTable | None,
                figures: dict[str, bytes], link: Callable[[str | None], str | None]) -> str:
    e = html.escape
    parts = ["<!DOCTYPE html><html><head><meta charset='utf-8'>", f"<title>{e(results.name)}</title>",
             f"<style>{_CSS}</style></head><body>", f"<h1>Benchmark report: {e(results.name)}</h1>"]
    meta = {k: v for k, v in results.meta.items() if isinstance(v, (str, int, float))}
    if meta:
        parts.append("<p>" + "; ".join(f"<b>{e(str(k))}</b>: {e(str(v))}" for k, v in meta.items()) + "</p>")
    parts.append(f"<p>{e(_definitions(metrics.config))}</p>")
    parts.append("<h2>Results beside the paper's Table 1</h2><table><tr><th>Subset</th><th>Model</th>"
                 + "".join(f"<th>{h}</th>" for h in _HEADERS) + "</tr>")
    for subset, model, cells in _table_rows(metrics, "this run", reference):
        cls = " class='paper'" if model.startswith("CUDA Agent") else ""
        parts.append(f"<tr{cls}><td>{e(subset)}</td><td>{e(model)}</td>"
                     + "".join(f"<td class='num'>{e(c)}</td>" for c in cells) + "</tr>")
    parts.append("</table>")
    if reference is not None:
        parts.append(f"<p><small>Reference: {e(reference.source)}.</small></p>")
    ps = list(metrics.config.fast_p)
    parts.append("<h2>fast_p</h2><table><tr><th>Subset</th><th>vs</th>"
                 + "".join(f"<th>p={p:g}</th>" for p in ps) + "</tr>")
    for group in (metrics.overall, *metrics.levels):
        for versus, values in (("compile", group.fast_p_vs_compile), ("eager", group.fast_p_vs_eager)):
            parts.append(f"<tr><td>{e(group.name)}</td><td>{versus}</td>"
                         + "".join(f"<td class='num'>{_pct(values[p])}</td>" for p in ps) + "</tr>")
    parts.append("</table>")
    for index, (title, png) in enumerate(figures.items()):
        data = base64.b64encode(png).decode()
        parts.append(f"<h2>{e(title)}</h2><img class='figure' id='figure-{index}' alt='{e(title)}' "
                     f"src='data:image/png;base64,{data}'>")
    parts.append("<h2>Tasks</h2><table><tr><th>Task</th><th>Level</th><th>Stage</th><th>Correct</th><th>vs eager</th>"
                 "<th>vs compile</th><th>eager ms</th><th>compile ms</th><th>kernel ms</th><th>Kernel</th>"
                 "<th>Trajectory</th><th>Note</th></tr>")
    for o in _task_rows(list(results.outcomes), results.missing, results.tasks):
        kernel, traj = link(o.solution), link(o.trajectory)
        note = ", ".join(o.rules_fired) or o.error
        row_class = "" if o.correct else " class='bad'"
        kernel_cell = f"<a href='{e(kernel)}'>kernel</a>" if kernel else ""
        traj_cell = f"<a href='{e(traj)}'>trajectory</a>" if traj else ""
        parts.append(
            f"<tr{row_class}><td>{e(o.task_id)}</td>"
            f"<td>{'' if o.level is None else o.level}</td><td>{e(o.stage)}</td><td>{'yes' if o.correct else 'no'}</td>"
            f"<td class='num'>{_x(o.speedup_vs_eager) if o.correct else ''}</td>"
            f"<td class='num'>{_x(o.speedup_vs_compile) if o.correct else ''}</td>"
            f"<td class='num'>{_ms(o.eager_ms)}</td><td class='num'>{_ms(o.compile_ms)}</td>"
            f"<td class='num'>{_ms(o.candidate_ms)}</td><td>{kernel_cell}</td><td>{traj_cell}</td>"
            f"<td>{e(note[:300])}</td></tr>"
        )
    parts.append("</table><p id='image-check' data-loaded='none'></p>")
    parts.append(_IMAGE_CHECK + "</body></html>")
    return "\n".join(parts) + "\n"


def write_report(
    results: BenchResults,
    out_dir: str | Path,
    *,
    config: MetricsConfig | None = None,
    reference: ReferenceTable | None = None,
    with_reference: bool = True,
    link_base: str | Path | None = None,
    plots: bool = True,
) -> ReportFiles:
    """Compute the metrics and write ``report.md`` (figures beside it), ``report.html`` and ``metrics.json``.

    ``link_base``: the folder that outcomes' ``solution``/``trajectory`` paths are relative to (links in the report
    are made relative to ``out_dir``). Raises `ConfigError` when matplotlib is missing and ``plots`` is on.
    """
    from cuda_agent.bench import plots as figs

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    metrics = compute_metrics(results.outcomes, results.tasks, config)
    reference = (reference or paper_table()) if with_reference else None
    pngs: dict[str, bytes] = {}
    if plots:
        pngs["Speedup distributions per level"] = figs.speedup_distributions(list(results.outcomes), metrics)
        pngs["fast_p curves"] = figs.fast_p_curves(list(results.outcomes), metrics)
    figure_paths: list[Path] = []
    for index, (title, png) in enumerate(pngs.items()):
        path = out_dir / ("speedups.png" if index == 0 else "fast_p.png")
        path.write_bytes(png)
        figure_paths.append(path)
    base = Path(link_base).resolve() if link_base is not None else None
    resolved_out = out_dir.resolve()

    def link(path: str | None) -> str | None:
        return _link(path, base, resolved_out)

    md = render_markdown(results, metrics, reference=reference,
                         figures={t: p.name for t, p in zip(pngs, figure_paths)}, link=link)
    page = render_html(results, metrics, reference=reference, figures=pngs, link=link)
    md_path, html_path, metrics_path = out_dir / "report.md", out_dir / "report.html", out_dir / "metrics.json"
    md_path.write_text(md)
    html_path.write_text(page)
    metrics_path.write_text(json.dumps({"name": results.name, **metrics.to_dict()}, indent=1) + "\n")
    return ReportFiles(md_path, html_path, metrics_path, tuple(figure_paths))
