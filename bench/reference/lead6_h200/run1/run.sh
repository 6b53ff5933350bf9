#!/bin/bash
# Session tooling (not part of the repo): the lead's verification run of the merged session-6 tree
# (cudag skinny GEMM off, cudaf interleaved flash tile on, cudaa staged decode attention off) on the
# H200: every GPU test, sanitizers on the new kernels, step_bench main vs new (+ env A/Bs), encoder.
cd "$(dirname "$0")"
HERE=$PWD
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
DEADLINE=${DEADLINE:-300}
for t in bin.tar.xz shared.tar.xz; do tar xJf $t; done
export LD_LIBRARY_PATH=$HERE/lib:/usr/local/cuda/lib64:$LD_LIBRARY_PATH
export INFERA_SHARED_DIR=$HERE/shared
T=$OUT/tests.log; B=$OUT/bench.log; S=$OUT/sanitizer.log; E=$OUT/encoder.log
J=$OUT/json; mkdir -p $J
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
M=$INFERA_SHARED_DIR/models/qwen3-0.6b
OB=$HERE/bin/test_backend_ops
step "op harness cuda, cuda_exact, cuda_skinny, cuda_staged" 90 $T $OB --gtest_filter='*/cuda:*/cuda_exact:*/cuda_skinny:*/cuda_staged'
step "cuda backend tests" 60 $T $HERE/bin/test_cuda_backend
for dev in cuda cuda-exact; do
  step "model tests $dev" 40 $T env INFERA_TEST_DEVICE=$dev $HERE/bin/test_model --gtest_filter='Fixtures/*:*BatchParity*:*Qwen3Weights*:*ModernBert*'
  step "engine tests $dev" 30 $T env INFERA_TEST_DEVICE=$dev $HERE/bin/test_engine --gtest_filter='*GeneratorTest*:*ForwardArgmax*'
done
step "decision tests cuda-exact + cuda" 30 $T sh -c "INFERA_TEST_DEVICE=cuda-exact $HERE/bin/test_decision --gtest_filter='DecisionParity.*:DecisionQuant.*' && INFERA_TEST_DEVICE=cuda $HERE/bin/test_decision --gtest_filter='DecisionQuant.*'"
step "memcheck paged attention (default + staged), skinny matmuls, fused, encoder attention" 60 $S compute-sanitizer --tool memcheck --error-exitcode 3 $OB --gtest_filter='*OpHarness.KvWriteAndPagedAttention/cuda:*OpHarness.KvWriteAndPagedAttention/cuda_staged:*OpHarness.Matmul/cuda_skinny:*FusedOps.*/cuda_skinny:*EncoderOps.PackedAttention/cuda'
A="--model $M --dummy-weights --device cuda --kv-dtype bf16 --prefill 512,2048 --batch 8,64,256 --context 512 --decode-steps 32 --repeats 9"
for i in 1 2 3; do
  step "sb main #$i" 20 $B $HERE/bin/step_bench_main $A --json $J/main_$i.json
  step "sb new #$i" 20 $B $HERE/bin/step_bench $A --prefill-batch 8x512 --json $J/new_$i.json
  step "sb new flash-interleaved=0 #$i" 20 $B env INFERA_CUDA_FLASH_INTERLEAVED=0 $HERE/bin/step_bench $A --prefill-batch 8x512 --json $J/noint_$i.json
  step "sb new decode-staged=1 #$i" 20 $B env INFERA_CUDA_DECODE_STAGED=1 $HERE/bin/step_bench $A --prefill-batch 8x512 --json $J/staged_$i.json
done
EB="--device cuda --config bench/configs/modernbert-large --batch 1x93 --batch 50x93 --batch 10x512 --batch 64x512 --runs 10 --attention-runs 0 --warmup 2"
step "encoder new" 40 $E $HERE/bin/encoder_bench $EB
step "encoder flash-interleaved=0" 40 $E env INFERA_CUDA_FLASH_INTERLEAVED=0 $HERE/bin/encoder_bench $EB
step "racecheck default paged attention + packed attention" 50 $S compute-sanitizer --tool racecheck --error-exitcode 3 $OB --gtest_filter='*OpHarness.KvWriteAndPagedAttention/cuda:*EncoderOps.PackedAttention/cuda'
step "racecheck staged paged attention" 70 $S compute-sanitizer --tool racecheck --error-exitcode 3 $OB --gtest_filter='*OpHarness.KvWriteAndPagedAttention/cuda_staged'
cd $J && tar cJf $OUT/step_bench_json.tar.xz *.json; cd - >/dev/null; rm -rf $J
echo "== summary (t=${SECONDS}s)"
grep -E "^(==|rc )|^\[  (FAILED|PASSED)  \]|Failure|over the bound|tests ran" $T | tail -40
grep -E "ERROR SUMMARY|RACECHECK SUMMARY|^rc " $S
grep -E "^(==|rc )|prefill|decode batch.*greedy" $B | head -120
grep -E "^(==|rc )|median|ms" $E | head -30
