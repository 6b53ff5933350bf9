#!/bin/bash
# Session tooling (device run 3 of helper cudap): the branch with the register-resident layernorm:
# op harness, cuda backend shadow tests, ModernBERT model + decision tests (cuda, cuda-exact),
# memcheck + racecheck of the encoder ops; main's step_bench/encoder_bench against the branch's,
# alternating, 3 pairs; the layernorm switch; Nsight Compute: encoder kernel times, and the
# flash attention kernel's stall reasons (one 2048-prefill launch, one ModernBERT launch).
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
step "cuda shadow tests" 30 $T $HERE/bin/test_cuda_backend --gtest_filter='CudaShadowTest.*:*OutOfMemory*:*IndexTensors*'
for dev in cuda cuda-exact; do
  step "modernbert model tests $dev" 30 $T env INFERA_TEST_DEVICE=$dev $HERE/bin/test_model --gtest_filter='*ModernBertMicro*'
done
step "decision tests cuda-exact + cuda" 30 $T sh -c "INFERA_TEST_DEVICE=cuda-exact $HERE/bin/test_decision --gtest_filter='DecisionParity.*:DecisionQuant.*' && INFERA_TEST_DEVICE=cuda $HERE/bin/test_decision --gtest_filter='DecisionQuant.*'"
step "memcheck encoder ops cuda" 40 $S compute-sanitizer --tool memcheck --error-exitcode 3 $HERE/bin/test_backend_ops --gtest_filter='*EncoderOps.*/cuda'
step "racecheck layernorm cuda" 30 $S compute-sanitizer --tool racecheck --error-exitcode 3 $HERE/bin/test_backend_ops --gtest_filter='*EncoderOps.LayerNorm/cuda'
SB="--model $M --dummy-weights --device cuda --kv-dtype bf16 --prefill 512,2048 --batch 1 --context 64 --decode-steps 4 --repeats 5"
EB="--device cuda --config bench/configs/modernbert-large --batch 1x93 --batch 50x93 --batch 10x512 --batch 64x512 --runs 10 --attention-runs 0 --warmup 2"
for i in 1 2 3; do
  step "step_bench main $i" 20 $B $HERE/bin/main_step_bench $SB
  step "step_bench new $i" 20 $B $HERE/bin/step_bench $SB
done
for i in 1 2 3; do
  step "encoder_bench main $i" 25 $B $HERE/bin/main_encoder_bench $EB
  step "encoder_bench new $i" 25 $B $HERE/bin/encoder_bench $EB
done
step "encoder_bench new, LAYERNORM_REGISTERS=0" 25 $B env INFERA_CUDA_LAYERNORM_REGISTERS=0 $HERE/bin/encoder_bench $EB
NCU="ncu --clock-control none --cache-control none"
step "ncu encoder 64x512 new" 30 $N $NCU --metrics gpu__time_duration.sum --csv --page raw -c 800 --log-file $OUT/ncu_enc.csv $HERE/bin/encoder_bench --device cuda --config bench/configs/modernbert-large --batch 64x512 --runs 1 --attention-runs 0 --warmup 0
SECT="--section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats --section SchedulerStats --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis"
step "ncu flash d128 prefill 2048 (stalls)" 30 $N $NCU $SECT -k regex:attention_flash --launch-skip 40 --launch-count 1 $HERE/bin/step_bench --model $M --dummy-weights --device cuda --kv-dtype bf16 --prefill 2048 --batch 1 --context 64 --decode-steps 1 --repeats 1
step "ncu flash d64 encoder 64x512 (stalls)" 30 $N $NCU $SECT -k regex:attention_flash --launch-skip 3 --launch-count 1 $HERE/bin/encoder_bench --device cuda --config bench/configs/modernbert-large --batch 64x512 --runs 1 --attention-runs 0 --warmup 0
echo "== summary (t=${SECONDS}s)"
grep -E "^(==|rc )|^\[  (FAILED|PASSED)  \]|Failure|over the bound|tests ran" $T | tail -40
grep -E "ERROR SUMMARY|RACECHECK SUMMARY|^rc " $S
grep -E "^(==|rc )|forward .*median|prefill " $B | grep -v dense | head -90
