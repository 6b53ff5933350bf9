#!/usr/bin/env bash
# The lead's quiet 2-thread measurement of issue 8's decode roofline after cpuq8:
#   bench/reference/cpuq8/quiet_run.sh BASE_INFERA [OUT_DIR]
# BASE_INFERA = main's binary before this branch (/work/base/s10/infera_main). Run from the
# repository root with build/release/infera built at this branch's head. Makes the dummy GGUF
# files under build/gguf-0.6b/ if missing (~1 min). About 9-11 minutes on the 2-core VM.
# NOTE: main's binary dies with SIGILL on q8_0 on an AMD Zen 4 VM (no AVX-VNNI; fixed here by
# 14953bc), so the q8_0 A/B compares against main's configuration of THIS binary
# (INFERA_CPU_REPACK=q4_0,q4_k,bf16: Q8_0 in the file's rows; the rows kernel has no prefetch).
set -euo pipefail
base=${1:?main binary}
out=${2:-bench/reference/cpuq8/quiet}
new=build/release/infera
mkdir -p "$out" build/gguf-0.6b
for f in bf16 q8_0 q4_k_m; do
  g=build/gguf-0.6b/qwen3-0.6b-dummy-$f.gguf
  [ -f "$g" ] || $new quantize --model ${INFERA_SHARED_DIR:-../shared}/models/qwen3-0.6b \
      --dummy-weights --type $f --out "$g"
done
uptime | tee "$out/uptime_start.txt"
grep -o -w 'avx_vnni\|avx512_vnni\|avx512_bf16' /proc/cpuinfo | sort | uniq -c | tee "$out/cpu_flags.txt"
# 1. Roofline fractions (decode.128.adjacent_roofline_fraction: blocks of 16 steps against the
#    probes on either side), each file.
for f in q8_0 q4_k_m bf16; do
  $new bench -m build/gguf-0.6b/qwen3-0.6b-dummy-$f.gguf --threads 2 --prefill 128 \
      --decode-context 128 --decode-steps 64 --repeats 5 --label cpuq8_$f \
      --out "$out/bench_$f.json" -q | tail -n 8
done
python3 bench/reference/cpudec/roofline_summary.py "$out"/bench_*.json | tee "$out/roofline.txt"
# 2. Speed, alternating. q4_k_m: main, this branch, its previous prefetch, Q6_K-era streams.
python3 bench/ab_bench_variants.py --out "$out/ab_q4_k_m" --rounds 4 base="$base" new=$new \
    "pf1k=INFERA_CPU_ROWGROUP_PREFETCH=1024 $new" -- \
    -m build/gguf-0.6b/qwen3-0.6b-dummy-q4_k_m.gguf --threads 2 --prefill 128 \
    --decode-context 128 --decode-steps 64 --repeats 2 --skip-machine | tail -n 8 | tee "$out/ab_q4_k_m.txt"
# q8_0 (every weight Q8_0): main's configuration of this binary (see NOTE) against this branch.
python3 bench/ab_bench_variants.py --out "$out/ab_q8_0" --rounds 4 \
    "mainlike=INFERA_CPU_REPACK=q4_0,q4_k,bf16 $new" new=$new -- \
    -m build/gguf-0.6b/qwen3-0.6b-dummy-q8_0.gguf --threads 2 --prefill 128 \
    --decode-context 128 --decode-steps 64 --repeats 2 --skip-machine | tail -n 8 | tee "$out/ab_q8_0.txt"
uptime | tee "$out/uptime_end.txt"
