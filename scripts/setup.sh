#!/usr/bin/env bash
# Set up cuda-agent on a fresh Debian/Ubuntu machine (root or sudo): system packages, PyTorch, the package itself.
#   bash scripts/setup.sh          # to run cuda-agent
#   bash scripts/setup.sh --dev    # to run the tests too (adds Ray, transformers, TRL, matplotlib, Chromium)
set -euo pipefail
cd "$(dirname "$0")/.."

dev=0
[[ "${1:-}" == "--dev" ]] && dev=1

sudo_cmd=""
[[ "$(id -u)" != 0 ]] && command -v sudo >/dev/null && sudo_cmd="sudo"

# bubblewrap: the agent sandbox. Chromium: the report test renders the HTML page headless.
packages=(bubblewrap)
(( dev )) && packages+=(chromium)
missing=()
for p in "${packages[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if (( ${#missing[@]} )) && command -v apt-get >/dev/null; then
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq "${missing[@]}" >/dev/null
fi

command -v nvcc >/dev/null || [[ -x /usr/local/cuda/bin/nvcc ]] || \
  echo "warning: nvcc not found; install the CUDA toolkit (13.0 here) to build kernels" >&2

python3 -m pip install -q --upgrade pip
# PyTorch first and pinned: a CUDA 13.0 build that matches nvcc 13.0.
python3 -m pip install -q "torch==2.14.1"
if (( dev )); then
  python3 -m pip install -q -e ".[dev]"
  # verl pins transformers below what we use; its agent-loop interfaces are what the tests need, not its pins
  python3 -m pip install -q --no-deps "verl==0.9.1"
else
  python3 -m pip install -q -e .
fi
echo "cuda-agent set up: $(command -v cuda-agent)"
