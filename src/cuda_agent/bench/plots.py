"""Report figures as PNG bytes: speedup distributions per level and fast_p curves. matplotlib is imported lazily
(it is an optional dependency: ``pip install matplotlib``), with the non-interactive Agg backend."""
from __future__ import annotations

import io
from typing import Any, Sequence

from cuda_agent.bench.metrics import BenchMetrics, fast_p, level_name
from cuda_agent.bench.outcome import TaskOutcome
from cuda_agent.errors import ConfigError


def _pyplot() -> Any:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as exc:
        raise ConfigError("report figures need matplotlib: pip install 'cuda-agent[bench]'") from exc
    return plt


def _png(fig: Any) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
    _pyplot().close(fig)
    return buf.getvalue()


def _by_level(outcomes: Sequence[TaskOutcome], levels: Sequence[int | None]) -> dict[int | None, list[TaskOutcome]]:
    groups: dict[int | None, list[TaskOutcome]] = {lv: [] for lv in levels}
    for o in outcomes:
        if o.level in groups:
            groups[o.level].append(o)
    return groups


def speedup_distributions(outcomes: Sequence[TaskOutcome], metrics: BenchMetrics) -> bytes:
    """Histograms (log-spaced bins) of the speedup vs torch.compile and vs eager of correct kernels, one panel per
    level, with 1x and the "faster" threshold marked."""
    plt = _pyplot()
    levels = [g.level for g in metrics.levels]
    groups = _by_level(outcomes, levels)
    fig, axes = plt.subplots(len(levels), 1, figsize=(7.5, 2.4 * len(levels) + 0.4), squeeze=False)
    values = [s for o in outcomes if o.correct for s in (o.speedup_vs_compile, o.speedup_vs_eager) if s]
    lo = min([0.5, *values]) if values else 0.5
    hi = max([4.0, *values]) if values else 4.0
    bins = [lo * (hi / lo) ** (i / 30) for i in range(31)]
    for ax, level in zip(axes[:, 0], levels):
        group = groups[level]
        vs_compile = [o.speedup_vs_compile for o in group if o.correct and o.speedup_vs_compile]
        vs_eager = [o.speedup_vs_eager for o in group if o.correct and o.speedup_vs_eager]
        ax.hist(vs_eager, bins=bins, alpha=0.55, label=f"vs eager (n={len(vs_eager)})", color="#4c72b0")
        ax.hist(vs_compile, bins=bins, alpha=0.55, label=f"vs torch.compile (n={len(vs_compile)})", color="#dd8452")
        ax.axvline(1.0, color="black", linewidth=0.8)
        ax.axvline(metrics.config.faster_threshold, color="gray", linestyle="--", linewidth=0.8)
        ax.set_xscale("log")
        ax.set_ylabel("kernels")
        incorrect = sum(1 for o in group if not o.correct)
        ax.set_title(f"{level_name(level)}: {len(group)} attempted, {incorrect} incorrect", fontsize=10)
        ax.legend(fontsize=8, loc="upper right")
    axes[-1, 0].set_xlabel("speedup (x, log scale); solid line 1x, dashed the 'faster' threshold")
    fig.tight_layout()
    return _png(fig)


def fast_p_curves(outcomes: Sequence[TaskOutcome], metrics: BenchMetrics) -> bytes:
    """KernelBench's fast_p as a function of p, per level and overall, vs torch.compile and vs eager."""
    plt = _pyplot()
    ps = [0.0] + [10 ** (-1 + 2 * i / 80) for i in range(81)]
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.6), sharey=True)
    groups = _by_level(outcomes, [g.level for g in metrics.levels])
    series = [(level_name(g.level), groups[g.level], g.tasks) for g in metrics.levels]
    series.append(("Overall", [o for g in groups.values() for o in g], metrics.overall.tasks))
    for ax, versus in zip(axes, ("compile", "eager")):
        for label, group, n in series:
            ax.plot([max(p, 0.1) for p in ps], [fast_p(group, n, p, versus=versus) for p in ps], label=label,
                    linewidth=2.0 if label == "Overall" else 1.2)
        ax.axvline(1.0, color="black", linewidth=0.8)
        ax.set_xscale("log")
        ax.set_ylim(0, 1.02)
        ax.set_xlabel("p (speedup threshold, log scale)")
        ax.set_title(f"fast_p vs {'torch.compile' if versus == 'compile' else 'eager'}", fontsize=10)
        ax.grid(True, alpha=0.3)
    axes[0].set_ylabel("fraction of tasks correct and faster than p")
    axes[1].legend(fontsize=8)
    fig.tight_layout()
    return _png(fig)

