#!/usr/bin/env bash
# Builds llama.cpp (llama-bench, llama-completion (the non-interactive CLI; this release builds
# llama-cli only with the server), llama-quantize; CPU only, -march=native) from the sources vendored in
# PyPI's llama-cpp-python sdist, for side-by-side benchmarks (bench/llamacpp/). Nothing is
# vendored into this repository: the sdist and the build live under build/llamacpp (git-ignored).
# PyPI is the only network source (pip download, no binaries). Runs niced: the machine is shared.
# Usage: scripts/llamacpp_build.sh [VERSION]   (default: the pinned version below)
# Prints the bin folder on success; safe to run again (reuses the build).
set -euo pipefail
cd "$(dirname "$0")/.."
VERSION="${1:-${LLAMA_CPP_PYTHON_VERSION:-0.3.36}}"
ROOT="$PWD/build/llamacpp"
SRC="$ROOT/llama_cpp_python-$VERSION"
BIN="$ROOT/build-$VERSION/bin"
mkdir -p "$ROOT"
if [ -x "$BIN/llama-bench" ] && [ -x "$BIN/llama-completion" ] && [ -x "$BIN/llama-quantize" ]; then
  echo "$BIN"
  exit 0
fi
PIP=pip3
[ -x .venv/bin/pip ] && PIP=.venv/bin/pip
if [ ! -d "$SRC" ]; then
  "$PIP" download --quiet --no-binary :all: --no-deps --dest "$ROOT" "llama-cpp-python==$VERSION" >&2
  tar -xzf "$ROOT/llama_cpp_python-$VERSION.tar.gz" -C "$ROOT"
fi
LLAMA="$SRC/vendor/llama.cpp"
[ -f "$LLAMA/CMakeLists.txt" ] || { echo "no vendored llama.cpp in $SRC" >&2; exit 1; }
JOBS="${JOBS:-2}"
nice -n 15 cmake -S "$LLAMA" -B "$ROOT/build-$VERSION" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DGGML_NATIVE=ON -DGGML_CUDA=OFF -DGGML_METAL=OFF -DGGML_VULKAN=OFF -DGGML_OPENMP=ON \
  -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF \
  -DLLAMA_BUILD_TOOLS=ON -DBUILD_SHARED_LIBS=OFF >&2
nice -n 15 cmake --build "$ROOT/build-$VERSION" -j "$JOBS" --target llama-bench llama-completion llama-quantize >&2
echo "$BIN"
