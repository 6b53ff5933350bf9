#!/bin/sh
# Alternates `infera bench` of two binaries (A = $1, B = $2) for $3 rounds (A B, then B A, ...),
# writing each run's result file under $4/<round>-<A|B>/ and printing the prefill / decode lines.
# Extra arguments go to both runs.
#   bench/ab_bench_binaries.sh /tmp/old_infera build/release/infera 3 bench/reference/x \
#       -m build/gguf-0.6b/qwen3-0.6b-dummy-bf16.gguf --threads 2 --matmul-precision bf16 \
#       --prefill 128 512 --decode-context 128 --decode-steps 32 --repeats 3 --skip-machine
A=$1; B=$2; R=$3; OUT=$4; shift 4
for r in $(seq 1 "$R"); do
  if [ $((r % 2)) -eq 1 ]; then order="A B"; else order="B A"; fi
  for v in $order; do
    if [ "$v" = A ]; then bin=$A; else bin=$B; fi
    mkdir -p "$OUT/$r-$v"
    echo "round $r $v: $bin (load $(cut -d' ' -f1 /proc/loadavg))"
    "$bin" bench --out-dir "$OUT/$r-$v" "$@" 2>&1 | grep -E '^(load|prefill|decode)\.[0-9a-z_.]*(tokens_per_second|seconds) '
  done
done
