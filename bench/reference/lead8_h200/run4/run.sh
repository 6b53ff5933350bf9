#!/bin/bash
# Session 8 lead, run 4: the flash-family dedup (one warp key-range union helper, one type/head_dim
# dispatch for the three flash launchers): the op harness's attention cases on every cuda target,
# and step_bench prefill, main (0c8e4b3, "merged") against the dedup, 3 alternating rounds.
cd "$(dirname "$0")"
HERE=$PWD
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
tar xJf bin.tar.xz; tar xJf shared.tar.xz
export LD_LIBRARY_PATH=$HERE/lib:/usr/local/cuda/lib64:$LD_LIBRARY_PATH
export INFERA_SHARED_DIR=$HERE/shared
T=$OUT/tests.log; B=$OUT/bench.log
timeout 150 $HERE/bin/test_backend_ops --gtest_filter='*Attention*/cuda*:*Encoder*/cuda*' > $T 2>&1; echo "rc $? (op harness attention)" >> $T
M=$INFERA_SHARED_DIR/models/qwen3-0.6b
A="--model $M --dummy-weights --device cuda --kv-dtype bf16 --prefill 512,2048 --prefill-batch 8x512 --batch 1 --context 512 --decode-steps 16 --repeats 7"
for i in 1 2 3; do
  echo "== merged #$i" >> $B; timeout 30 $HERE/bin/step_bench_merged $A >> $B 2>&1
  echo "== dedup #$i" >> $B; timeout 30 $HERE/bin/step_bench $A >> $B 2>&1
done
grep -E "^\[  (FAILED|PASSED)|^rc|worst NMSE" $T | tail -60
grep -E "^==|prefill|decode batch" $B
