"""One agent episode on a GPU, driven by the bundled scripted policy: the end-to-end check of the agent loop.

The script (src/cuda_agent/agent/examples/scaled_silu_script.json) reads the task, writes a slow-but-correct
kernel (few threads, uncoalesced), builds it from bash through the sandbox's `cuda-agent build`, verifies and
profiles it, then writes a fused vectorised kernel, builds, profiles and submits. The episode must keep the faster
kernel as its best and end with a reward of at least 1.

Writes benchmarks/results/agent_episode.json (turns, reward, best_speedup_vs_compile, ...) and the episode log under
benchmarks/logs/agent_episode/ (trajectory.jsonl, report.md, result.json, best/). About a minute on an H200 (the
first torch.compile of the task dominates); exits 1 if the checks fail.

    PYTHONPATH=src python3 benchmarks/agent_episode.py [--sandbox auto|bwrap|local] [--out benchmarks/logs/agent_episode]
"""
from __future__ import annotations

import argparse
import logging
import shutil
import sys
import time
from pathlib import Path

from cuda_agent.agent import AgentEnv, EnvConfig, LocalBackend, ScriptedPolicy, StepInfo, run_episode, write_outputs
from cuda_agent.agent.examples import example_dir, example_script_path, example_task
from benchmarks_io import write_result
from cuda_agent.compiler.toolchain import cuda_available


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sandbox", default="auto", choices=("auto", "bwrap", "local"))
    parser.add_argument("--out", type=Path, default=Path("benchmarks/logs/agent_episode"))
    parser.add_argument("--eval-mode", default="strict", choices=("strict", "relaxed"))
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    if not cuda_available():
        print("agent_episode needs a CUDA GPU (verification and profiling run on it)", file=sys.stderr)
        return 2
    from cuda_agent.evaluator import EvalConfig

    if args.out.exists():
        shutil.rmtree(args.out)
    args.out.mkdir(parents=True)
    task = example_task()
    backend = LocalBackend(verify="gpu", eval_config=EvalConfig(mode=args.eval_mode))
    env = AgentEnv(EnvConfig.for_evaluation(sandbox=args.sandbox, verify="gpu", max_wall_s=170.0), backend)
    started = time.perf_counter()

    def progress(info: StepInfo) -> None:
        evals = ", ".join(f"{e.stage} vs compile {e.speedup_compile}" for e in info.evaluations)
        print(f"turn {info.turn:2d} {info.tool:8s} ok={info.ok} {evals}", flush=True)

    try:
        result = run_episode(task, ScriptedPolicy.from_file(example_script_path()), env,
                             trajectory=args.out / "trajectory.jsonl", progress=progress)
    finally:
        backend.close()
    seconds = time.perf_counter() - started
    write_outputs(result, args.out)

    profiles = [e for e in result.evaluations if e.speedup_compile is not None]
    fast_source = (example_dir() / "scaled_silu_fast.cu").read_text()
    kept_faster = result.best is not None and result.best.files.get("kernels/scaled_silu.cu") == fast_source
    slow = profiles[0].speedup_compile if profiles else 0.0
    best = result.best.speedup_vs_compile if result.best else 0.0
    metrics = {
        "turns": result.turns,
        "reward": result.reward,
        "best_speedup_vs_compile": best,
        "best_speedup_vs_eager": (result.best.result.speedup_eager or 0.0) if result.best else 0.0,
        "slow_kernel_speedup_vs_compile": slow,
        "kept_faster_kernel": int(kept_faster),
        "evaluations": len(result.evaluations),
        "episode_s": round(seconds, 2),
    }
    path = write_result("agent_episode", metrics, command="PYTHONPATH=src python3 benchmarks/agent_episode.py",
                        extra={"reason": result.reason, "log": str(args.out)})
    ok = result.reason == "submitted" and kept_faster and result.reward >= 1 and best > slow
    print(f"agent_episode: {result.reason} after {result.turns} turns in {seconds:.1f} s; reward {result.reward:g}; "
          f"slow kernel {slow:.3f}x, best {best:.3f}x vs torch.compile; kept the faster kernel: {kept_faster}; "
          f"{'OK' if ok else 'FAILED'} -> {path}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
