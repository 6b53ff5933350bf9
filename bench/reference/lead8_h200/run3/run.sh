#!/bin/bash
# Session 8 lead, run 3: where the merged tree's batch-1 decode loses ~1.5 % (runs 1-2, every
# switch variant): main / merged / cudafa's branch alone / cudabd's branch alone, batch 1 only,
# 6 alternating rounds.
cd "$(dirname "$0")"
HERE=$PWD
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
tar xJf bin.tar.xz; tar xJf bin2.tar.xz; tar xJf shared.tar.xz
export LD_LIBRARY_PATH=$HERE/lib:/usr/local/cuda/lib64:$LD_LIBRARY_PATH
export INFERA_SHARED_DIR=$HERE/shared
B=$OUT/bench.log; J=$OUT/json; mkdir -p $J
M=$INFERA_SHARED_DIR/models/qwen3-0.6b
A="--model $M --dummy-weights --device cuda --kv-dtype bf16 --prefill 512 --batch 1 --context 512 --decode-steps 64 --repeats 5"
for i in 1 2 3 4 5 6; do
  for v in main new fa bd; do
    bin=$HERE/bin/step_bench_$v; [ $v = new ] && bin=$HERE/bin/step_bench
    echo "== $v #$i" >> $B
    timeout 30 $bin $A --json $J/${v}_$i.json >> $B 2>&1
  done
done
cd $J && tar cJf $OUT/step_bench_json.tar.xz *.json
grep -E "^==|decode batch.*greedy" $B
