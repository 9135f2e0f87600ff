#!/usr/bin/env bash
# Everything that needs the GPU, in one call: GPU tests and benchmarks, logs under $OUT (default ./gpu-out).
#   bash benchmarks/run_gpu_suite.sh [STAGE ...]     stages: info tests timing graphclock idleprobe ncu ncuwarm ncunospares ncuhost ncurelaxed compile evaluator degenerate breakdown large profile pool agent bench synth realmodel buildspeed coldeval parity gputests precision taskcode taskcompare
# The candidate's sandbox needs bubblewrap: where the GPU host has none, carry the Debian package in .carry/
# (apt-get download bubblewrap) and this script unpacks it into a folder of its own (never into /).
# Results land in benchmarks/results/ (and logs/reports under benchmarks/), and are packed into $OUT/results.tgz.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:-$PWD/gpu-out}"
mkdir -p "$OUT"
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
export CUDA_AGENT_CACHE="${CUDA_AGENT_CACHE:-/tmp/cuda-agent-cache}"
# KernelBench: the package reads only $CUDA_AGENT_KERNELBENCH (or its cache), and a value that holds no level1/ is an
# error, so it is set here only to a copy that exists: carried in .carry/, or a shared/ folder in or beside the checkout.
if [[ -z "${CUDA_AGENT_KERNELBENCH:-}" ]]; then
  for kb in "$PWD/.carry/kernelbench" "$PWD/shared/kernelbench" "$PWD/../shared/kernelbench"; do
    if [[ -d "$kb/level1" ]]; then export CUDA_AGENT_KERNELBENCH="$kb"; break; fi
  done
fi
if ! command -v bwrap >/dev/null && [[ -z "${CUDA_AGENT_BWRAP:-}" ]]; then
  deb=$(ls .carry/bubblewrap_*.deb 2>/dev/null | head -1)
  if [[ -n "$deb" ]]; then
    mkdir -p /tmp/cuda-agent-bwrap && dpkg -x "$deb" /tmp/cuda-agent-bwrap
    export CUDA_AGENT_BWRAP=/tmp/cuda-agent-bwrap/usr/bin/bwrap
  fi
fi
# Baselines measured in an earlier lease (gpu_lease.sh sends them back as baselines.tgz; unpack into .carry/baselines):
# their keys name the GPU, driver and versions, and the judge's drift check compares them with eager PyTorch now.
if [[ -d .carry/baselines ]]; then
  mkdir -p "$CUDA_AGENT_CACHE/baselines" && cp -n .carry/baselines/*.json "$CUDA_AGENT_CACHE/baselines/" 2>/dev/null
fi
stages=("$@")
(( ${#stages[@]} )) || stages=(info tests compile evaluator profile pool agent bench synth)
summary="$OUT/summary.txt"
: > "$summary"

stage() {  # stage NAME TIMEOUT_S COMMAND...
  local name=$1 limit=$2; shift 2
  local start=$SECONDS
  echo "=== $name ($(date -u +%H:%M:%S))" | tee -a "$OUT/all.log"
  timeout --kill-after=10 "$limit" "$@" >>"$OUT/all.log" 2>&1
  local rc=$?
  printf '%-10s rc=%-3s %4ss\n' "$name" "$rc" "$((SECONDS - start))" | tee -a "$summary"
}

for s in "${stages[@]}"; do
  case "$s" in
    info) stage info 60 bash -c 'nvidia-smi; python3 -c "import torch,sys;print(sys.version, torch.__version__, torch.version.cuda, torch.cuda.get_device_name())"; nvcc --version | tail -1; nproc; "${CUDA_AGENT_BWRAP:-bwrap}" --version' ;;
    # the evaluator's GPU cases other than hang / illegal_address run in the `evaluator` stage (benchmarks/evaluator.py)
    tests) stage tests 420 bash -c 'set -o pipefail; python3 -m pytest -m gpu -p no:cacheprovider -o addopts="" -rA --timeout 300 tests -k "not test_gpu_case or hang or illegal_address" 2>&1 | tee "$0"' "$OUT/gpu_tests.log" ;;
    # the GPU tests other than the corpus cases, which the `evaluator` stage evaluates one by one (same code, one run);
    # GPUTESTS_PATHS: test files or folders (default: tests)
    gputests) stage gputests "${GPUTESTS_LIMIT_S:-300}" bash -c 'set -o pipefail; python3 -m pytest -m gpu -p no:cacheprovider -o addopts="" -rA --timeout 200 ${GPUTESTS_PATHS:-tests} -k "not test_gpu_case and not test_adversarial_gpu_case_is_rejected and not test_honest_case_accepted" 2>&1 | tee "$0"' "$OUT/gpu_tests.log" ;;
    # the precision contract on real hardware: cuBLAS/cuDNN TF32, fp16 and bf16 beside the honest variants
    precision) stage precision "${PRECISION_LIMIT_S:-240}" bash -c 'set -o pipefail; python3 benchmarks/precision_contract.py --device cuda 2>&1 | tee "$0"' "$OUT/precision_contract.log" ;;
    evalcases) stage evalcases 420 python3 -m pytest -m gpu -q -p no:cacheprovider -o addopts="" --timeout 300 tests/evaluator/test_eval_gpu_cases.py ;;
    compile) stage compile 240 python3 benchmarks/compile.py --reference .carry/agent_workdir --runs 5 --reference-runs 3 ;;
    evaluator) stage evaluator "${EVALUATOR_LIMIT_S:-480}" bash -c 'set -o pipefail; python3 benchmarks/evaluator.py ${EVALUATOR_ARGS:-} 2>&1 | grep -v "^W1" | tee "$0"' "$OUT/evaluator.log" ;;
    degenerate) stage degenerate 200 python3 benchmarks/degenerate_tasks.py --budget-s 170 ;;
    breakdown) stage breakdown 150 python3 benchmarks/evaluator_breakdown.py --out "$OUT" ;;
    large) stage large 200 bash -c 'set -o pipefail; python3 benchmarks/evaluator_large_tasks.py 2>&1 | tee "$0"' "$OUT/large_tasks.log" ;;
    profile) stage profile 180 python3 benchmarks/profile_repeatability.py ;;
    pool) stage pool 150 python3 benchmarks/pool.py --gpu --task 19_ReLU --solution benchmarks/solutions/L1_19_ReLU --seconds-single 25 --seconds-loaded 40 ;;
    agent) stage agent 240 python3 benchmarks/agent_episode.py ;;
    bench) stage bench 220 python3 benchmarks/bench_offline.py --budget-s 160 ;;
    realmodel) stage realmodel "${REALMODEL_LIMIT_S:-590}" python3 benchmarks/real_model.py score ;;
    buildspeed) stage buildspeed 330 python3 benchmarks/build_throughput.py --jobs 16 --torch-limit 16 --verify ;;
    coldeval) stage coldeval 300 python3 benchmarks/cold_eval.py --cases 10 --merge-into benchmarks/results/build_throughput.json ;;
    # KernelBench's own evaluator beside relaxed mode (carry .carry/kernelbench_eval and .carry/kernelbench_wheels:
    # benchmarks/README.md, "Relaxed-mode parity")
    parity) stage parity "${PARITY_LIMIT_S:-420}" python3 benchmarks/relaxed_parity.py --kernelbench-src .carry/kernelbench_eval/kernelbench --wheels .carry/kernelbench_wheels --jobs 8 ;;
    # why a request costs more than its kernels: idle clocks, a second process, a warm-up (benchmarks/idle_probe.py)
    idleprobe) stage idleprobe 180 python3 benchmarks/idle_probe.py ;;
    # the judge's clock against Nsight Compute (NCU_CASES: honest case names; empty: every GPU honest case)
    ncu) stage ncu "${NCU_LIMIT_S:-420}" bash -c 'set -o pipefail; python3 benchmarks/timing_vs_ncu.py --budget-s "${NCU_BUDGET_S:-360}" --cases ${NCU_CASES:-} 2>&1 | tee "$0"' "$OUT/timing_vs_ncu.log" ;;
    # the same with the graph clock off (benchmarks/results/timing_vs_ncu_host_launched.json)
    ncuhost) stage ncuhost "${NCU_LIMIT_S:-420}" bash -c 'set -o pipefail; python3 benchmarks/timing_vs_ncu.py --host-launched --budget-s "${NCU_BUDGET_S:-360}" --cases ${NCU_CASES:-} 2>&1 | tee "$0"' "$OUT/timing_vs_ncu_host.log" ;;
    # the same in relaxed mode (no kernel tap in the candidate's process): what the tap costs the clock (cases:
    # NCU_RELAXED_CASES, else NCU_CASES)
    ncurelaxed) stage ncurelaxed "${NCU_LIMIT_S:-420}" bash -c 'set -o pipefail; python3 benchmarks/timing_vs_ncu.py --mode relaxed --budget-s "${NCU_BUDGET_S:-360}" --cases ${NCU_RELAXED_CASES:-${NCU_CASES:-}} 2>&1 | tee "$0"' "$OUT/timing_vs_ncu_relaxed.log" ;;
    # the same with the device kept busy right before every request (EvalConfig.warm_device_ms; NCU_WARM_MS, default 1)
    ncuwarm) stage ncuwarm "${NCU_LIMIT_S:-420}" bash -c 'set -o pipefail; python3 benchmarks/timing_vs_ncu.py --warm-ms "${NCU_WARM_MS:-1}" --budget-s "${NCU_BUDGET_S:-360}" --cases ${NCU_CASES:-} 2>&1 | tee "$0"' "$OUT/timing_vs_ncu_warm.log" ;;
    # the same with no spare candidate process starting (CUDA context and all) while a case is timed
    ncunospares) stage ncunospares "${NCU_LIMIT_S:-420}" bash -c 'set -o pipefail; python3 benchmarks/timing_vs_ncu.py --spares 0 --budget-s "${NCU_BUDGET_S:-360}" --cases ${NCU_CASES:-} 2>&1 | tee "$0"' "$OUT/timing_vs_ncu_nospares.log" ;;
    # the graph clock: time_graphed, replayed requests, the fall-backs, checks on replays
    graphclock) stage graphclock 420 bash -c 'set -o pipefail; python3 -m pytest -m gpu -p no:cacheprovider -o addopts="" -rA --timeout 300 tests/evaluator/test_graph_clock_gpu.py tests/evaluator/test_timing_gpu.py 2>&1 | tee "$0"' "$OUT/graph_clock_tests.log" ;;
    # the judge's timer and clock arithmetic on the GPU
    timing) stage timing 240 bash -c 'set -o pipefail; python3 -m pytest -m gpu -p no:cacheprovider -o addopts="" -rA --timeout 200 tests/evaluator/test_timing_gpu.py tests/evaluator/test_judge_units.py 2>&1 | tee "$0"' "$OUT/timing_tests.log" ;;
    taskcode) stage taskcode 590 python3 benchmarks/sandbox_task_code.py --device cuda --profile --compare L1/19_ReLU benchmarks/single_file_solutions/L1_19_relu.py --n-compare 3 ;;
    # only the judge sandbox's cost per phase (sandboxed judge against the judge in the benchmark's process)
    # (L1/12: about 2 s an evaluation on the H200; L1/19's 6.4 GB sets took about 100 s each, and 7 ran past 480 s)
    taskcompare) stage taskcompare 300 python3 benchmarks/sandbox_task_code.py --device cuda --compare L1/12_Matmul_with_diagonal_matrices_ benchmarks/single_file_solutions/L1_12_diag_matmul.py --n-compare 3 --compare-only ;;
    synth) stage synth 210 python3 benchmarks/synth.py --out /tmp/synth/tasks.parquet --fresh --budget 130 --task-timeout 45 ;;
    *) echo "unknown stage $s" | tee -a "$summary" ;;
  esac
done
tar czf "$OUT/results.tgz" benchmarks/results benchmarks/logs benchmarks/reports benchmarks/real_model 2>/dev/null
cat "$summary"
