#!/usr/bin/env bash
# The main job: set up, build, and generate text with Qwen3-0.6B on the CPU.
#   scripts/run.sh ["prompt"]          model folder: $INFERA_MODEL_DIR (default models/Qwen3-0.6B)
# Without weights it downloads them where the network allows (`hf download`), and otherwise says
# how to get them and how to run the dummy-weights speed check instead.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh release
model_dir="${INFERA_MODEL_DIR:-models/Qwen3-0.6B}"
prompt="${1:-Give me a short introduction to large language models.}"

has_weights() { [ -f "$1/model.safetensors" ] || [ -f "$1/model.safetensors.index.json" ]; }

if ! has_weights "$model_dir"; then
  echo "No Qwen3-0.6B weights in $model_dir; trying: hf download Qwen/Qwen3-0.6B --local-dir $model_dir" >&2
  if ! command -v hf >/dev/null 2>&1; then
    python3 -m pip install -q --user "huggingface_hub[cli]" >/dev/null 2>&1 || true
    export PATH="$HOME/.local/bin:$PATH"
  fi
  if command -v hf >/dev/null 2>&1; then
    timeout 900 hf download Qwen/Qwen3-0.6B --local-dir "$model_dir" >&2 || true
  fi
fi
if ! has_weights "$model_dir"; then
  shared="${INFERA_SHARED_DIR:-../shared}"
  cat >&2 <<MSG
infera: no weights for Qwen3-0.6B in $model_dir, and they could not be downloaded here.
  Get them on a networked machine:  hf download Qwen/Qwen3-0.6B --local-dir $model_dir
  (or point INFERA_MODEL_DIR at a folder that has them), then run scripts/run.sh again.
  Meanwhile, measure speed on the same shape with seeded random weights:
    build/release/infera run --model $shared/models/qwen3-0.6b --dummy-weights --synthetic-prompt 128 --max-tokens 128 --ignore-eos
MSG
  exit 1
fi
exec build/release/infera run --model "$model_dir" --prompt "$prompt" --max-tokens 256
