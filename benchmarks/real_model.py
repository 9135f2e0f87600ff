"""A real model end to end on a CPU: Qwen2.5-Coder-1.5B-Instruct (GGUF Q4_K_M) served by llama.cpp on 127.0.0.1
drives `cuda-agent optimize` on a few KernelBench level-1 tasks, and writes single-turn solutions (the RL warm-up
prompt) for a fixed subset of KernelBench; both are saved for `cuda-agent bench offline` to score on a GPU host.

Phases (each resumable; ``all`` runs them in order):

    speed        generation tokens/s of the served model on this CPU (a short prompt, a fixed-length answer)
    agent        `cuda-agent optimize TASK --verify skip` per agent task, small turn budgets; kept: the trajectory,
                 result.json, report.md and the final workspace state as benchmarks/real_model/agent/solutions/<key>/
    single-turn  `cuda-agent bench single-turn` over SINGLE_TURN_TASKS into benchmarks/real_model/single_turn/
    result       benchmarks/results/real_model.json from what the phases saved
    score        on a GPU host: `cuda-agent bench offline` over both saved solution folders (resumable: run it again
                 if it is cut off), the reports with plots in benchmarks/real_model/*/scored/, and the GPU metrics
                 (single_turn_pass_rate, ..., geomean_vs_compile) written into real_model.json. With --standin it
                 checks the same pipeline on a CPU (stand-in evaluator, results in a temp folder, nothing written)

Needs: the GGUF (scripts/fetch_test_model.sh), a Python with llama-cpp-python[server] ($CUDA_AGENT_LLAMA_PYTHON;
scripts/install_llama_server.sh makes one),
nvcc, and KernelBench ($CUDA_AGENT_KERNELBENCH).

    CUDA_AGENT_LLAMA_PYTHON=.llm-venv/bin/python CUDA_AGENT_KERNELBENCH=../shared/kernelbench \
        PYTHONPATH=src python3 benchmarks/real_model.py all
"""
from __future__ import annotations

import argparse
import json
import logging
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from cuda_agent.agent.local_server import LocalModelServer, LocalServerConfig, default_model_path
from benchmarks_io import machine_description

log = logging.getLogger("real_model")

AGENT_TASKS = ("L1/19_ReLU", "L1/22_Tanh", "L1/100_HingeLoss")
# Two runs of the agent tasks: the environment as it is, and with submit refused until something has built (the
# 1.5B model submitted in its first reply, before writing any file, in every episode of the plain run).
AGENT_VARIANTS = {"agent_plain": (), "agent": ("--require-build-before-submit",)}
SINGLE_TURN_TASKS = (
    # level 1: elementwise, reductions, a matmul, a norm, a loss
    "L1/19_ReLU", "L1/21_Sigmoid", "L1/22_Tanh", "L1/23_Softmax", "L1/25_Swish",
    "L1/1_Square_matrix_multiplication_", "L1/36_RMSNorm_", "L1/100_HingeLoss",
    # level 2: a GEMM or a convolution followed by elementwise epilogues
    "L2/29_Matmul_Mish_Mish", "L2/99_Matmul_GELU_Softmax", "L2/63_Gemm_ReLU_Divide", "L2/57_Conv2d_ReLU_HardSwish",
    "L2/59_Matmul_Swish_Scaling", "L2/56_Matmul_Sigmoid_Sum", "L2/12_Gemm_Multiply_LeakyReLU",
    "L2/1_Conv2D_ReLU_BiasAdd",
    # level 3: small networks
    "L3/1_MLP", "L3/2_ShallowWideMLP", "L3/3_DeepNarrowMLP", "L3/13_DenseNet121TransitionLayer",
    "L3/31_VisionAttention",
)
ROOT = Path("benchmarks/real_model")
RUNS = Path("runs/real_model")
CTX = 16384
MODEL_NAME = "qwen2.5-coder-1.5b-instruct-q4_k_m"


def _cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "cuda_agent.cli.main", *args]


def _shown(args: list[str]) -> str:
    return "cuda-agent " + " ".join(shlex.quote(a) for a in args[3:])


def phase_speed(server: LocalModelServer, out: Path) -> dict:
    """Generation speed: a short prompt (about 40 tokens, so prompt processing is negligible), a 128-token answer."""
    body = {"model": server.model_name, "temperature": 0.0, "max_tokens": 128, "messages": [
        {"role": "user", "content": "Write a long C++ comment describing, step by step, how a CUDA kernel adds two "
                                    "float vectors. Do not stop early."}]}
    runs = []
    for _ in range(1):
        request = urllib.request.Request(server.base_url + "/chat/completions", data=json.dumps(body).encode(),
                                         headers={"Content-Type": "application/json"})
        started = time.monotonic()
        with urllib.request.urlopen(request, timeout=900) as response:
            data = json.loads(response.read().decode())
        seconds = time.monotonic() - started
        tokens = int(data["usage"]["completion_tokens"])
        runs.append({"completion_tokens": tokens, "prompt_tokens": int(data["usage"]["prompt_tokens"]),
                     "seconds": round(seconds, 2), "tokens_per_s": round(tokens / seconds, 2)})
        log.info("speed: %s", runs[-1])
    result = {"runs": runs, "tokens_per_s": max(r["tokens_per_s"] for r in runs)}
    out.write_text(json.dumps(result, indent=1) + "\n")
    return result


def phase_agent(server: LocalModelServer, max_turns: int, max_completion: int) -> None:
    for variant, flags in AGENT_VARIANTS.items():
        for task_id in AGENT_TASKS:
            _episode(server, variant, flags, task_id, max_turns, max_completion)


def _episode(server: LocalModelServer, variant: str, flags: tuple[str, ...], task_id: str, max_turns: int,
             max_completion: int) -> None:
    key = task_id.replace("/", "_")
    saved = ROOT / variant / key
    if (saved / "episode.json").is_file():
        log.info("%s %s: done already", variant, task_id)
        return
    run_dir = RUNS / variant / key
    if run_dir.exists():
        shutil.rmtree(run_dir)
    args = _cli("optimize", task_id, "--base-url", server.base_url, "--model", server.model_name,
                "--verify", "skip", "--max-turns", str(max_turns), "--context-tokens", str(CTX),
                "--max-completion-tokens", str(max_completion), "--temperature", "0.2", "--max-wall", "1500",
                "--request-timeout", "1800", *flags,
                "--out", str(run_dir))
    log.info("%s %s: %s", variant, task_id, _shown(args))
    started = time.monotonic()
    proc = subprocess.run(args, capture_output=True, text=True, timeout=2400)
    seconds = time.monotonic() - started
    saved.mkdir(parents=True, exist_ok=True)
    (saved / "console.log").write_text(proc.stdout + proc.stderr)
    result_path = run_dir / "result.json"
    crashed = proc.returncode != 0 or not result_path.is_file()
    for name in ("trajectory.jsonl", "result.json", "report.md"):
        if (run_dir / name).is_file():
            shutil.copy(run_dir / name, saved / name)
    final = run_dir / "final" / key
    if final.is_dir():
        target = ROOT / variant / "solutions" / key
        if target.exists():
            shutil.rmtree(target)
        shutil.copytree(final, target)
    result = json.loads(result_path.read_text()) if result_path.is_file() else {}
    episode = {"task": task_id, "variant": variant, "command": _shown(args), "exit_code": proc.returncode,
               "crashed": crashed, "seconds": round(seconds, 1), "reason": result.get("reason"),
               "turns": result.get("turns"), "malformed_tool_calls": result.get("malformed_tool_calls"),
               "usage": result.get("usage"),
               "builds": _builds(saved / "trajectory.jsonl"), "workspace": result.get("workspace")}
    (saved / "episode.json").write_text(json.dumps(episode, indent=1) + "\n")
    log.info("%s %s: %s", variant, task_id, episode)


def _builds(trajectory: Path) -> dict:
    """Build attempts of an episode: succeeded, failed, and those where nvcc ran (not refused before compiling,
    e.g. for want of any kernel file)."""
    ok = failed = nvcc = 0
    if trajectory.is_file():
        for line in trajectory.read_text().splitlines():
            record = json.loads(line)
            for res in record.get("results", []):
                build = res.get("info", {}).get("build")
                if build:
                    ok, failed = ok + bool(build.get("ok")), failed + (not build.get("ok"))
                    nvcc += bool(build.get("compiled") or build.get("log"))
    return {"ok": ok, "failed": failed, "nvcc_ran": nvcc}


def _replies(saved: Path) -> dict:
    """The model's replies in an episode: all, those cut at the completion limit, those without any tool call."""
    path = saved / "trajectory.jsonl"
    records = [json.loads(line) for line in path.read_text().splitlines()] if path.is_file() else []
    turns = [r for r in records if r.get("type") == "turn"]
    return {"replies": len(turns), "cut": sum(r.get("finish_reason") == "length" for r in turns),
            "no_tool_call": sum(not r["messages"][0].get("tool_calls") for r in turns)}


def phase_single_turn(server: LocalModelServer, max_tokens: int) -> None:
    args = _cli("bench", "single-turn", "--tasks", "kernelbench", "--ids", ",".join(SINGLE_TURN_TASKS),
                "--out", str(ROOT / "single_turn"), "--base-url", server.base_url, "--model", server.model_name,
                "--max-tokens", str(max_tokens), "--temperature", "0", "--timeout", "3600")
    log.info("single-turn: %s", _shown(args))
    subprocess.run(args, check=True, timeout=4 * 3600)


SCORED = {"single_turn": (SINGLE_TURN_TASKS, "Qwen2.5-Coder-1.5B-Instruct (single turn)"),
          "agent": (AGENT_TASKS, "Qwen2.5-Coder-1.5B-Instruct (agent, final workspaces)"),
          "agent_plain": (AGENT_TASKS, "Qwen2.5-Coder-1.5B-Instruct (agent, plain environment, final workspaces)")}


def _score_args(kind: str, out: Path) -> list[str]:
    ids, name = SCORED[kind]
    return _cli("bench", "offline", "--solutions", str(ROOT / kind / "solutions"), "--tasks", "kernelbench",
                "--ids", ",".join(ids), "--out", str(out), "--name", name)


def phase_score(standin: bool) -> dict:
    """Score both solution folders with `bench offline`; return the metrics, and (not ``standin``) write them
    into benchmarks/results/real_model.json."""
    import tempfile

    from cuda_agent.bench import MetricsConfig, compute_metrics
    from cuda_agent.bench.results import load_results

    found: dict[str, dict] = {}
    base = Path(tempfile.mkdtemp(prefix="real-model-score-")) if standin else ROOT
    for kind in SCORED:
        out = base / kind / "scored"
        args = _score_args(kind, out) + (["--standin", "--store", f"sqlite:///{base}/store.db"] if standin else [])
        log.info("score %s: %s", kind, _shown(args))
        subprocess.run(args, check=True, timeout=3600)
        results = load_results(out / "results.json")
        overall = compute_metrics(results.outcomes, results.tasks, MetricsConfig()).overall
        found[kind] = {"pass_rate": overall.pass_rate, "faster_than_eager": overall.faster_than_eager_rate,
                       "faster_than_compile": overall.faster_than_compile_rate,
                       "geomean_vs_eager": overall.geomean_speedup_vs_eager,
                       "geomean_vs_compile": overall.geomean_speedup_vs_compile, "correct": overall.correct,
                       "tasks": overall.tasks, "report": str(out / "report.md"),
                       "command": _shown(_score_args(kind, out))}
    log.info("scored: %s", found)
    if standin:
        return found
    path = Path("benchmarks/results/real_model.json")
    record = json.loads(path.read_text())
    single = found["single_turn"]
    record["metrics"].update({
        "single_turn_pass_rate": single["pass_rate"], "single_turn_faster_than_eager": single["faster_than_eager"],
        "single_turn_faster_than_compile": single["faster_than_compile"],
        "geomean_vs_compile": single["geomean_vs_compile"], "agent_pass_rate": found["agent"]["pass_rate"],
        "agent_plain_pass_rate": found["agent_plain"]["pass_rate"]})
    record["scored"] = {"machine": machine_description(), "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                        "command": "PYTHONPATH=src python3 benchmarks/real_model.py score", **found}
    record.pop("pending_gpu", None)
    path.write_text(json.dumps(record, indent=2) + "\n")
    return found


def phase_result(model: Path) -> Path:
    sha_file = model.with_name(model.name + ".sha256")
    sha = sha_file.read_text().strip() if sha_file.is_file() else ""
    speed = json.loads((ROOT / "speed.json").read_text())
    episodes = [json.loads(p.read_text()) for variant in AGENT_VARIANTS
                for p in sorted((ROOT / variant).glob("*/episode.json"))]
    for episode in episodes:
        saved = ROOT / episode["variant"] / episode["task"].replace("/", "_")
        episode["builds"], episode["replies"] = _builds(saved / "trajectory.jsonl"), _replies(saved)
    generation = json.loads((ROOT / "single_turn" / "generation.json").read_text())
    summary = generation["summary"]
    record = {
        "name": "real_model",
        "machine": machine_description(),
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "command": "CUDA_AGENT_LLAMA_PYTHON=.llm-venv/bin/python CUDA_AGENT_KERNELBENCH=../shared/kernelbench "
                   "PYTHONPATH=src python3 benchmarks/real_model.py all",
        "model": "Qwen2.5-Coder-1.5B-Instruct, GGUF Q4_K_M (" + model.name + ")",
        "gguf_sha256": sha,
        "server": "llama-cpp-python[server] 0.3.36 (llama.cpp on the CPU, one thread) built from source by "
                  "scripts/install_llama_server.sh (the package index has no prebuilt wheel; Debian 12 has no llama.cpp "
                  f"package), the GGUF's own chat template, n_ctx {CTX}, on 127.0.0.1",
        "metrics": {
            "tokens_per_s": speed["tokens_per_s"],
            "tasks": len(SINGLE_TURN_TASKS),
            "single_turn_with_solution": summary["with_solution"],
            "single_turn_cut_at_max_tokens": summary["cut_at_max_tokens"],
            "agent_episodes": len(episodes),
            "agent_episode_crashes": sum(bool(e["crashed"]) for e in episodes),
            "malformed_tool_calls_handled": sum(int(e.get("malformed_tool_calls") or 0) for e in episodes),
            "agent_env_turns": sum(int(e.get("turns") or 0) for e in episodes),
            "agent_builds_ok": sum(e["builds"]["ok"] for e in episodes),
            "agent_builds_failed": sum(e["builds"]["failed"] for e in episodes),
            "agent_builds_nvcc_ran": sum(e["builds"]["nvcc_ran"] for e in episodes),
            "agent_model_replies": sum(e["replies"]["replies"] for e in episodes),
            "agent_replies_cut_at_max_tokens": sum(e["replies"]["cut"] for e in episodes),
            "agent_replies_without_tool_call": sum(e["replies"]["no_tool_call"] for e in episodes),
            "single_turn_pass_rate": None,
            "single_turn_faster_than_eager": None,
            "single_turn_faster_than_compile": None,
            "geomean_vs_compile": None,
        },
        "pending_gpu": {
            "note": "the single-turn pass rate, faster-than-eager/compile rates and geomean speedup need a GPU; "
                    "this CPU machine has none. They await scoring on the H200: `PYTHONPATH=src python3 "
                    "benchmarks/real_model.py score` (or `bash benchmarks/run_gpu_suite.sh realmodel`) runs the two "
                    "commands below, writes the reports with plots under benchmarks/real_model/*/scored/ and fills "
                    "these fields. KernelBench is found as for every bench command ($CUDA_AGENT_KERNELBENCH or "
                    "shared/kernelbench beside the checkout).",
            "score": "PYTHONPATH=src python3 benchmarks/real_model.py score",
            "score_single_turn": _shown(_score_args("single_turn", ROOT / "single_turn" / "scored")),
            "score_agent": _shown(_score_args("agent", ROOT / "agent" / "scored")),
            "score_agent_plain": _shown(_score_args("agent_plain", ROOT / "agent_plain" / "scored")),
        },
        "details": {
            "tasks": list(SINGLE_TURN_TASKS),
            "agent_tasks": list(AGENT_TASKS),
            "speed": speed,
            "single_turn": {k: v for k, v in summary.items() if k != "rows"},
            "single_turn_tokens_per_s_with_prompts": round(summary["completion_tokens"] / summary["seconds"], 2)
            if summary["seconds"] else None,
            "single_turn_command": generation.get("command"),
            "episodes": episodes,
        },
    }
    path = Path("benchmarks/results/real_model.json")
    path.write_text(json.dumps(record, indent=2) + "\n")
    return path


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("phase", choices=("speed", "agent", "single-turn", "result", "all", "score"))
    parser.add_argument("--standin", action="store_true", help="score: the stand-in evaluator (CPU pipeline check)")
    parser.add_argument("--model", type=Path, default=None, help="GGUF file (default: the fetched test model)")
    parser.add_argument("--threads", type=int, default=1, help="llama.cpp threads; on a shared 2-core machine one "
                        "thread generated 6.75 tokens/s where two managed 0.38 (threads waiting on each other)")
    parser.add_argument("--agent-turns", type=int, default=5)
    parser.add_argument("--agent-completion-tokens", type=int, default=512)
    parser.add_argument("--single-turn-tokens", type=int, default=800)
    args = parser.parse_args()
    # SIGTERM unwinds like Ctrl-C, so the model server (and a running episode) are stopped on the way out
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    model = args.model or default_model_path()
    ROOT.mkdir(parents=True, exist_ok=True)
    if args.phase == "result":
        print(phase_result(model))
        return 0
    if args.phase == "score":
        print(json.dumps(phase_score(args.standin), indent=1))
        return 0
    config = LocalServerConfig(model=model, ctx=CTX, threads=args.threads, model_name=MODEL_NAME,
                               log_path=RUNS / "server.log")
    os.environ.setdefault("CUDA_AGENT_LOG", "INFO")
    with LocalModelServer(config) as server:
        if args.phase in ("speed", "all"):
            phase_speed(server, ROOT / "speed.json")
        if args.phase in ("agent", "all"):
            phase_agent(server, args.agent_turns, args.agent_completion_tokens)
        if args.phase in ("single-turn", "all"):
            phase_single_turn(server, args.single_turn_tokens)
    if args.phase == "all":
        print(phase_result(model))
    return 0


if __name__ == "__main__":
    sys.exit(main())
