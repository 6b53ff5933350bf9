#!/bin/bash
# Session tooling (device run 4 of helper cudap): the flash kernel's q staging by 16-byte loads and
# 4 blocks/SM at head_dim 64 (bin/) against run 3's build (bin/old_*), alternating, 3 pairs;
# op harness, cuda backend (shadow + decode-vs-CPU), model suites on the fixtures carried
# (qwen3-small-untied, ModernBERT), memcheck + racecheck of the attention cases; ncu stall
# reasons of the flash kernel again.
cd "$(dirname "$0")"
HERE=$PWD
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
DEADLINE=${DEADLINE:-270}
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
step "cuda backend tests (fixtures carried)" 30 $T $HERE/bin/test_cuda_backend --gtest_filter='CudaShadowTest.*:*DecodeFollowsTheCpu*:*OutOfMemory*:*IndexTensors*'
for dev in cuda cuda-exact; do
  step "model tests $dev" 30 $T env INFERA_TEST_DEVICE=$dev $HERE/bin/test_model --gtest_filter='Fixtures/*qwen3_small_untied*:*ModernBertMicro*'
done
step "memcheck attention cuda" 40 $S compute-sanitizer --tool memcheck --error-exitcode 3 $HERE/bin/test_backend_ops --gtest_filter='*OpHarness.KvWriteAndPagedAttention/cuda:*EncoderOps.*Attention*/cuda'
step "racecheck attention cuda" 45 $S compute-sanitizer --tool racecheck --error-exitcode 3 $HERE/bin/test_backend_ops --gtest_filter='*OpHarness.KvWriteAndPagedAttention/cuda:*EncoderOps.PackedAttention/cuda'
SB="--model $M --dummy-weights --device cuda --kv-dtype bf16 --prefill 512,2048 --batch 1 --context 64 --decode-steps 4 --repeats 5"
EB="--device cuda --config bench/configs/modernbert-large --batch 1x93 --batch 50x93 --batch 10x512 --batch 64x512 --runs 10 --attention-runs 0 --warmup 2"
for i in 1 2 3; do
  step "step_bench old $i" 20 $B $HERE/bin/old_step_bench $SB
  step "step_bench new $i" 20 $B $HERE/bin/step_bench $SB
done
for i in 1 2 3; do
  step "encoder_bench old $i" 25 $B $HERE/bin/old_encoder_bench $EB
  step "encoder_bench new $i" 25 $B $HERE/bin/encoder_bench $EB
done
NCU="ncu --clock-control none --cache-control none"
SECT="--section SpeedOfLight --section Occupancy --section WarpStateStats --section SchedulerStats"
step "ncu flash d128 prefill 2048" 25 $N $NCU $SECT -k regex:attention_flash --launch-skip 40 --launch-count 1 $HERE/bin/step_bench --model $M --dummy-weights --device cuda --kv-dtype bf16 --prefill 2048 --batch 1 --context 64 --decode-steps 1 --repeats 1
step "ncu flash d64 encoder 64x512" 25 $N $NCU $SECT -k regex:attention_flash --launch-skip 3 --launch-count 2 $HERE/bin/encoder_bench --device cuda --config bench/configs/modernbert-large --batch 64x512 --runs 1 --attention-runs 0 --warmup 0
echo "== summary (t=${SECONDS}s)"
grep -E "^(==|rc )|^\[  (FAILED|PASSED)  \]|Failure|over the bound|tests ran" $T | tail -40
grep -E "ERROR SUMMARY|RACECHECK SUMMARY|^rc " $S
grep -E "^(==|rc )|forward .*windowed +min|prefill " $B | head -90
grep -E "attention_flash|Duration|Achieved Occupancy|Warp Cycles Per Issued|Registers" $N
