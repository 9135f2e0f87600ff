#!/usr/bin/env bash
# Assemble .carry/ (ignored by git; a device call carries it with `carry: [".carry"]`), which a fresh checkout lacks:
#   .carry/kernelbench/          KernelBench levels 1-3, from ../shared/kernelbench (read-only data, never committed)
#   .carry/bubblewrap_*.deb      the candidate's sandbox (the H200 image has no bubblewrap; run_gpu_suite.sh unpacks it)
#   .carry/baselines/*.json      eager and torch.compile baselines of earlier leases (benchmarks/carry/baselines_h200.tgz:
#                                after a lease, replace it with the baselines.tgz that gpu_lease.sh sent back and commit
#                                it, so the next session's corpus does not measure them again: 5-10 s of device time each)
# Usage: bash benchmarks/make_carry.sh [BASELINES.tgz]   (default: benchmarks/carry/baselines_h200.tgz, if present)
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p .carry
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
