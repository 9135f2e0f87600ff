"""Profile repeatability and the baseline cache, on a GPU, for a few level-1 KernelBench tasks.

For each task: the eager and ``torch.compile`` baselines are measured through `BaselineCache.get_or_measure` into
an empty cache (a miss: compile + timing) and read again (a hit); then eager and compiled are profiled ten times
each with the evaluator's timer, and the coefficient of variation of the ten eager/compile speedups is reported.
The speed-of-light fractions of both baselines are reported too (they must stay at or below 1).

Needs a CUDA GPU and the KernelBench folder (`cuda_agent.locations.kernelbench_root`); about 2 minutes on an H200.
Writes benchmarks/results/profile.json.

    PYTHONPATH=src python3 benchmarks/profile_repeatability.py [--repeats 10] [--budget-s 110]
"""
from __future__ import annotations

import argparse
import logging
import statistics
import sys
import tempfile
import time
from typing import Any

import torch

from benchmarks_io import write_result
from cuda_agent.evaluator.baselines import (BaselineCache, baseline_key, environment_key_parts,
                                            measure_baselines)
from cuda_agent.evaluator.speed_of_light import estimate, fraction_of_floor, gpu_spec
from cuda_agent.evaluator.timing import time_forward
from cuda_agent.tasks import exec_module, load_task_file
from cuda_agent.locations import kernelbench_root

TASKS = (
    ("relu", "19_ReLU.py"),
    ("softmax", "23_Softmax.py"),
    ("matmul", "1_Square_matrix_multiplication_.py"),
    ("sum", "47_Sum_reduction_over_a_dimension.py"),
)
SETS = 2
WARMUP, REPS = 5, 50


def _build(path: Any, seed: int) -> tuple[Any, torch.nn.Module, list[list[Any]]]:
    task = load_task_file(path, source="kernelbench", level=1, validate=False)
    module = exec_module(task.code, str(path))
    with torch.device("cuda"):
        torch.manual_seed(seed)
        model = module.Model(*module.get_init_inputs()).eval()
        sets = []
        for k in range(SETS):
            torch.manual_seed(seed + k)
            sets.append(list(module.get_inputs()))
    return task, model, sets


def _one_task(short: str, path: Any, cache: BaselineCache, repeats: int, spec: Any) -> dict[str, float]:
    task, model, sets = _build(path, seed=1234)
    parts = environment_key_parts()
    key = baseline_key(task.code_hash, parts["gpu_name"] or "", parts["torch_version"] or "", parts["cuda_version"],
                       {"warmup": WARMUP, "reps": REPS, "sets": SETS})
    t0 = time.perf_counter()
    base, hit = cache.get_or_measure(key, lambda: measure_baselines(model, sets, warmup=WARMUP, reps=REPS, key=key))
    miss_s = time.perf_counter() - t0
    assert not hit, "the cache was not empty"
    t0 = time.perf_counter()
    again, hit = cache.get_or_measure(key, lambda: measure_baselines(model, sets, warmup=WARMUP, reps=REPS, key=key))
    hit_s = time.perf_counter() - t0
    assert hit and again == base

    compiled = torch.compile(model)
    with torch.no_grad():
        for s in sets:
            compiled(*s)
    speedups, eager_ms, compile_ms, pair_s = [], [], [], []
    for _ in range(repeats):
        t0 = time.perf_counter()
        e = time_forward(model, sets, warmup=WARMUP, reps=REPS)
        c = time_forward(compiled, sets, warmup=WARMUP, reps=REPS)
        pair_s.append(time.perf_counter() - t0)
        eager_ms.append(e.median_ms)
        compile_ms.append(c.median_ms)
        speedups.append(e.median_ms / c.median_ms)
    with torch.no_grad():
        sol = estimate(model, sets[0], None, spec)
    cv = statistics.stdev(speedups) / statistics.mean(speedups)
    return {
        f"speedup_cv_{short}": cv,
        f"speedup_{short}": statistics.median(speedups),
        f"eager_cv_{short}": statistics.stdev(eager_ms) / statistics.mean(eager_ms),
        f"compile_cv_{short}": statistics.stdev(compile_ms) / statistics.mean(compile_ms),
        f"eager_ms_{short}": statistics.median(eager_ms),
        f"compile_ms_{short}": statistics.median(compile_ms),
        f"profile_pair_s_{short}": statistics.median(pair_s),
        f"cache_miss_s_{short}": miss_s,
        f"cache_hit_s_{short}": hit_s,
        f"compile_s_{short}": base.compile_s,
        f"sol_floor_ms_{short}": sol.floor_ms,
        f"sol_fraction_eager_{short}": fraction_of_floor(statistics.median(eager_ms), sol),
        f"sol_fraction_compile_{short}": fraction_of_floor(statistics.median(compile_ms), sol),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=10, help="profiles per task")
    parser.add_argument("--budget-s", type=float, default=110.0, help="start no new task after this many seconds")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    if not torch.cuda.is_available():
        sys.exit("profile_repeatability: needs a CUDA GPU")
    root = kernelbench_root()
    if root is None:
        sys.exit("profile_repeatability: KernelBench not found; set CUDA_AGENT_KERNELBENCH")
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    spec = gpu_spec()
    started = time.perf_counter()
    metrics: dict[str, float] = {}
    done: list[str] = []
    with tempfile.TemporaryDirectory(prefix="ca_baselines_") as cache_dir:
        cache = BaselineCache(cache_dir)
        for short, name in TASKS:
            if time.perf_counter() - started > args.budget_s:
                print(f"budget spent; skipping {short}")
                continue
            t0 = time.perf_counter()
            metrics.update(_one_task(short, root / "level1" / name, cache, args.repeats, spec))
            done.append(short)
            torch._dynamo.reset()
            torch.cuda.empty_cache()
            print(f"{short:8s} speedup {metrics[f'speedup_{short}']:.3f} cv {metrics[f'speedup_cv_{short}']:.4f} "
                  f"miss {metrics[f'cache_miss_s_{short}']:.1f}s hit {1e3 * metrics[f'cache_hit_s_{short}']:.2f}ms "
                  f"sol eager {metrics[f'sol_fraction_eager_{short}']:.2f} ({time.perf_counter() - t0:.0f}s)")
    cvs = [metrics[f"speedup_cv_{s}"] for s in done]
    misses = [metrics[f"cache_miss_s_{s}"] for s in done]
    hits = [metrics[f"cache_hit_s_{s}"] for s in done]
    summary = {
        "speedup_cv": max(cvs),
        "speedup_cv_mean": statistics.mean(cvs),
        "cache_miss_s": statistics.median(misses),
        "cache_hit_s": statistics.median(hits),
        "cache_speedup": statistics.median(misses) / max(statistics.median(hits), 1e-9),
        "n_tasks": len(done),
        "repeats": args.repeats,
        "total_s": time.perf_counter() - started,
    }
    path = write_result("profile", {**summary, **metrics}, extra={
        "tasks": done, "gpu_spec": spec.to_dict(),
        "what": "speedup_cv: max over tasks of the CV of eager/compile speedups profiled `repeats` times; cache "
                "miss = measure eager + torch.compile baselines into an empty cache, hit = read them back",
    })
    print(f"speedup_cv={summary['speedup_cv']:.4f} (mean {summary['speedup_cv_mean']:.4f}) "
          f"cache miss {summary['cache_miss_s']:.1f}s vs hit {1e3 * summary['cache_hit_s']:.2f}ms "
          f"({summary['n_tasks']} tasks, {summary['total_s']:.0f}s) -> {path}")


if __name__ == "__main__":
    main()
