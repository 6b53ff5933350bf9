#!/usr/bin/env bash
# The main job: set up, build, and generate text on the CPU.
#   scripts/run.sh ["prompt"]                 the bundled demo model, or Qwen3-0.6B if it is here
#   scripts/run.sh --model DIR ["prompt"]     a Hugging Face Qwen3 folder (also: $INFERA_MODEL_DIR)
# Which model, in order: --model DIR, then $INFERA_MODEL_DIR (for either, a folder without weights
# is filled with `hf download Qwen/Qwen3-0.6B` where the network allows); else models/Qwen3-0.6B if
# its weights are there; else models/infera-demo, the small model trained by tools/train_demo_model
# that ships in the repository, so the first run writes real text with no network.
set -euo pipefail
cd "$(dirname "$0")/.."

model_dir="${INFERA_MODEL_DIR:-}"
if [ "${1:-}" = "--model" ]; then
  [ $# -ge 2 ] || { echo "usage: scripts/run.sh [--model DIR] [prompt]" >&2; exit 2; }
  model_dir=$2
  shift 2
fi
prompt_arg="${1:-}"

scripts/setup.sh
scripts/build.sh release

has_weights() { [ -f "$1/model.safetensors" ] || [ -f "$1/model.safetensors.index.json" ]; }
demo_dir=models/infera-demo

if [ -z "$model_dir" ]; then
  if has_weights models/Qwen3-0.6B; then model_dir=models/Qwen3-0.6B; else model_dir=$demo_dir; fi
fi

if [ "$model_dir" != "$demo_dir" ] && ! has_weights "$model_dir"; then
  echo "No weights in $model_dir; trying: hf download Qwen/Qwen3-0.6B --local-dir $model_dir" >&2
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
infera: no weights in $model_dir, and they could not be downloaded here.
  Get Qwen3-0.6B on a networked machine:  hf download Qwen/Qwen3-0.6B --local-dir $model_dir
  (or point --model / INFERA_MODEL_DIR at a folder that has them), then run scripts/run.sh again.
  Without --model, scripts/run.sh uses the bundled demo model in $demo_dir.
  Speed on Qwen3-0.6B's shape with seeded random weights:
    build/release/infera run --model $shared/models/qwen3-0.6b --dummy-weights --synthetic-prompt 128 --max-tokens 128 --ignore-eos
MSG
  exit 1
fi

if [ "$model_dir" = "$demo_dir" ]; then
  # A base model: it continues text (no chat template), so the prompt should read like its corpus.
  cat >&2 <<MSG
Using infera's bundled demo model ($demo_dir): a 16.9M-parameter Qwen3 trained from scratch on
Jane Austen's novels, the King James Bible and the Python documentation. It continues text in
those styles; it does not chat or know facts. For a real Qwen3: scripts/run.sh --model DIR "prompt".
MSG
  prompt="${prompt_arg:-It was a fine morning at Longbourn, and Elizabeth}"
  exec build/release/infera run --model "$model_dir" --raw --prompt "$prompt" --max-tokens 200
fi
echo "Using the Hugging Face model folder $model_dir" >&2
prompt="${prompt_arg:-Give me a short introduction to large language models.}"
exec build/release/infera run --model "$model_dir" --prompt "$prompt" --max-tokens 256
