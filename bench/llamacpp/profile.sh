#!/usr/bin/env bash
# Where the time goes, for the side-by-side numbers: `perf record` of infera bench and of
# llama-bench on one GGUF file, decode and prefill separately, and the top symbols of each
# (perf report --no-children). Installs perf from Debian if missing. Output under
# bench/results/profile_<time>/. Usage: bench/llamacpp/profile.sh FILE.gguf [THREADS]
set -euo pipefail
cd "$(dirname "$0")/../.."
GGUF="$1"
THREADS="${2:-2}"
command -v perf >/dev/null || { apt-get update -qq && apt-get install -y -qq linux-perf; }
LLAMA="$(scripts/llamacpp_build.sh | tail -1)"
OUT="bench/results/profile_$(date +%Y%m%d_%H%M%S)"
mkdir -p "$OUT"
name=$(basename "$GGUF" .gguf)
prof() {  # LABEL COMMAND...
  local label=$1
  shift
  perf record -F 999 -g -o "$OUT/$label.data" -- "$@" >"$OUT/$label.stdout" 2>"$OUT/$label.stderr"
  perf report -i "$OUT/$label.data" --no-children --percent-limit 1.5 --stdio 2>/dev/null |
    grep -E '^ +[0-9]' | head -25 >"$OUT/$label.top.txt"
  echo "== $label"
  cat "$OUT/$label.top.txt"
}
prof "infera-decode-$name" build/release/infera bench --model "$GGUF" --threads "$THREADS" --prefill 1 \
  --decode-context 128 --decode-steps 32 --repeats 1 --warmup 0 --skip-machine --quiet --out "$OUT/infera-decode.json"
prof "llama-decode-$name" "$LLAMA/llama-bench" -m "$GGUF" -t "$THREADS" -p 0 -n 32 -d 128 -r 1
prof "infera-prefill-$name" build/release/infera bench --model "$GGUF" --threads "$THREADS" --prefill 512 \
  --decode-context 1 --decode-steps 1 --repeats 1 --warmup 0 --skip-machine --quiet --out "$OUT/infera-prefill.json"
prof "llama-prefill-$name" "$LLAMA/llama-bench" -m "$GGUF" -t "$THREADS" -p 512 -n 0 -r 1
rm -f "$OUT"/*.data
