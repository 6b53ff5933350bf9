#!/bin/bash
# Session 8 lead, run 2: the merged tree's batch-1 decode (run 1: x0.98 of main in 3/3 rounds) and
# the key-halves kernel alone: step_bench main / merged / merged with INFERA_CUDA_FLASH_HALVES=0 /
# merged with INFERA_CUDA_PAIRED_GEMM=0 INFERA_CUDA_DECODE_SHADOW=0, 4 alternating rounds; then
# racecheck of the paged attention on the key-halves target (run 1's 60 s were not enough).
cd "$(dirname "$0")"
HERE=$PWD
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
DEADLINE=${DEADLINE:-400}
tar xJf bin.tar.xz; tar xJf shared.tar.xz
export LD_LIBRARY_PATH=$HERE/lib:/usr/local/cuda/lib64:$LD_LIBRARY_PATH
export INFERA_SHARED_DIR=$HERE/shared
B=$OUT/bench.log; S=$OUT/sanitizer.log; J=$OUT/json; mkdir -p $J
left() { echo $((DEADLINE - SECONDS)); }
step() {
  local name=$1 secs=$2 log=$3; shift 3
  local l=$(left)
  if [ "$l" -lt 5 ]; then echo "== $name SKIPPED (deadline)" | tee -a $log; return; fi
  [ "$secs" -gt "$l" ] && secs=$l
  echo "== $name (timeout ${secs}s, t=${SECONDS}s)" | tee -a $log
  timeout $secs "$@" >> $log 2>&1; echo "rc $? ($name, t=${SECONDS}s)" | tee -a $log
}
cd $HERE/../..  # the repository root: this script runs from .devcarry/lead8/
export INFERA_SOURCE_DIR=$PWD
M=$INFERA_SHARED_DIR/models/qwen3-0.6b
A="--model $M --dummy-weights --device cuda --kv-dtype bf16 --prefill 512,2048 --prefill-batch 8x512 --batch 1,8,64,256 --context 512 --decode-steps 32 --repeats 7"
for i in 1 2 3 4; do
  step "sb main #$i" 25 $B $HERE/bin/step_bench_main $A --json $J/main_$i.json
  step "sb new #$i" 30 $B $HERE/bin/step_bench $A --json $J/new_$i.json
  step "sb new halves off #$i" 30 $B env INFERA_CUDA_FLASH_HALVES=0 $HERE/bin/step_bench $A --json $J/nohalves_$i.json
  step "sb new pairs+shadow off #$i" 30 $B env INFERA_CUDA_PAIRED_GEMM=0 INFERA_CUDA_DECODE_SHADOW=0 $HERE/bin/step_bench $A --json $J/nobd_$i.json
done
step "racecheck paged attention, key-halves target" 200 $S compute-sanitizer --tool racecheck --error-exitcode 3 $HERE/bin/test_backend_ops --gtest_filter='*KvWriteAndPagedAttention/cuda_flash_halves'
cd $J && tar cJf $OUT/step_bench_json.tar.xz *.json; cd - >/dev/null; rm -rf $J
echo "== summary (t=${SECONDS}s)"
grep -E "^(==|rc )|^\[  (FAILED|PASSED)  \]|ERROR SUMMARY|RACECHECK SUMMARY|hazard" $S | tail -20
grep -E "^(==|rc )|prefill  |decode batch.*greedy" $B | tail -150
