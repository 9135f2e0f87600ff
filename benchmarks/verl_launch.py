"""How far the four verl stages get on this machine, with verl's real entry points and a tiny model.

For each stage (warmup, rft, critic, ppo): `cuda-agent train <stage> --dry-run`'s code path writes the verl config
(configs/rl/<stage>.yaml with overrides for one GPU, 1,024-token prompts and responses, one step), verl's own
validation runs on it (`cuda_agent.rl.launch_check.validate_stage`), and the stage's launch command runs on a local
Ray (``main_ppo``) or under torchrun (the SFT trainer) until it stops. On a CPU each should stop at its first step
that needs a GPU (`cuda_agent.rl.launch_check` names the steps). Must run in verl's environment:

    bash scripts/setup.sh --rl
    PYTHONPATH=src .venv-rl/bin/python benchmarks/verl_launch.py [--work /tmp/cuda-agent-verl-launch]

Writes benchmarks/results/verl_launch.json and the launch logs under benchmarks/logs/verl_launch/.
"""
from __future__ import annotations

import argparse
import datetime as dt
import json
import logging
import platform
import shutil
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "rl"))  # the tiny run's model and configs (tiny_run.py) live with the tests
RESULT = REPO / "benchmarks" / "results" / "verl_launch.json"
LOGS = REPO / "benchmarks" / "logs" / "verl_launch"


def machine() -> str:
    import os

    memory_gb = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return f"{platform.machine()} {os.cpu_count()} cores, {memory_gb:.0f} GB, no GPU, Python {platform.python_version()}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", type=Path, default=Path("/tmp/cuda-agent-verl-launch"))
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds per launch")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)

    from importlib import metadata

    from tiny_run import prepare

    from cuda_agent.rl import launch_check, verl_env
    from cuda_agent.rl.stages import run_stage

    problems = verl_env.problems()
    if problems:
        print(f"not verl's environment: {'; '.join(problems)}; run it with .venv-rl/bin/python", file=sys.stderr)
        return 2
    shutil.rmtree(args.work, ignore_errors=True)
    shutil.rmtree(LOGS, ignore_errors=True)
    started = time.monotonic()
    configs = prepare(args.work, REPO / "configs" / "rl")
    prepare_s = time.monotonic() - started
    stages = {}
    for stage, cfg in configs.items():
        t0 = time.monotonic()
        result = run_stage(cfg, dry_run=True)
        config_path = Path(result.files["verl_config"])
        try:
            details = launch_check.validate_stage(stage, config_path)
            valid, error = True, ""
        except Exception as exc:  # verl's validation raises assertion, value and config errors alike
            details, valid, error = {}, False, f"{type(exc).__name__}: {exc}"
        validate_s = time.monotonic() - t0
        run = launch_check.launch(result.command, LOGS / f"{stage}.log", timeout_s=args.timeout)
        stages[stage] = {
            "config_valid": valid, "validation_error": error, "validation_seconds": round(validate_s, 1),
            "validation": {k: v for k, v in details.items() if k != "tools"},
            "entry_point": run.entry, "launched_to": run.launched_to,
            "stopped_at_first_gpu_step": run.at_first_gpu_step, "stop_reason": run.reason,
            "returncode": run.returncode, "seconds": round(run.seconds, 1),
            "command": " ".join(result.command[1:] if result.command[0] == sys.executable else result.command),
            "log": str(run.log.relative_to(REPO)),
        }
        print(f"{stage}: valid={valid} launched_to={run.launched_to} ({run.seconds:.0f} s) {run.reason}", flush=True)
    report = {
        "machine": machine(),
        "date": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "command": "PYTHONPATH=src .venv-rl/bin/python benchmarks/verl_launch.py",
        "versions": {name: metadata.version(name) for name in
                     ("verl", "torch", "transformers", "tensordict", "ray", "transferqueue")},
        "cpu_overrides": list(launch_check.CPU_OVERRIDES),
        "prepare_seconds": round(prepare_s, 1),
        "metrics": {
            "stages_valid": sum(s["config_valid"] for s in stages.values()),
            "stages_launched": sum(s["stopped_at_first_gpu_step"] for s in stages.values()),
            "total_seconds": round(time.monotonic() - started, 1),
        },
        "stages": stages,
    }
    RESULT.write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report["metrics"]))
    return 0 if report["metrics"]["stages_launched"] == len(stages) else 1


if __name__ == "__main__":
    sys.exit(main())
