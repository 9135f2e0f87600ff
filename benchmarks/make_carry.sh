#!/usr/bin/env bash
# Assemble .carry/ (ignored by git; a device call carries it with `carry: [".carry"]`), which a fresh checkout lacks:
#   .carry/kernelbench/          KernelBench levels 1-3, from ../shared/kernelbench (read-only data, never committed)
#   .carry/bubblewrap_*.deb      the candidate's sandbox (the H200 image has no bubblewrap; run_gpu_suite.sh unpacks it)
#   .carry/baselines/*.json      eager and torch.compile baselines of earlier leases (benchmarks/carry/baselines_h200.tgz:
#                                after a lease, replace it with the baselines.tgz that gpu_lease.sh sent back and commit
#                                it, so the next session's corpus does not measure them again: 5-10 s of device time each)
#   with --parity KERNELBENCH_GIT (a KernelBench git checkout or mirror), also what the `parity` stage runs
#   (benchmarks/relaxed_parity.py, KernelBench's own evaluator beside relaxed mode; never committed):
#   .carry/kernelbench_eval/kernelbench/   its src/kernelbench folder at that checkout's HEAD
#   .carry/kernelbench_wheels/             pydantic and its dependencies for the device's Python 3.12, unpacked
# Usage: bash benchmarks/make_carry.sh [--parity KERNELBENCH_GIT] [BASELINES.tgz]
#        (default baselines: benchmarks/carry/baselines_h200.tgz, if present)
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p .carry
if [[ "${1:-}" == --parity ]]; then
  kb_git=${2:?make_carry.sh --parity KERNELBENCH_GIT}; shift 2
  git -C "$kb_git" rev-parse HEAD >/dev/null || { echo "make_carry: $kb_git is not a git checkout" >&2; exit 1; }
  rm -rf .carry/kernelbench_eval .carry/kernelbench_wheels && mkdir -p .carry/kernelbench_eval .carry/kernelbench_wheels
  git -C "$kb_git" archive HEAD src/kernelbench | tar -x -C .carry/kernelbench_eval --strip-components=1
  git -C "$kb_git" rev-parse HEAD > .carry/kernelbench_eval/COMMIT
  wheels=$(mktemp -d)
  python3 -m pip download -q pydantic --python-version 3.12 --only-binary=:all: \
    --platform manylinux2014_x86_64 -d "$wheels"
  for w in "$wheels"/*.whl; do python3 -m zipfile -e "$w" .carry/kernelbench_wheels; done
  rm -rf "$wheels"
  echo "parity: KernelBench $(cut -c1-12 .carry/kernelbench_eval/COMMIT), wheels $(du -sh .carry/kernelbench_wheels | cut -f1)"
fi
if [[ ! -d .carry/kernelbench/level1 ]]; then
  [[ -d ../shared/kernelbench/level1 ]] || { echo "make_carry: ../shared/kernelbench/level1 not found" >&2; exit 1; }
  cp -r ../shared/kernelbench .carry/kernelbench
fi
if ! ls .carry/bubblewrap_*.deb >/dev/null 2>&1; then
  (cd .carry && apt-get download bubblewrap 2>/dev/null) || { echo "make_carry: apt-get download bubblewrap failed" >&2; exit 1; }
fi
baselines=${1:-benchmarks/carry/baselines_h200.tgz}
if [[ -f "$baselines" ]]; then
  rm -rf .carry/baselines && tar -xzf "$baselines" -C .carry   # the archive holds baselines/*.json
  echo "baselines: $(ls .carry/baselines | wc -l) from $baselines"
fi
du -sh .carry
