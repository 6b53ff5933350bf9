#!/bin/bash
# Session 12 lead, run 3: decode_stack after run 2 (barrier arrive / wait split): per-block
# barrier timestamps of one launch (INFERA_CUDA_DECODE_STACK_TRACE) and the arrival's fence
# variants (INFERA_CUDA_DECODE_STACK_TUNE=1: fence.acq_rel, =2: red.release) against the switch off.
cd "$(dirname "$0")"; HERE=$PWD
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
DEADLINE=${DEADLINE:-300}
tar xJf bin.tar.xz; tar xJf shared.tar.xz
export LD_LIBRARY_PATH=$HERE/lib:/usr/local/cuda/lib64:$LD_LIBRARY_PATH
export INFERA_SHARED_DIR=$HERE/shared
B=$HERE/bin; R=$OUT/raw; mkdir -p $R
T=$OUT/tests.log; L=$OUT/bench.log
left() { echo $((DEADLINE - SECONDS)); }
step() {
  local name=$1 secs=$2 log=$3; shift 3
  local l=$(left)
  if [ "$l" -lt 5 ]; then echo "== $name SKIPPED (deadline)" | tee -a $log; return; fi
  [ "$secs" -gt "$l" ] && secs=$l
  echo "== $name (timeout ${secs}s, t=${SECONDS}s)" | tee -a $log
  timeout $secs "$@" >> $log 2>&1; echo "rc $? ($name, t=${SECONDS}s)" | tee -a $log
}
export INFERA_SOURCE_DIR=$(cd $HERE/../.. && pwd)
M=$INFERA_SHARED_DIR/models/qwen3-0.6b
for t in 0 1 2; do
  timeout 60 env INFERA_CUDA_DECODE_STACK_TUNE=$t $B/test_cuda_backend --gtest_filter='*DecodeStack*' > $R/stack_$t.log 2>&1; echo "rc $?" >> $R/stack_$t.log
  echo "== stack tune $t" >> $T; grep -E "PASSED|FAILED|decode_stack kernels|^rc" $R/stack_$t.log >> $T
done
A="--model $M --dummy-weights --device cuda --kv-dtype bf16 --batch 1 --context 512 --decode-steps 64 --repeats 5 --prefill 64"
for i in 1 2 3; do
  step "b1 off #$i" 20 $L env INFERA_CUDA_DECODE_STACK=0 $B/step_bench $A
  for t in 0 1 2; do
    step "b1 on t$t #$i" 20 $L env INFERA_CUDA_DECODE_STACK=1 INFERA_CUDA_DECODE_STACK_TUNE=$t $B/step_bench $A
  done
done
for t in 0 2; do
  step "trace t$t" 20 $L env INFERA_CUDA_DECODE_STACK=1 INFERA_CUDA_DECODE_STACK_TUNE=$t INFERA_CUDA_DECODE_STACK_TRACE=$OUT/trace_t$t.bin $B/step_bench $A
  step "trace t$t p1" 20 $L env INFERA_CUDA_DECODE_STACK=1 INFERA_CUDA_DECODE_STACK_PREFETCH=1 INFERA_CUDA_DECODE_STACK_TUNE=$t INFERA_CUDA_DECODE_STACK_TRACE=$OUT/trace_t${t}_p1.bin $B/step_bench $A
done
echo "all done t=${SECONDS}s" | tee -a $T
tar czf $OUT/raw.tgz -C $OUT raw && rm -rf $OUT/raw
