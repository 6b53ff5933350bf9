#!/bin/bash
# Session 11 lead, run 2 (same staged binaries as run 1): run 1's 8x512 first-token-ids median
# (3 repeats) caught a slow step in the new binary (samples 13.3 / 10.25 / 12.1 ms against main's
# 14.5 / 10.24 / 10.25): prefill only, 9 repeats, main / new alternating, 3 rounds; the encoder
# (run 1 ran it outside the checkout: no config).
cd "$(dirname "$0")"; HERE=$PWD
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
DEADLINE=${DEADLINE:-200}
[ -d bin ] || tar xJf bin.tar.xz; [ -d shared ] || tar xJf shared.tar.xz
export LD_LIBRARY_PATH=$HERE/lib:/usr/local/cuda/lib64:$LD_LIBRARY_PATH
export INFERA_SHARED_DIR=$HERE/shared
B=$HERE/bin; L=$OUT/bench.log; J=$OUT/json; mkdir -p $J
left() { echo $((DEADLINE - SECONDS)); }
step() {
  local name=$1 secs=$2 log=$3; shift 3
  local l=$(left)
  if [ "$l" -lt 5 ]; then echo "== $name SKIPPED (deadline)" | tee -a $log; return; fi
  [ "$secs" -gt "$l" ] && secs=$l
  echo "== $name (timeout ${secs}s, t=${SECONDS}s)" | tee -a $log
  timeout $secs "$@" >> $log 2>&1; echo "rc $? ($name, t=${SECONDS}s)" | tee -a $log
}
cd $HERE/../..
M=$INFERA_SHARED_DIR/models/qwen3-0.6b
A="--model $M --dummy-weights --device cuda --kv-dtype bf16 --prefill 512,2048 --prefill-batch 8x512 --batch 1 --context 512 --decode-steps 8 --repeats 9"
for i in 1 2 3; do
  step "sb main #$i" 30 $L $B/step_bench_main $A --json $J/main_$i.json
  step "sb new #$i" 30 $L $B/step_bench $A --json $J/new_$i.json
done
EB="--device cuda --config bench/configs/modernbert-large --batch 1x93 --batch 50x93 --batch 10x512 --batch 64x512 --runs 10 --attention-runs 0 --warmup 2"
step "encoder new" 30 $L $B/encoder_bench $EB --out $J/encoder_new.json
cd $J && tar cJf $OUT/json.tar.xz *.json
echo "== summary (t=${SECONDS}s)"
grep -E "^(==|rc )|prefill  |decode batch.*greedy|windowed min|^ *[0-9]+x[0-9]+" $L | tail -60
