#!/usr/bin/env bash
# Creates .venv (git-ignored) with the Python packages our reference-data scripts and the GGUF
# interoperability tests use: `gguf` (llama.cpp's own reader/writer and reference quants) and numpy.
# Safe to run again. Usage: scripts/setup_python.sh; then .venv/bin/python SCRIPT.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -x .venv/bin/python ]; then
  python3 -m venv .venv
fi
if ! .venv/bin/python -c "import gguf, numpy" 2>/dev/null; then
  .venv/bin/pip install --quiet "gguf==0.19.0" "numpy>=1.26"
fi
