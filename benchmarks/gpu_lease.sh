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
# LANE=NAME (with CUDA_VISIBLE_DEVICES) runs a second suite beside the first on other GPUs of a multi-GPU lease, in
# folders of its own; give the same LANE to its `wait` and `stop` (e.g. LANE=corpus CUDA_VISIBLE_DEVICES=1,2,3).
set -uo pipefail
lane=${LANE:+-$LANE}
repo=/tmp/ca-repo$lane
suite_out=/tmp/ca-gpuout$lane
sid=/tmp/ca-suite$lane.sid
collect() {
  cat "$suite_out/summary.txt" 2>/dev/null
  if [[ -n "${OUT:-}" ]]; then
    local dest="$OUT${LANE:+/$LANE}"  # a lane's files in a folder of their own
    mkdir -p "$dest"
    for f in "$suite_out"/*.log; do [[ -f "$f" ]] && cp "$f" "$dest/"; done
    tar czf "$dest/results.tgz" -C "$repo" benchmarks/results benchmarks/logs 2>/dev/null
    # the baselines measured so far, for a later lease (.carry/baselines: run_gpu_suite.sh seeds the cache with them)
    tar czf "$dest/baselines.tgz" -C "${CUDA_AGENT_CACHE:-/tmp/cuda-agent-cache}" baselines 2>/dev/null
  fi
  tail -c 2500 "$suite_out/all.log" 2>/dev/null
}
case "${1:-}" in
  start)
    shift
    (( $# )) || { echo "gpu_lease.sh start: name the stages (see run_gpu_suite.sh)" >&2; exit 2; }
    rm -rf "$repo" "$suite_out" && mkdir -p "$suite_out" && cp -a "$(dirname "$0")/.." "$repo" || exit 1
    (cd "$repo" && OUT="$suite_out" SID="$sid" setsid nohup bash -c 'echo $$ > "$SID"; bash benchmarks/run_gpu_suite.sh "$@"; touch "$OUT/DONE"' \
      suite "$@" > "/tmp/ca-suite$lane.log" 2>&1 < /dev/null &)
    echo "started${LANE:+ lane $LANE}${CUDA_VISIBLE_DEVICES:+ on GPUs $CUDA_VISIBLE_DEVICES}: $*" ;;
  wait)
    stage=${2:?gpu_lease.sh wait STAGE [MAX_S]}; max=${3:-540}; start=$SECONDS
    while (( SECONDS - start < max )); do
      grep -q "^$stage " "$suite_out/summary.txt" 2>/dev/null && break
      [[ -f "$suite_out/DONE" ]] && break
      sleep 5
    done
    collect ;;
  stop)
    [[ -f "$sid" ]] && pkill -s "$(cat "$sid")"; sleep 2; collect ;;
  *) echo "usage: gpu_lease.sh start STAGE ... | wait STAGE [MAX_S] | stop" >&2; exit 2 ;;
esac
