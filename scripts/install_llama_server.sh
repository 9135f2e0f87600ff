#!/usr/bin/env bash
# Install llama-cpp-python's OpenAI-compatible server (llama.cpp for the CPU) into its own virtual environment, for
# `cuda-agent serve-model`, the real-model test and benchmarks/real_model.py. It is not a dependency of cuda-agent.
#
# The package index has no prebuilt wheel for it and Debian 12 has no llama.cpp package, so it compiles llama.cpp
# from the source distribution. To halve that (about 20 minutes on 2 busy cores instead of 40+), the llama.cpp
# "common" library and the multimodal library, which the text server does not load, are left out of the build.
#
# usage: scripts/install_llama_server.sh [VENV]      (default: .llm-venv in the checkout, ignored by git)
# then:  export CUDA_AGENT_LLAMA_PYTHON=VENV/bin/python
set -euo pipefail

VERSION=0.3.36
VENV="${1:-$(cd "$(dirname "$0")/.." && pwd)/.llm-venv}"
PYTHON="${PYTHON:-python3}"

if [[ -x "$VENV/bin/python" ]] && "$VENV/bin/python" -c "import llama_cpp.server" 2>/dev/null; then
    echo "llama-cpp-python is already installed in $VENV" >&2
    echo "$VENV/bin/python"
    exit 0
fi
"$PYTHON" -m venv "$VENV"
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
"$VENV/bin/pip" download --quiet --no-deps --no-binary :all: "llama-cpp-python==$VERSION" -d "$WORK"
tar -xzf "$WORK"/llama_cpp_python-"$VERSION".tar.gz -C "$WORK"
SRC="$WORK/llama_cpp_python-$VERSION"
# the package forces the common library on; the server only loads libllama and libggml
sed -i 's/set(LLAMA_BUILD_COMMON ON CACHE BOOL "Build llama.cpp common library" FORCE)/set(LLAMA_BUILD_COMMON OFF CACHE BOOL "Build llama.cpp common library" FORCE)/' "$SRC/CMakeLists.txt"
CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc)}" \
CMAKE_ARGS="-DGGML_NATIVE=ON -DLLAVA_BUILD=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TOOLS=OFF -DLLAMA_BUILD_SERVER=OFF" \
    "$VENV/bin/pip" install --quiet "$SRC[server]"
"$VENV/bin/python" -c "import llama_cpp, llama_cpp.server; print('llama-cpp-python', llama_cpp.__version__)" >&2
echo "$VENV/bin/python"
