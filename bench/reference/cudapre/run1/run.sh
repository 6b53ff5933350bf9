#!/bin/bash
# Helper cudapre, device run 1: where the prefill step's wall time goes beyond its kernels, and the
# first A/B of INFERA_CUDA_MLP_BF16_ONLY and the wide flash kernels at 8x512.
cd "$(dirname "$0")"; HERE=$PWD
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
DEADLINE=${DEADLINE:-225}
tar xJf bin.tar.xz; tar xJf shared.tar.xz
export LD_LIBRARY_PATH=$HERE/lib:/usr/local/cuda/lib64:$LD_LIBRARY_PATH
export INFERA_SHARED_DIR=$HERE/shared
T=$OUT/tests.log; B=$OUT/bench.log; N=$OUT/ncu.log
left() { echo $((DEADLINE - SECONDS)); }
step() {
  local name=$1 secs=$2 log=$3; shift 3
  local l=$(left)
  if [ "$l" -lt 5 ]; then echo "== $name SKIPPED (deadline)" | tee -a $log; return; fi
  [ "$secs" -gt "$l" ] && secs=$l
  echo "== $name (timeout ${secs}s, t=${SECONDS}s)" | tee -a $log
  timeout $secs "$@" >> $log 2>&1; echo "rc $? ($name, t=${SECONDS}s)" | tee -a $log
}
cd $HERE/../..
M=$INFERA_SHARED_DIR/models/qwen3-0.6b
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv | tee -a $B
step "op harness fused ops (cuda, cuda_prefill_toggled)" 40 $T $HERE/bin/test_backend_ops --gtest_filter='*FusedOps.*/cuda:*FusedOps.*/cuda_prefill_toggled'
step "shadow tests" 25 $T $HERE/bin/test_cuda_backend --gtest_filter='CudaShadowTest.*'
A="--model $M --dummy-weights --device cuda --kv-dtype bf16 --prefill 512,2048 --prefill-batch 8x512 --batch 1 --context 64 --decode-steps 2 --repeats 9"
for i in 1 2 3; do
  step "main #$i" 15 $B $HERE/bin/step_bench_main $A
  step "new #$i" 15 $B $HERE/bin/step_bench $A
  step "new MLP_BF16_ONLY=0 #$i" 15 $B env INFERA_CUDA_MLP_BF16_ONLY=0 $HERE/bin/step_bench $A
  step "new WIDE=8 #$i" 15 $B env INFERA_CUDA_FLASH_WIDE=8 $HERE/bin/step_bench $A
  step "new WIDE=4 #$i" 15 $B env INFERA_CUDA_FLASH_WIDE=4 $HERE/bin/step_bench $A
done
step "new GRAPHS=0" 15 $B env INFERA_CUDA_GRAPHS=0 $HERE/bin/step_bench $A
# Clocks and power during a sustained 8x512 prefill loop (ncu times kernels one at a time).
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu,clocks_throttle_reasons.active --format=csv -lms 100 > $OUT/clocks.csv 2>&1 &
SMI=$!
step "sustained 8x512 + 2048" 25 $B $HERE/bin/step_bench --model $M --dummy-weights --device cuda --kv-dtype bf16 --prefill 2048 --prefill-batch 8x512 --batch 1 --context 64 --decode-steps 2 --repeats 60
kill $SMI
P="--model $M --dummy-weights --device cuda --kv-dtype bf16 --prefill 2048 --prefill-batch 8x512 --batch 1 --context 64 --decode-steps 2 --repeats 3 --profile-step"
NCU="ncu --clock-control none --cache-control none --profile-from-start off --metrics gpu__time_duration.sum --csv --page raw"
step "ncu kernels new defaults" 60 $N $NCU --log-file $OUT/ncu_kernels.csv $HERE/bin/step_bench $P
step "ncu graphs" 30 $N $NCU --graph-profiling graph --log-file $OUT/ncu_graphs.csv $HERE/bin/step_bench $P
for f in $OUT/ncu_*.csv; do [ -f "$f" ] && xz -9 "$f"; done
echo "== summary (t=${SECONDS}s)"
grep -E "^(==|rc )|^\[  (FAILED|PASSED)  \]|Failure|over the bound|matmul_swiglu_down" $T | tail -30
grep -E "^(==|rc )|prefill  " $B | tail -120
