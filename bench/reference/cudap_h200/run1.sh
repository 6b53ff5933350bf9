#!/bin/bash
# Session tooling (device run 1 of helper cudap): op harness + cuda backend tests of the branch, interleaved A/B of
# main's step_bench/encoder_bench (bin/main_*) against the branch's (3 pairs, alternating), the
# same-binary switches (INFERA_CUDA_BF16_SHADOW=0, INFERA_CUDA_FLASH_FAST=0), and Nsight Compute
# kernel times of a 2048-token prefill step (main and branch) and of one ModernBERT 64x512 forward.
cd "$(dirname "$0")"
HERE=$PWD
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
DEADLINE=${DEADLINE:-285}
for t in bin.tar.xz shared.tar.xz; do tar xJf $t; done
export LD_LIBRARY_PATH=$HERE/lib:/usr/local/cuda/lib64:$LD_LIBRARY_PATH
export INFERA_SHARED_DIR=$HERE/shared
T=$OUT/tests.log; B=$OUT/bench.log; N=$OUT/ncu.log
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
SB="--model $M --dummy-weights --device cuda --kv-dtype bf16 --prefill 512,2048 --batch 1 --context 64 --decode-steps 4 --repeats 5"
EB="--device cuda --config bench/configs/modernbert-large --batch 1x93 --batch 50x93 --batch 10x512 --batch 64x512 --runs 10 --attention-runs 0 --warmup 2"
step "op harness cuda+cuda_exact" 60 $T $HERE/bin/test_backend_ops --gtest_filter='*/cuda:*/cuda_exact'
step "cuda backend tests" 25 $T $HERE/bin/test_cuda_backend
for i in 1 2 3; do
  step "step_bench main $i" 25 $B $HERE/bin/main_step_bench $SB
  step "step_bench new $i" 25 $B $HERE/bin/step_bench $SB
done
step "step_bench new, BF16_SHADOW=0" 25 $B env INFERA_CUDA_BF16_SHADOW=0 $HERE/bin/step_bench $SB
step "step_bench new, FLASH_FAST=0" 25 $B env INFERA_CUDA_FLASH_FAST=0 $HERE/bin/step_bench $SB
for i in 1 2; do
  step "encoder_bench main $i" 30 $B $HERE/bin/main_encoder_bench $EB
  step "encoder_bench new $i" 30 $B $HERE/bin/encoder_bench $EB
done
# (model, engine and decision tests: run 2, whose carry has the fixtures)
NS="--model $M --dummy-weights --device cuda --kv-dtype bf16 --prefill 2048 --batch 1 --context 64 --decode-steps 1 --repeats 1"
NCU="ncu --clock-control none --cache-control none --metrics gpu__time_duration.sum --csv --page raw -c 800"
step "ncu prefill 2048 new" 40 $N $NCU --log-file $OUT/ncu_new.csv $HERE/bin/step_bench $NS
step "ncu prefill 2048 main" 40 $N $NCU --log-file $OUT/ncu_main.csv $HERE/bin/main_step_bench $NS
step "ncu encoder 64x512 new" 40 $N $NCU --log-file $OUT/ncu_enc.csv $HERE/bin/encoder_bench --device cuda --config bench/configs/modernbert-large --batch 64x512 --runs 1 --attention-runs 0 --warmup 0
echo "== summary (t=${SECONDS}s)"
grep -E "^(==|rc )|^\[  (FAILED|PASSED)  \]|Failure|over the bound|tests ran" $T | tail -40
grep -E "^(==|rc )|forward .*median|prefill|host recording" $B | head -80
