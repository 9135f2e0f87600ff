#!/usr/bin/env bash
# The GPU suite across several device calls of one lease: `start` copies the checkout into /tmp/ca-repo and runs
# run_gpu_suite.sh there detached (setsid), so a stage may outlast one call and later calls' fresh copies of the
# working tree cannot overwrite its results; `wait` blocks until a stage has ended (or MAX_S passed, or the suite
# is done) and sends back the summary, the logs and benchmarks/{results,logs} as results.tgz. Each call must follow
# the last within the machine's idle window, or the lease (and /tmp) is gone.
#   bash benchmarks/gpu_lease.sh start STAGE ...        (first call; carry .carry: KernelBench, bubblewrap)
#   bash benchmarks/gpu_lease.sh wait STAGE [MAX_S]     (later calls; MAX_S default 540)
#   bash benchmarks/gpu_lease.sh stop                   (ends the suite; sends back what exists)
# Environment for the suite (NCU_CASES, EVALUATOR_ARGS, ...) is passed through from `start`.
set -uo pipefail
repo=/tmp/ca-repo
suite_out=/tmp/ca-gpuout
collect() {
  cat "$suite_out/summary.txt" 2>/dev/null
  if [[ -n "${OUT:-}" ]]; then
    for f in "$suite_out"/*.log; do [[ -f "$f" ]] && cp "$f" "$OUT/"; done
    tar czf "$OUT/results.tgz" -C "$repo" benchmarks/results benchmarks/logs 2>/dev/null
    # the baselines measured so far, for a later lease (.carry/baselines: run_gpu_suite.sh seeds the cache with them)
    tar czf "$OUT/baselines.tgz" -C "${CUDA_AGENT_CACHE:-/tmp/cuda-agent-cache}" baselines 2>/dev/null
  fi
  tail -c 2500 "$suite_out/all.log" 2>/dev/null
}
case "${1:-}" in
  start)
    shift
    (( $# )) || { echo "gpu_lease.sh start: name the stages (see run_gpu_suite.sh)" >&2; exit 2; }
    rm -rf "$repo" "$suite_out" && mkdir -p "$suite_out" && cp -a "$(dirname "$0")/.." "$repo" || exit 1
    (cd "$repo" && OUT="$suite_out" setsid nohup bash -c 'echo $$ > /tmp/ca-suite.sid; bash benchmarks/run_gpu_suite.sh "$@"; touch "$OUT/DONE"' \
      suite "$@" > /tmp/ca-suite.log 2>&1 < /dev/null &)
    echo "started: $*" ;;
  wait)
    stage=${2:?gpu_lease.sh wait STAGE [MAX_S]}; max=${3:-540}; start=$SECONDS
    while (( SECONDS - start < max )); do
      grep -q "^$stage " "$suite_out/summary.txt" 2>/dev/null && break
      [[ -f "$suite_out/DONE" ]] && break
      sleep 5
    done
    collect ;;
  stop)
    [[ -f /tmp/ca-suite.sid ]] && pkill -s "$(cat /tmp/ca-suite.sid)"; sleep 2; collect ;;
  *) echo "usage: gpu_lease.sh start STAGE ... | wait STAGE [MAX_S] | stop" >&2; exit 2 ;;
esac
