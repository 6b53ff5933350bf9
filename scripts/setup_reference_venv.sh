#!/usr/bin/env bash
# Creates .venv (git-ignored) with the Python references the data scripts under tests/data use:
# Hugging Face `tokenizers`, pinned to the version the committed expectations were made with.
# Nothing in the build or the test suite needs it; only regenerating reference data does.
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x .venv/bin/python ] || python3 -m venv .venv
.venv/bin/pip install -q "tokenizers==0.23.3"
.venv/bin/python -c "import tokenizers; print('tokenizers', tokenizers.__version__)"
