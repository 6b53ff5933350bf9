#!/bin/bash
# Session tooling (not part of the repo): the lead's verification run of merged main on the H200:
# every GPU test, compute-sanitizer memcheck + racecheck, the issue 9 encoder benchmark (both
# shapes, 50 runs, windowed vs dense), step_bench once.
cd "$(dirname "$0")"
HERE=$PWD
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
DEADLINE=${DEADLINE:-280}
for t in bin.tar.xz shared.tar.xz; do tar xJf $t; done
export LD_LIBRARY_PATH=$HERE/lib:/usr/local/cuda/lib64:$LD_LIBRARY_PATH
export INFERA_SHARED_DIR=$HERE/shared
T=$OUT/tests.log; B=$OUT/bench.log; S=$OUT/sanitizer.log
left() { echo $((DEADLINE - SECONDS)); }
step() {  # step NAME SECONDS LOG cmd...
  local name=$1 secs=$2 log=$3; shift 3
  local l=$(left)
  if [ "$l" -lt 10 ]; then echo "== $name SKIPPED (deadline)" | tee -a $log; return; fi
  [ "$secs" -gt "$l" ] && secs=$l
  echo "== $name (timeout ${secs}s, t=${SECONDS}s)" | tee -a $log
  timeout $secs "$@" >> $log 2>&1; echo "rc $? ($name, t=${SECONDS}s)" | tee -a $log
}
nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv | tee -a $T
cd $HERE/../..
step "op harness cuda+cuda_exact" 60 $T $HERE/bin/test_backend_ops --gtest_filter='*/cuda:*/cuda_exact'
step "cuda backend tests" 25 $T $HERE/bin/test_cuda_backend
for dev in cuda cuda-exact; do
  step "model tests $dev" 40 $T env INFERA_TEST_DEVICE=$dev $HERE/bin/test_model --gtest_filter='Fixtures/*:*BatchParity*:*Qwen3Weights*:*ModernBertMicro*'
  step "engine tests $dev" 30 $T env INFERA_TEST_DEVICE=$dev $HERE/bin/test_engine --gtest_filter='*GeneratorTest*:*ForwardArgmax*'
done
step "decision tests cuda-exact + cuda" 30 $T sh -c "INFERA_TEST_DEVICE=cuda-exact $HERE/bin/test_decision --gtest_filter='DecisionParity.*:DecisionQuant.*' && INFERA_TEST_DEVICE=cuda $HERE/bin/test_decision --gtest_filter='DecisionQuant.*'"
step "memcheck harness cuda" 60 $S compute-sanitizer --tool memcheck --error-exitcode 3 $HERE/bin/test_backend_ops --gtest_filter='*FusedOps.*/cuda:*QuantOps.*/cuda:*EncoderOps.*/cuda:*OpHarness.KvWriteAndPagedAttention/cuda'
step "racecheck harness cuda" 50 $S compute-sanitizer --tool racecheck --error-exitcode 3 $HERE/bin/test_backend_ops --gtest_filter='*OpHarness.KvWriteAndPagedAttention/cuda:*FusedOps.QkNormRopeKvWrite/cuda:*EncoderOps.PackedAttention/cuda'
step "encoder_bench cuda (issue 9: both shapes, 50 runs, windowed vs dense)" 45 $B $HERE/bin/encoder_bench --device cuda --config bench/configs/modernbert-large --config bench/configs/mmbert-base --batch 50x93 --batch 10x512 --runs 50 --attention-runs 50 --warmup 3 --out $OUT/encoder_bench_final.json
step "step_bench cuda" 40 $B $HERE/bin/step_bench --model $INFERA_SHARED_DIR/models/qwen3-0.6b --dummy-weights --device cuda --kv-dtype bf16 --prefill 512,2048 --batch 1,8,64,256 --context 512 --decode-steps 32 --repeats 5 --json $OUT/step_bench_final.json
echo "== summary (t=${SECONDS}s)"
grep -E "^(==|rc )|^\[  (FAILED|PASSED)  \]|Failure|over the bound|tests ran" $T | tail -40
grep -E "ERROR SUMMARY|RACECHECK SUMMARY|^rc " $S
grep -E "^(==|rc )|forward .*median|dense / windowed|prefill|decode batch.*greedy" $B | head -60
