#!/bin/bash
# Session tooling (not part of the repo): helper cudah's one H200 run. GPU tests of the branch
# (cuBLASLt GEMM plans + host timers), memcheck on the GEMM paths, step_bench A/B of the branch
# against lead5's step_bench (df313b2), interleaved, and the host timers of a prefill step.
cd "$(dirname "$0")"
HERE=$PWD
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
DEADLINE=${DEADLINE:-225}
for t in bin.tar.xz shared.tar.xz; do tar xJf $t; done
export LD_LIBRARY_PATH=$HERE/lib:/usr/local/cuda/lib64:$LD_LIBRARY_PATH
export INFERA_SHARED_DIR=$HERE/shared
T=$OUT/tests.log; B=$OUT/bench.log; S=$OUT/sanitizer.log; H=$OUT/timers.log
left() { echo $((DEADLINE - SECONDS)); }
step() {  # step NAME SECONDS LOG cmd...
  local name=$1 secs=$2 log=$3; shift 3
  local l=$(left)
  if [ "$l" -lt 8 ]; then echo "== $name SKIPPED (deadline)" | tee -a $log; return; fi
  [ "$secs" -gt "$l" ] && secs=$l
  echo "== $name (timeout ${secs}s, t=${SECONDS}s)" | tee -a $log
  timeout $secs "$@" >> $log 2>&1; echo "rc $? ($name, t=${SECONDS}s)" | tee -a $log
}
nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv | tee -a $T
lscpu | grep -E "Model name|^CPU\(s\)" | tee -a $T
cd $HERE/../..
M=$INFERA_SHARED_DIR/models/qwen3-0.6b
BIN=$HERE/bin
SB="--model $M --dummy-weights --device cuda --kv-dtype bf16 --prefill 512,2048 --batch 1 --context 64 --decode-steps 8 --repeats 7"
# 1. A/B first (quiet GPU): lead5 vs branch (cuBLASLt plans on) vs branch with cublasGemmEx.
for i in 1 2 3; do
  step "ab$i old (lead5 step_bench)" 25 $B $BIN/step_bench_lead5 $SB --json $OUT/ab${i}_old.json
  step "ab$i new (branch, Lt plans)" 25 $B $BIN/step_bench $SB --json $OUT/ab${i}_new.json
  step "ab$i gemmex (branch, INFERA_CUDA_CUBLASLT=0)" 25 $B env INFERA_CUDA_CUBLASLT=0 $BIN/step_bench $SB --json $OUT/ab${i}_gemmex.json
done
# 2. Eager steps (INFERA_CUDA_GRAPHS=0: every repeated step launched at flush): launch cost alone.
for i in 1 2; do
  step "eager$i old" 25 $B env INFERA_CUDA_GRAPHS=0 $BIN/step_bench_lead5 $SB
  step "eager$i new" 25 $B env INFERA_CUDA_GRAPHS=0 $BIN/step_bench $SB
done
# 3. Host timers: where a prefill step's host time goes (defaults; then eager, Lt on / off).
step "timers default" 25 $H env INFERA_CUDA_HOST_TIMERS=1 $BIN/step_bench $SB
step "timers eager lt" 25 $H env INFERA_CUDA_HOST_TIMERS=1 INFERA_CUDA_GRAPHS=0 $BIN/step_bench $SB
step "timers eager gemmex" 25 $H env INFERA_CUDA_HOST_TIMERS=1 INFERA_CUDA_GRAPHS=0 INFERA_CUDA_CUBLASLT=0 $BIN/step_bench $SB
# 4. Tests.
step "op harness cuda+cuda_exact" 40 $T $BIN/test_backend_ops --gtest_filter='*/cuda:*/cuda_exact'
step "cuda backend tests (incl. GEMM plans)" 40 $T $BIN/test_cuda_backend
for dev in cuda cuda-exact; do
  step "model tests $dev" 30 $T env INFERA_TEST_DEVICE=$dev $BIN/test_model --gtest_filter='Fixtures/*:*BatchParity*:*Qwen3Weights*:*ModernBertMicro*:-*MaskedLm*:*Classification*'
  step "engine tests $dev" 20 $T env INFERA_TEST_DEVICE=$dev $BIN/test_engine --gtest_filter='*GeneratorTest*:*ForwardArgmax*'
done
step "decision tests cuda-exact + cuda" 25 $T sh -c "INFERA_TEST_DEVICE=cuda-exact $BIN/test_decision --gtest_filter='DecisionParity.*:DecisionQuant.*' && INFERA_TEST_DEVICE=cuda $BIN/test_decision --gtest_filter='DecisionQuant.*'"
step "memcheck GEMM op cases (cuBLASLt plans)" 40 $S compute-sanitizer --tool memcheck --error-exitcode 3 $BIN/test_backend_ops --gtest_filter='*Matmul*/cuda:*FusedOps.*/cuda:*QuantOps.*/cuda'
step "memcheck GEMM plan tests" 30 $S compute-sanitizer --tool memcheck --error-exitcode 3 $BIN/test_cuda_backend --gtest_filter='*GemmPlans*'
(cd $OUT && tar cJf ab_json.tar.xz ab*.json && rm -f ab*.json)
echo "== summary (t=${SECONDS}s)"
grep -E "^(==|rc )|^\[  (FAILED|PASSED)  \]|Failure|tests ran" $T | tail -40
grep -E "ERROR SUMMARY|^rc " $S
grep -E "^(==|rc )|^prefill|host recording" $B | head -80
