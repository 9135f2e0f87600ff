"""Benchmarks: runs of a policy over task sets, offline scoring of existing kernels, baselines, the paper's metrics,
and Markdown/HTML reports. Heavy pieces (matplotlib, the evaluator, the agent) are imported lazily."""
from cuda_agent.bench.metrics import BenchMetrics, GroupMetrics, MetricsConfig, compute_metrics, fast_p, geomean
from cuda_agent.bench.outcome import TaskOutcome, best_per_task, failed, level_of
from cuda_agent.bench.reference import ReferenceRow, ReferenceTable, paper_table

__all__ = [
    "BenchMetrics",
    "GroupMetrics",
    "MetricsConfig",
    "ReferenceRow",
    "ReferenceTable",
    "TaskOutcome",
    "best_per_task",
    "compute_metrics",
    "failed",
    "fast_p",
    "geomean",
    "level_of",
    "paper_table",
]
