#!/bin/bash
# Session tooling (device run 2 of helper cudap): every GPU test of the branch (op harness,
# cuda backend incl. the bf16-shadow tests, model/engine on cuda and cuda-exact, decision),
# compute-sanitizer memcheck + racecheck on the kernels touched, same-binary A/B of the switches
# (interleaved), Nsight Compute kernel times of one ModernBERT 64x512 forward and a 2048 prefill.
cd "$(dirname "$0")"
HERE=$PWD
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
DEADLINE=${DEADLINE:-288}
for t in bin.tar.xz shared.tar.xz; do tar xJf $t; done
export LD_LIBRARY_PATH=$HERE/lib:/usr/local/cuda/lib64:$LD_LIBRARY_PATH
export INFERA_SHARED_DIR=$HERE/shared
T=$OUT/tests.log; B=$OUT/bench.log; S=$OUT/sanitizer.log; N=$OUT/ncu.log
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
step "op harness cuda+cuda_exact" 60 $T $HERE/bin/test_backend_ops --gtest_filter='*/cuda:*/cuda_exact'
step "cuda backend tests" 40 $T $HERE/bin/test_cuda_backend
for dev in cuda cuda-exact; do
  step "model tests $dev" 40 $T env INFERA_TEST_DEVICE=$dev $HERE/bin/test_model --gtest_filter='Fixtures/*:*BatchParity*:*Qwen3Weights*:*ModernBertMicro*'
  step "engine tests $dev" 30 $T env INFERA_TEST_DEVICE=$dev $HERE/bin/test_engine --gtest_filter='*GeneratorTest*:*ForwardArgmax*'
done
step "decision tests cuda-exact + cuda" 30 $T sh -c "INFERA_TEST_DEVICE=cuda-exact $HERE/bin/test_decision --gtest_filter='DecisionParity.*:DecisionQuant.*' && INFERA_TEST_DEVICE=cuda $HERE/bin/test_decision --gtest_filter='DecisionQuant.*'"
step "memcheck harness cuda" 50 $S compute-sanitizer --tool memcheck --error-exitcode 3 $HERE/bin/test_backend_ops --gtest_filter='*FusedOps.*/cuda:*EncoderOps.*/cuda:*OpHarness.KvWriteAndPagedAttention/cuda:*OpHarness.Rope/cuda:*OpHarness.SwigluAndAdd/cuda'
step "memcheck shadow tests" 40 $S compute-sanitizer --tool memcheck --error-exitcode 3 $HERE/bin/test_cuda_backend --gtest_filter='CudaShadowTest.*'
step "racecheck harness cuda" 45 $S compute-sanitizer --tool racecheck --error-exitcode 3 $HERE/bin/test_backend_ops --gtest_filter='*OpHarness.KvWriteAndPagedAttention/cuda:*EncoderOps.PackedAttention/cuda:*EncoderOps.Windowed*/cuda'
SB="--model $M --dummy-weights --device cuda --kv-dtype bf16 --prefill 512,2048 --batch 1 --context 64 --decode-steps 4 --repeats 5"
EB="--device cuda --config bench/configs/modernbert-large --batch 1x93 --batch 50x93 --batch 10x512 --batch 64x512 --runs 10 --attention-runs 0 --warmup 2"
OFF="INFERA_CUDA_BF16_SHADOW=0 INFERA_CUDA_FLASH_FAST=0 INFERA_CUDA_PACKED_FLASH=0"
for i in 1 2; do
  step "step_bench switches off $i" 20 $B env $OFF $HERE/bin/step_bench $SB
  step "step_bench defaults $i" 20 $B $HERE/bin/step_bench $SB
  step "encoder_bench switches off $i" 25 $B env $OFF $HERE/bin/encoder_bench $EB
  step "encoder_bench defaults $i" 25 $B $HERE/bin/encoder_bench $EB
done
NCU="ncu --clock-control none --cache-control none --metrics gpu__time_duration.sum --csv --page raw -c 800"
step "ncu encoder 64x512 new" 30 $N $NCU --log-file $OUT/ncu_enc.csv $HERE/bin/encoder_bench --device cuda --config bench/configs/modernbert-large --batch 64x512 --runs 1 --attention-runs 0 --warmup 0
step "ncu prefill 2048 new" 30 $N $NCU --log-file $OUT/ncu_new.csv $HERE/bin/step_bench --model $M --dummy-weights --device cuda --kv-dtype bf16 --prefill 2048 --batch 1 --context 64 --decode-steps 1 --repeats 1
echo "== summary (t=${SECONDS}s)"
grep -E "^(==|rc )|^\[  (FAILED|PASSED)  \]|Failure|over the bound|tests ran" $T | tail -40
grep -E "ERROR SUMMARY|RACECHECK SUMMARY|^rc " $S
grep -E "^(==|rc )|forward .*median|prefill|host recording" $B | grep -v dense | head -80
