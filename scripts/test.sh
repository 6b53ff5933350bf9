#!/usr/bin/env bash
# Sets up, builds and runs the whole test suite. Fixtures are read from $INFERA_SHARED_DIR
# (default: ../shared beside the repository).
set -euo pipefail
cd "$(dirname "$0")/.."
preset="${1:-release}"
scripts/setup.sh
scripts/setup_python.sh  # .venv with the gguf package for the GGUF interoperability test
scripts/build.sh "$preset"
ctest --preset "$preset" -j "$(nproc)" --timeout 600
