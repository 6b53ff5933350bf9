#!/bin/bash
# Session 11 lead, run 1: the merged tree on the H200. Staged by scripts/device_stage.sh into
# .devcarry/lead11 (bin.tar.xz: the merged tree's binaries + main dfa055c's step_bench_main and
# encoder_bench_main; lib/; shared.tar.xz). Every CUDA suite, the op harness on every CUDA target
# as 8 shards, sanitizers on the new kernels' tests, then step_bench and encoder_bench against
# main's binaries in alternating rounds (ratios: bench/reference/lead9_h200/ratios.py main new).
cd "$(dirname "$0")"; HERE=$PWD
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
DEADLINE=${DEADLINE:-420}
tar xJf bin.tar.xz; tar xJf shared.tar.xz
export LD_LIBRARY_PATH=$HERE/lib:/usr/local/cuda/lib64:$LD_LIBRARY_PATH
export INFERA_SHARED_DIR=$HERE/shared
B=$HERE/bin
T=$OUT/tests.log; L=$OUT/bench.log; E=$OUT/encoder.log; S=$OUT/sanitizer.log; J=$OUT/json; mkdir -p $J
left() { echo $((DEADLINE - SECONDS)); }
step() {
  local name=$1 secs=$2 log=$3; shift 3
  local l=$(left)
  if [ "$l" -lt 5 ]; then echo "== $name SKIPPED (deadline)" | tee -a $log; return; fi
  [ "$secs" -gt "$l" ] && secs=$l
  echo "== $name (timeout ${secs}s, t=${SECONDS}s)" | tee -a $log
  timeout $secs "$@" >> $log 2>&1; echo "rc $? ($name, t=${SECONDS}s)" | tee -a $log
}
shards() {  # the op harness as 8 parallel gtest shards
  for i in 0 1 2 3 4 5 6 7; do
    GTEST_TOTAL_SHARDS=8 GTEST_SHARD_INDEX=$i $B/test_backend_ops --gtest_filter="$1" > $OUT/shard_$i.log 2>&1 &
  done
  wait
  cat $OUT/shard_*.log | grep -E "^\[  (FAILED|PASSED)  \]|tests ran|Failure|over the bound" ; rm -f $OUT/shard_*.log
}
# The source tree (the checkout that travelled) for tests that read tests/data.
export INFERA_SOURCE_DIR=$(cd $HERE/../.. && pwd)
cd $INFERA_SOURCE_DIR
M=$INFERA_SHARED_DIR/models/qwen3-0.6b
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv > $OUT/gpu.txt 2>&1
step "cuda backend tests" 40 $T $B/test_cuda_backend
step "model tests cuda" 30 $T env INFERA_TEST_DEVICE=cuda $B/test_model
step "model tests cuda-exact" 30 $T env INFERA_TEST_DEVICE=cuda-exact $B/test_model --gtest_filter='Fixtures/*:*BatchParity*:*Qwen3Weights*'
step "engine tests cuda" 20 $T env INFERA_TEST_DEVICE=cuda $B/test_engine
step "decision tests cuda" 20 $T env INFERA_TEST_DEVICE=cuda $B/test_decision
step "op harness, every cuda target, 8 shards" 60 $T shards '*/cuda*'
A="--model $M --dummy-weights --device cuda --kv-dtype bf16 --prefill 512,2048 --prefill-batch 8x512 --batch 1,8,64,256 --context 512 --decode-steps 32 --repeats 5"
EB="--device cuda --config bench/configs/modernbert-large --batch 1x93 --batch 50x93 --batch 10x512 --batch 64x512 --runs 10 --attention-runs 0 --warmup 2"
for i in 1 2 3; do
  step "sb main #$i" 25 $L $B/step_bench_main $A --json $J/main_$i.json
  step "sb new #$i" 25 $L $B/step_bench $A --json $J/new_$i.json
done
for i in 1 2; do
  step "encoder main #$i" 15 $E $B/encoder_bench_main $EB --out $J/encoder_main_$i.json
  step "encoder new #$i" 15 $E $B/encoder_bench $EB --out $J/encoder_new_$i.json
done
SAN_FILTER=${SAN_FILTER:-'CudaStreamTest.*:CudaWgmmaAttentionTest.*:*GraphReplay*'}
step "memcheck new kernels" 50 $S compute-sanitizer --tool memcheck --error-exitcode 3 $B/test_cuda_backend --gtest_filter="$SAN_FILTER"
cd $J && tar cJf $OUT/bench_json.tar.xz *.json; cd - >/dev/null; rm -rf $J
echo "== summary (t=${SECONDS}s)"
grep -E "^(==|rc )|^\[  (FAILED|PASSED)  \]|Failure|over the bound|ERROR SUMMARY" $T $S | tail -40
grep -E "^(==|rc )|prefill  |decode batch.*greedy" $L | tail -60
grep -E "^==|windowed min" $E | tail -24
