#!/usr/bin/env bash
# The lead's quiet 2-thread measurement of issue 8's decode roofline after cpuq6 (session 11):
#   bench/reference/cpuq6/quiet_run.sh BASE_INFERA [OUT_DIR]
# BASE_INFERA = main's binary before this branch (copy /work/main/build/release/infera somewhere
# first, e.g. /tmp/infera_main). Run from the repository root with build/release/infera built at
# this branch's head (or main after the merge). Makes the dummy GGUF files under build/gguf-0.6b/
# if missing (~1 min). About 10-12 minutes on the 2-core VM; needs a quiet machine (check that
# every run.cpu_share printed is >= 0.95; rounds below 0.9 are left out of the quiet ratios).
#   1. roofline fractions (decode.128.adjacent_roofline_fraction) of q4_k_m, q8_0, bf16;
#   2. alternating A/B, 4 rounds each: q4_k_m main / this branch / this branch with the Q6_K
#      shift unpack (INFERA_CPU_Q6K_GFNI=0: the GFNI unpack's own share); q8_0 main / this branch.
set -euo pipefail
base=${1:?main binary}
out=${2:-bench/reference/cpuq6/quiet}
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
# 1. Roofline fractions: blocks of 16 decode steps against the probes on either side.
for f in q4_k_m q8_0 bf16; do
  $new bench -m build/gguf-0.6b/qwen3-0.6b-dummy-$f.gguf --threads 2 --prefill 128 \
      --decode-context 128 --decode-steps 64 --repeats 5 --label cpuq6_$f \
      --out "$out/bench_$f.json" -q | tail -n 8
done
python3 bench/reference/cpudec/roofline_summary.py "$out"/bench_*.json | tee "$out/roofline.txt"
# 2. Speed, alternating (per-round ratios against the first variant; quiet rounds listed last).
python3 bench/ab_bench_variants.py --out "$out/ab_q4_k_m" --rounds 4 base="$base" new=$new \
    "shift=INFERA_CPU_Q6K_GFNI=0 $new" -- \
    -m build/gguf-0.6b/qwen3-0.6b-dummy-q4_k_m.gguf --threads 2 --prefill 128 \
    --decode-context 128 --decode-steps 64 --repeats 2 --skip-machine | tail -n 8 | tee "$out/ab_q4_k_m.txt"
python3 bench/ab_bench_variants.py --out "$out/ab_q8_0" --rounds 4 base="$base" new=$new -- \
    -m build/gguf-0.6b/qwen3-0.6b-dummy-q8_0.gguf --threads 2 --prefill 128 \
    --decode-context 128 --decode-steps 64 --repeats 2 --skip-machine | tail -n 8 | tee "$out/ab_q8_0.txt"
uptime | tee "$out/uptime_end.txt"
