#!/usr/bin/env bash
# Sets up, builds and runs the whole test suite. Fixtures are read from $INFERA_SHARED_DIR
# (default: ../shared beside the repository).
#   scripts/test.sh [release|debug|asan]   the suite, then the model and engine suites with bf16
#                                          CPU matmuls; CUDA tests skip, saying so, without a GPU
#   scripts/test.sh gpu                    on a machine with a GPU: the suite, then the model and
#                                          engine suites again on CUDA (INFERA_TEST_DEVICE=cuda
#                                          and cuda-exact, see tests/test_backend.h)
set -euo pipefail
cd "$(dirname "$0")/.."
preset="${1:-release}"
gpu=0
if [ "$preset" = gpu ]; then
  gpu=1
  preset=release
fi
scripts/setup.sh
scripts/setup_python.sh  # .venv with the gguf package for the GGUF interoperability test
scripts/build.sh "$preset"
ctest --preset "$preset" -j "$(nproc)" --timeout 600
# The model and engine suites again with bf16 CPU matmuls (--matmul-precision bf16); they skip,
# saying so, on CPUs without AVX512-BF16.
echo "== model and engine suites on cpu-bf16"
INFERA_TEST_DEVICE=cpu-bf16 ctest --preset "$preset" -j "$(nproc)" --timeout 600 -R '^(Fixtures|BatchParity|Qwen3Weights|GeneratorTest)'
if [ "$gpu" = 1 ]; then
  command -v nvidia-smi >/dev/null && nvidia-smi -L
  # One process on the GPU at a time: these suites run serially.
  for device in cuda cuda-exact; do
    echo "== model and engine suites on $device"
    INFERA_TEST_DEVICE=$device ctest --preset "$preset" --timeout 600 -R '^(Fixtures|BatchParity|Qwen3Weights|GeneratorTest|ForwardArgmax|ModernBertMicro|DecisionParity|DecisionQuant)'
  done
fi
