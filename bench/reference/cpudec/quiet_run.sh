#!/usr/bin/env bash
# The lead's quiet 2-thread measurement of issue 8's decode roofline (cpudec):
#   bench/reference/cpudec/quiet_run.sh BASE_INFERA [OUT_DIR]
# BASE_INFERA = main's binary before this branch (for the speed A/B). Run from the repository
# root with build/release/infera built and build/gguf-0.6b/ holding the dummy GGUF files
# (scripts/make_gguf_0.6b.sh or infera quantize). About 6-8 minutes on the 2-core VM.
set -euo pipefail
base=${1:?main binary}
out=${2:-bench/reference/cpudec/quiet}
mkdir -p "$out"
uptime | tee "$out/uptime_start.txt"
# 1. The roofline fractions, each file: probes before/after/between repeats and, new, a short
#    probe every 16 decode steps (decode.128.adjacent_roofline_fraction).
for f in bf16 q8_0 q4_k_m; do
  build/release/infera bench -m build/gguf-0.6b/qwen3-0.6b-dummy-$f.gguf --threads 2 \
      --prefill 128 --decode-context 128 --decode-steps 64 --repeats 5 --label cpudec_$f \
      --out "$out/bench_$f.json" -q | tail -n 8
done
python3 bench/reference/cpudec/roofline_summary.py "$out"/bench_*.json | tee "$out/roofline.txt"
# 2. Speed against main, alternating (bf16: streams and fused sections one by one).
python3 bench/ab_bench_variants.py --out "$out/ab_bf16" --rounds 4 base="$base" \
    new=build/release/infera "sep=INFERA_CPU_FUSED_BF16=0 build/release/infera" \
    "s1=INFERA_CPU_GEMV_STREAMS=1 build/release/infera" -- \
    -m build/gguf-0.6b/qwen3-0.6b-dummy-bf16.gguf --threads 2 --prefill 128 \
    --decode-context 128 --decode-steps 64 --repeats 2 --skip-machine | tail -n 12 | tee "$out/ab_bf16.txt"
uptime | tee "$out/uptime_end.txt"
