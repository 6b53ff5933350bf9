#!/bin/bash
# cuda4 run 1: GPU sampling tests, every GPU suite, memcheck/racecheck of sample_rows, step_bench
# with --sampled (host recording per timed decode step), perf of the host side if perf exists.
cd "$(dirname "$0")"
HERE=$PWD
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
DEADLINE=${DEADLINE:-285}
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
step "cuda backend + sampling tests" 60 $T $HERE/bin/test_cuda_backend
step "op harness cuda+cuda_exact" 60 $T $HERE/bin/test_backend_ops --gtest_filter='*/cuda:*/cuda_exact'
for dev in cuda cuda-exact; do
  step "model tests $dev" 40 $T env INFERA_TEST_DEVICE=$dev $HERE/bin/test_model --gtest_filter='Fixtures/*:*BatchParity*:*Qwen3Weights*'
  step "engine tests $dev" 30 $T env INFERA_TEST_DEVICE=$dev $HERE/bin/test_engine --gtest_filter='*GeneratorTest*:*ForwardArgmax*'
done
step "step_bench cuda --sampled" 60 $B $HERE/bin/step_bench --model $INFERA_SHARED_DIR/models/qwen3-0.6b --dummy-weights --device cuda --kv-dtype bf16 --prefill 512 --batch 1,8,64,256 --context 512 --decode-steps 32 --repeats 3 --sampled --json $OUT/step_bench_run1.json
if command -v perf >/dev/null; then
  step "perf record step_bench b64" 40 $B perf record -F 2999 -g -o /tmp/perf.data $HERE/bin/step_bench --model $INFERA_SHARED_DIR/models/qwen3-0.6b --dummy-weights --device cuda --kv-dtype bf16 --prefill 512 --batch 64 --context 512 --decode-steps 64 --repeats 1
  perf report -i /tmp/perf.data --stdio --no-children --percent-limit 0.7 2>/dev/null | head -150 > $OUT/perf_b64.txt
else
  echo "no perf on this machine" | tee -a $B
fi
step "memcheck sampling" 70 $S compute-sanitizer --tool memcheck --error-exitcode 3 $HERE/bin/test_cuda_backend --gtest_filter='CudaSampling*'
step "racecheck sampling" 60 $S compute-sanitizer --tool racecheck --error-exitcode 3 $HERE/bin/test_cuda_backend --gtest_filter='CudaSamplingTest.GreedyRows*:CudaSamplingTest.SampleRows*'
echo "== summary (t=${SECONDS}s)"
grep -E "^(==|rc )|^\[  (FAILED|PASSED)  \]|Failure|rows compared|mismatch" $T | tail -60
grep -E "ERROR SUMMARY|RACECHECK SUMMARY|^rc |^==" $S
grep -E "^(==|rc )|prefill .*tokens|decode batch|cuda:" $B | head -60
