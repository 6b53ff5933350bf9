#!/bin/bash
# cudas (issue 11, GPU sampling speed): the one H200 run. GPU tests, op harness, compute-sanitizer
# memcheck + racecheck of sample_rows, step_bench --sampled for this branch and main (6ca3c4d)
# alternating twice.
cd "$(dirname "$0")"
HERE=$PWD
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
DEADLINE=${DEADLINE:-180}
for t in bin.tar.xz shared.tar.xz; do tar xJf $t; done
export LD_LIBRARY_PATH=$HERE/lib:/usr/local/cuda/lib64:$LD_LIBRARY_PATH
export INFERA_SHARED_DIR=$HERE/shared
T=$OUT/tests.log; B=$OUT/bench.log; S=$OUT/sanitizer.log
left() { echo $((DEADLINE - SECONDS)); }
step() {
  local name=$1 secs=$2 log=$3; shift 3
  local l=$(left)
  if [ "$l" -lt 8 ]; then echo "== $name SKIPPED (deadline)" | tee -a $log; return; fi
  [ "$secs" -gt "$l" ] && secs=$l
  echo "== $name (timeout ${secs}s, t=${SECONDS}s)" >> $log
  timeout $secs "$@" >> $log 2>&1; echo "rc $? ($name, t=${SECONDS}s)" | tee -a $log
}
nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv | tee -a $T
cd $HERE/../..
step "test_cuda_backend (all)" 45 $T $HERE/bin/test_cuda_backend
step "op harness cuda+cuda_exact" 40 $T $HERE/bin/test_backend_ops --gtest_filter='*/cuda:*/cuda_exact'
step "memcheck sampling narrow + full width (TopKCut)" 30 $S compute-sanitizer --tool memcheck --error-exitcode 3 $HERE/bin/test_cuda_backend --gtest_filter='CudaSamplingTest.NarrowRows*:CudaSamplingTest.TopKCut*'
step "racecheck sampling narrow rows" 25 $S compute-sanitizer --tool racecheck --error-exitcode 3 $HERE/bin/test_cuda_backend --gtest_filter='CudaSamplingTest.NarrowRows*'
M="--model $INFERA_SHARED_DIR/models/qwen3-0.6b --dummy-weights --device cuda --kv-dtype bf16"
for i in 1 2; do
  for v in new main; do
    b=$HERE/bin/step_bench; [ $v = main ] && b=$HERE/bin/step_bench_main
    step "step_bench --sampled $v #$i" 25 $B $b $M --prefill 512 --batch 1,8,64,256 --context 512 --decode-steps 16 --repeats 3 --sampled --json $OUT/step_bench_${v}_$i.json
  done
done
step "racecheck sampling full width (TopKCut)" 30 $S compute-sanitizer --tool racecheck --error-exitcode 3 $HERE/bin/test_cuda_backend --gtest_filter='CudaSamplingTest.TopKCut*'
echo "== summary (t=${SECONDS}s)"
grep -E "^(==|rc )|^\[  (FAILED|PASSED)  \]|Failure|compared|mismatch" $T | tail -40
grep -E "ERROR SUMMARY|RACECHECK SUMMARY|^rc |^==" $S
grep -E "^(==|rc )|sampled on device|greedy ids" $B | head -60
