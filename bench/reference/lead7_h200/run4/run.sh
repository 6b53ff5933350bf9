#!/bin/bash
# Session 7 lead, run 4: the decode attention kernels' shared key-span helper
# (decode_block_key_span): every GPU test, memcheck and racecheck of the paged decode attention
# on the staged and the register kernel.
cd "$(dirname "$0")"
HERE=$PWD
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
DEADLINE=${DEADLINE:-300}
for t in bin.tar.xz shared.tar.xz; do tar xJf $t; done
export LD_LIBRARY_PATH=$HERE/lib:/usr/local/cuda/lib64:$LD_LIBRARY_PATH
export INFERA_SHARED_DIR=$HERE/shared
T=$OUT/tests.log; S=$OUT/sanitizer.log
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
export INFERA_SOURCE_DIR=$PWD
step "op harness, every cuda target" 90 $T $HERE/bin/test_backend_ops --gtest_filter='*/cuda:*/cuda_exact:*/cuda_skinny:*/cuda_unstaged:*/cuda_interleaved:*/cuda_prefill_toggled:*/cuda_b1'
step "cuda backend tests" 40 $T $HERE/bin/test_cuda_backend
step "model tests cuda" 40 $T env INFERA_TEST_DEVICE=cuda $HERE/bin/test_model --gtest_filter='Fixtures/*:*BatchParity*:*Qwen3Weights*:*ModernBert*'
step "model tests cuda-exact" 40 $T env INFERA_TEST_DEVICE=cuda-exact $HERE/bin/test_model --gtest_filter='Fixtures/*:*BatchParity*:*Qwen3Weights*'
step "engine tests cuda" 30 $T env INFERA_TEST_DEVICE=cuda $HERE/bin/test_engine --gtest_filter='*GeneratorTest*:*ForwardArgmax*'
step "memcheck paged decode attention, staged + register" 60 $S compute-sanitizer --tool memcheck --error-exitcode 3 $HERE/bin/test_backend_ops --gtest_filter='*KvWriteAndPagedAttention/cuda:*KvWriteAndPagedAttention/cuda_unstaged'
step "racecheck decode attention, staged + register" 60 $S compute-sanitizer --tool racecheck --error-exitcode 3 $HERE/bin/test_cuda_backend --gtest_filter='*NarrowRows*:*Greedy*'
step "racecheck register decode attention" 60 $S env INFERA_CUDA_DECODE_STAGED=0 compute-sanitizer --tool racecheck --error-exitcode 3 $HERE/bin/test_cuda_backend --gtest_filter='*NarrowRows*:*Greedy*'
echo "== summary (t=${SECONDS}s)"
grep -E "^(==|rc )|^\[  (FAILED|PASSED)  \]|tests ran|ERROR SUMMARY|SKIPPED \] [0-9]" $T $S | tail -40
