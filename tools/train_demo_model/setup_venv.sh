#!/usr/bin/env bash
# The Python environment for preparing the demo model's corpus and tokenizer, testing train.py on
# the CPU, and computing the transformers references of its tests: .venv/ (git-ignored).
# Versions match the GPU machine the model was trained on (torch 2.11, transformers 5.17).
set -euo pipefail
cd "$(dirname "$0")/../.."
[ -x .venv/bin/python ] || python3 -m venv .venv
.venv/bin/pip install -q torch==2.11.0 transformers==5.17.0 tokenizers==0.23.2 safetensors==0.8.0 \
  numpy matplotlib rdata==1.1.0
.venv/bin/python -c "import torch, transformers, tokenizers, rdata; print('venv ready:', torch.__version__, transformers.__version__, tokenizers.__version__)"
