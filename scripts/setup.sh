#!/usr/bin/env bash
# Set up cuda-agent on a fresh Debian/Ubuntu machine (root or sudo): system packages, then a virtual environment
# in .venv, made here without the system's site-packages, holding PyTorch and the package.
#   bash scripts/setup.sh            # to run cuda-agent: .venv/bin/cuda-agent (or `source .venv/bin/activate`)
#   bash scripts/setup.sh --dev      # to run the tests too: .venv/bin/python -m pytest
#   bash scripts/setup.sh --relock   # resolve the dev environment afresh and rewrite requirements/dev.lock
#   bash scripts/setup.sh --rl       # the verl training environment in .venv-rl (requirements/rl.lock)
#   bash scripts/setup.sh --rl --cluster   # the same on a GPU training node, plus the rollout engine (vLLM)
#   bash scripts/setup.sh --rl-relock      # resolve the verl environment afresh and rewrite requirements/rl.lock
# Versions come from requirements/dev.lock (pip's -c). With --dev the environment is then made to match the lock
# exactly: anything else installed in .venv is removed, so a package installed by hand never makes the tests pass.
# The verl environment is separate: verl 0.9.1 declares transformers < 5.11 and tensordict <= 0.10, older than the
# dev environment's; .venv-rl holds verl with every dependency inside verl's declared ranges (pip check passes).
set -euo pipefail
cd "$(dirname "$0")/.."

mode=run
cluster=0
case "${1:-}" in
  "") ;;
  --dev) mode=dev ;;
  --relock) mode=relock ;;
  --rl) mode=rl; [[ "${2:-}" == --cluster ]] && cluster=1 ;;
  --rl-relock) mode=rl-relock ;;
  *) echo "usage: bash scripts/setup.sh [--dev | --relock | --rl [--cluster] | --rl-relock]" >&2; exit 2 ;;
esac

venv=.venv
lock=requirements/dev.lock
torch_pin="torch==2.14.1"  # a CUDA 13.0 build, matching nvcc 13.0
verl_pin="verl==0.9.1"
if [[ $mode == rl || $mode == rl-relock ]]; then
  venv=.venv-rl
  lock=requirements/rl.lock
fi

python3 -c 'import sys; sys.exit(sys.version_info < (3, 11))' || {
  echo "cuda-agent needs Python 3.11 or newer; python3 here is $(python3 --version 2>&1)" >&2; exit 1; }

sudo_cmd=""
[[ "$(id -u)" != 0 ]] && command -v sudo >/dev/null && sudo_cmd="sudo"

# bubblewrap: the agent sandbox. python3-venv: Debian's python3 makes no virtual environment without it.
# Chromium: the report test renders the HTML page headless.
packages=(bubblewrap)
python3 -c 'import ensurepip, venv' 2>/dev/null || packages+=(python3-venv)
[[ $mode == dev || $mode == relock ]] && packages+=(chromium)
missing=()
for p in "${packages[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if (( ${#missing[@]} )) && command -v apt-get >/dev/null; then
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq "${missing[@]}" >/dev/null
fi

command -v nvcc >/dev/null || [[ -x /usr/local/cuda/bin/nvcc ]] || \
  echo "warning: nvcc not found; install the CUDA toolkit (13.0 here) to build kernels" >&2

# The environment: made here, never one that sees the system's packages.
[[ $mode == relock || $mode == rl-relock ]] && rm -rf "$venv"
if [[ -e "$venv" ]] && ! grep -qx "include-system-site-packages = false" "$venv/pyvenv.cfg" 2>/dev/null; then
  echo "$venv was not made by python3 -m venv without system packages; making it again" >&2
  rm -rf "$venv"
fi
[[ -x "$venv/bin/python" ]] || python3 -m venv "$venv"
vpip() { PYTHONPATH="" "$venv/bin/python" -m pip "$@"; }

pins=(-c "$lock")
[[ $mode == relock || $mode == rl-relock ]] && pins=()
vpip install -q "${pins[@]}" --upgrade pip setuptools
if [[ $mode == rl || $mode == rl-relock ]]; then
  # verl with its own dependencies (resolved inside its declared ranges), TransferQueue for verl's v1 trainer
  # (trainer.use_v1, the default), what our agent loop imports, and pytest for the launch test.
  # transformers==5.9.0: the version verl's own vllm/sglang extras pin, inside its declared range.
  if (( cluster )); then
    # GPU training nodes: the lock's "#cluster" section, a whole environment resolved with the rollout engine
    # (vLLM 0.24.0) and the torch it is built against (2.11.0), exactly as pinned there.
    sed -n 's/^#cluster //p' "$lock" > "$venv/cluster.txt"
    vpip install -q -c "$venv/cluster.txt" -r "$venv/cluster.txt" -e ".[verl]" pytest pytest-timeout
  else
    vpip install -q "${pins[@]}" "$torch_pin" "$verl_pin" "transferqueue==0.1.11" "transformers==5.9.0" \
      -e ".[verl]" pytest pytest-timeout
  fi
  vpip check
elif [[ $mode == run ]]; then
  vpip install -q "${pins[@]}" "$torch_pin" -e .
else
  vpip install -q "${pins[@]}" "$torch_pin" -e ".[dev]"
  # verl pins transformers below what we use; its agent-loop interfaces are what the tests need, not its pins
  # (what that loop imports beyond them is declared in the rl extra)
  vpip install -q "${pins[@]}" --no-deps "$verl_pin"
fi

# every distribution in .venv but our own (editable installs of anything else included), as name==version
frozen() { vpip list --format=freeze 2>/dev/null | grep -v '^cuda-agent==' | LC_ALL=C sort; }
if [[ $mode == relock ]]; then
  mkdir -p "$(dirname "$lock")"
  {
    echo "# The dev environment, pinned (Python 3.11, Linux x86_64). Regenerate: bash scripts/setup.sh --relock"
    echo "# scripts/setup.sh installs with -c this file; with --dev it makes .venv match it exactly."
    frozen
  } > "$lock"
  echo "wrote $lock ($(grep -vc '^#' "$lock") packages)"
elif [[ $mode == rl-relock ]]; then
  cluster_section=$(grep '^#cluster ' "$lock" 2>/dev/null || true)
  {
    echo "# The verl training environment (.venv-rl), pinned (Python 3.11, Linux x86_64): verl 0.9.1 with every"
    echo "# dependency inside verl's declared ranges. Regenerate: bash scripts/setup.sh --rl-relock"
    echo "# scripts/setup.sh --rl installs with -c this file. The '#cluster' lines are the GPU nodes' rollout engine"
    echo "# (bash scripts/setup.sh --rl --cluster): vLLM 0.24.0 and the torch it is built against, as verl 0.9.1's"
    echo "# vllm extra pins them; vLLM ships CUDA wheels only, so CPU machines (CI) do not install it."
    echo "$cluster_section"
    frozen
  } > "$lock"
  echo "wrote $lock ($(grep -vc '^#' "$lock") packages)"
elif [[ $mode == dev || ( $mode == rl && $cluster == 0 ) ]]; then
  wanted=$(grep -v '^#' "$lock" | LC_ALL=C sort)
  strays=$(LC_ALL=C comm -13 <(cut -d= -f1 <<<"$wanted" | LC_ALL=C sort -u) \
                              <(frozen | cut -d= -f1 | LC_ALL=C sort -u))
  if [[ -n "$strays" ]]; then
    echo "removing from $venv what $lock does not list: $(echo $strays)"
    vpip uninstall -q -y $strays
  fi
  if ! diff <(echo "$wanted") <(frozen) >/dev/null; then
    echo "$venv does not match $lock (< lock, > installed):" >&2
    diff <(echo "$wanted") <(frozen) >&2 || true
    relock_flag=--relock; [[ $mode == rl ]] && relock_flag=--rl-relock
    echo "regenerate the lock with: bash scripts/setup.sh $relock_flag" >&2
    exit 1
  fi
fi
echo "cuda-agent set up in $venv: run $venv/bin/cuda-agent, or source $venv/bin/activate first"
