#!/usr/bin/env bash
# Quality of every quantized format against its bf16 source, by `infera eval` (KL divergence and
# top-1 agreement of next-token distributions, perplexity of both), over 512 positions of
# tests/data/infera-demo/heldout.txt, on:
#   - the qwen3-micro fixture (random weights; tokenizer of Qwen3-0.6B);
#   - the Qwen3-0.6B shape with dummy (seeded random) weights: the reference is
#     `--model ../shared/models/qwen3-0.6b --dummy-weights` (bf16), the candidates the files
#     `infera quantize --dummy-weights` writes from the same seed. KL here is on random weights;
#   - the trained demo model models/infera-demo: the meaningful numbers.
# JSON results: bench/results/eval_<model>_<time>.json. Usage: bench/quality/run_eval.sh [BIN]
# (GGUF files are kept under build/eval-gguf/, the 0.6B ones shared with bench/llamacpp.)
set -euo pipefail
cd "$(dirname "$0")/../.."
BIN="${1:-build/release/infera}"
SHARED="${INFERA_SHARED_DIR:-../shared}"
TEXT=tests/data/infera-demo/heldout.txt
STAMP=$(date +%Y%m%d_%H%M%S)
mkdir -p build/eval-gguf build/gguf-0.6b bench/results

quantize() {  # MODEL NAME TYPE [extra...] -> path of the file
  local model=$1 name=$2 type=$3 dir=$4
  shift 4
  local out="$dir/$name-$type.gguf"
  [ -f "$out" ] || "$BIN" quantize --model "$model" --type "$type" --out "$out" "$@" >&2
  echo "$out"
}

run_eval() {  # NAME REFERENCE-ARGS... -- CANDIDATES...
  local name=$1
  shift
  "$BIN" eval "$@" --text-file "$TEXT" --positions 512 --out "bench/results/eval_${name}_$STAMP.json"
}

cands=()
for t in q8_0 q4_0 q4_k_m; do
  cands+=(--candidate "$(quantize "$SHARED/fixtures/qwen3-micro" qwen3-micro $t build/eval-gguf \
    --tokenizer "$SHARED/models/qwen3-0.6b")")
done
run_eval qwen3-micro --model "$SHARED/fixtures/qwen3-micro" --tokenizer "$SHARED/models/qwen3-0.6b" \
  "${cands[@]}"

cands=()
for t in q8_0 q4_0 q4_k_m; do
  cands+=(--candidate "$(quantize models/infera-demo infera-demo $t build/eval-gguf)")
done
run_eval infera-demo --model models/infera-demo "${cands[@]}"

cands=()
for t in q8_0 q4_0 q4_k_m; do
  cands+=(--candidate "$(quantize "$SHARED/models/qwen3-0.6b" qwen3-0.6b-dummy $t build/gguf-0.6b \
    --dummy-weights)")
done
run_eval qwen3-0.6b-dummy --model "$SHARED/models/qwen3-0.6b" --dummy-weights "${cands[@]}"
