#!/bin/bash
# cuda4 run 2: every GPU suite, memcheck + racecheck of sample_rows, step_bench --sampled twice
# (host record + flush per timed decode step), ncu of the sample_rows kernel.
cd "$(dirname "$0")"
HERE=$PWD
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
DEADLINE=${DEADLINE:-285}
for t in bin.tar.xz shared.tar.xz; do tar xJf $t; done
export LD_LIBRARY_PATH=$HERE/lib:/usr/local/cuda/lib64:$LD_LIBRARY_PATH
export INFERA_SHARED_DIR=$HERE/shared
T=$OUT/tests.log; B=$OUT/bench.log; S=$OUT/sanitizer.log; N=$OUT/ncu.log
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
step "cuda backend + sampling tests" 60 $T $HERE/bin/test_cuda_backend
step "op harness cuda+cuda_exact" 60 $T $HERE/bin/test_backend_ops --gtest_filter='*/cuda:*/cuda_exact'
for dev in cuda cuda-exact; do
  step "model tests $dev" 40 $T env INFERA_TEST_DEVICE=$dev $HERE/bin/test_model --gtest_filter='Fixtures/*:*BatchParity*:*Qwen3Weights*'
  step "engine tests $dev" 30 $T env INFERA_TEST_DEVICE=$dev $HERE/bin/test_engine --gtest_filter='*GeneratorTest*:*ForwardArgmax*'
done
M="--model $INFERA_SHARED_DIR/models/qwen3-0.6b --dummy-weights --device cuda --kv-dtype bf16"
for i in 1 2; do
  step "step_bench --sampled #$i" 60 $B $HERE/bin/step_bench $M --prefill 512 --batch 1,8,64,256 --context 512 --decode-steps 16 --repeats 3 --sampled --json $OUT/step_bench_$i.json
done
step "ncu sample_rows" 40 $N ncu --clock-control none -k regex:sample_rows --launch-count 12 --metrics gpu__time_duration.sum,dram__bytes_read.sum,lts__t_bytes.sum $HERE/bin/test_cuda_backend --gtest_filter='CudaSamplingTest.SampleRows*'
step "racecheck sampling (narrow rows)" 50 $S compute-sanitizer --tool racecheck --error-exitcode 3 $HERE/bin/test_cuda_backend --gtest_filter='CudaSamplingTest.NarrowRows*:CudaSamplingTest.Greedy*'
step "memcheck sampling + graphs" 80 $S compute-sanitizer --tool memcheck --error-exitcode 3 $HERE/bin/test_cuda_backend --gtest_filter='CudaSampling*:*GraphReplay*:*Streamed*'
echo "== summary (t=${SECONDS}s)"
grep -E "^(==|rc )|^\[  (FAILED|PASSED)  \]|Failure|compared|mismatch" $T | tail -60
grep -E "ERROR SUMMARY|RACECHECK SUMMARY|^rc |^==" $S
grep -E "^(==|rc )|prefill .*tokens|decode batch" $B | head -60
grep -E "sample_rows|gpu__time|^rc" $N | head -40
