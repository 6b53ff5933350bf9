#!/usr/bin/env bash
# Session 11 lead's quiet 2-thread CPU run (issue 8's decode roofline) of the merged tree:
#   bench/reference/lead11_cpu/quiet_run.sh BASE_INFERA [OUT_DIR]
# BASE_INFERA = main dfa055c's binary. Run from the repository root with build/release/infera
# built at the merged tree. Makes the dummy GGUF files under build/gguf-0.6b/ if missing. Needs a
# quiet machine (every run.cpu_share >= 0.95; rounds under 0.9 are left out of the quiet ratios).
#   1. roofline fractions (decode.128.adjacent_roofline_fraction) of q4_k_m, q8_0, bf16 (new);
#   2. alternating A/B, 3 rounds each, against main and against the new binary with the decode
#      GEMVs' fixed split (INFERA_CPU_DYNAMIC_ROWS=0): q8_0, q4_k_m (and its GFNI unpack off), bf16.
set -euo pipefail
base=${1:?main binary}
out=${2:-bench/reference/lead11_cpu/quiet}
new=build/release/infera
mkdir -p "$out" build/gguf-0.6b
for f in bf16 q8_0 q4_k_m; do
  g=build/gguf-0.6b/qwen3-0.6b-dummy-$f.gguf
  [ -f "$g" ] || $new quantize --model ${INFERA_SHARED_DIR:-../shared}/models/qwen3-0.6b \
      --dummy-weights --type $f --out "$g" > /dev/null
done
uptime | tee "$out/uptime_start.txt"
grep -m1 'model name' /proc/cpuinfo | tee "$out/cpu_flags.txt"
grep -o -w 'avx_vnni\|avx512_vnni\|avx512_bf16\|gfni' /proc/cpuinfo | sort | uniq -c | tee -a "$out/cpu_flags.txt"
for f in q4_k_m q8_0 bf16; do
  $new bench -m build/gguf-0.6b/qwen3-0.6b-dummy-$f.gguf --threads 2 --prefill 128 \
      --decode-context 128 --decode-steps 64 --repeats 5 --label lead11_$f \
      --out "$out/bench_$f.json" -q | tail -n 8
done
python3 bench/reference/cpudec/roofline_summary.py "$out"/bench_*.json | tee "$out/roofline.txt"
ab() {  # FILE_TYPE VARIANTS...
  local f=$1; shift
  python3 bench/ab_bench_variants.py --out "$out/ab_$f" --rounds 3 "$@" -- \
      -m build/gguf-0.6b/qwen3-0.6b-dummy-$f.gguf --threads 2 --prefill 128 \
      --decode-context 128 --decode-steps 64 --repeats 2 --skip-machine | tail -n 10 | tee "$out/ab_$f.txt"
}
ab q8_0 base="$base" new=$new "fixed=INFERA_CPU_DYNAMIC_ROWS=0 $new"
ab q4_k_m base="$base" new=$new "fixed=INFERA_CPU_DYNAMIC_ROWS=0 $new" "shift=INFERA_CPU_Q6K_GFNI=0 $new"
ab bf16 base="$base" new=$new "fixed=INFERA_CPU_DYNAMIC_ROWS=0 $new"
uptime | tee "$out/uptime_end.txt"
