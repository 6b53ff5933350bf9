#!/bin/bash
# Helper cudapre, device run 2 (final): step_bench main / new defaults / new with each new switch
# off, 3 alternating rounds; the step's device time by events around its graph launch
# (INFERA_CUDA_HOST_TIMERS=1) with and without PDL in prefill steps; ncu of the final tree's
# prefill steps (per kernel and per graph); GPU tests; compute-sanitizer memcheck; encoder_bench.
cd "$(dirname "$0")"; HERE=$PWD
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
DEADLINE=${DEADLINE:-228}
tar xJf bin.tar.xz; tar xJf shared.tar.xz
export LD_LIBRARY_PATH=$HERE/lib:/usr/local/cuda/lib64:$LD_LIBRARY_PATH
export INFERA_SHARED_DIR=$HERE/shared
T=$OUT/tests.log; B=$OUT/bench.log; N=$OUT/ncu.log; S=$OUT/sanitizer.log; E=$OUT/encoder.log
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
export INFERA_SOURCE_DIR=$PWD
M=$INFERA_SHARED_DIR/models/qwen3-0.6b
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw --format=csv | tee -a $B
A="--model $M --dummy-weights --device cuda --kv-dtype bf16 --prefill 512,2048 --prefill-batch 8x512 --batch 1,64,256 --context 512 --decode-steps 16 --repeats 9"
P="--model $M --dummy-weights --device cuda --kv-dtype bf16 --prefill 512,2048 --prefill-batch 8x512 --batch 1 --context 64 --decode-steps 2 --repeats 9"
for i in 1 2 3; do
  step "main #$i" 15 $B $HERE/bin/step_bench_main $A
  step "new #$i" 15 $B $HERE/bin/step_bench $A
  step "new PDL_MAX_TOKENS=-1 #$i" 10 $B env INFERA_CUDA_PDL_MAX_TOKENS=-1 $HERE/bin/step_bench $P
  step "new WIDE_AUTO=0 #$i" 10 $B env INFERA_CUDA_FLASH_WIDE_AUTO=0 $HERE/bin/step_bench $P
  step "new MLP_BF16_ONLY=0 #$i" 10 $B env INFERA_CUDA_MLP_BF16_ONLY=0 $HERE/bin/step_bench $P
done
step "events, new defaults" 10 $B env INFERA_CUDA_HOST_TIMERS=1 $HERE/bin/step_bench $P
step "events, PDL in prefill" 10 $B env INFERA_CUDA_HOST_TIMERS=1 INFERA_CUDA_PDL_MAX_TOKENS=-1 $HERE/bin/step_bench $P
PP="--model $M --dummy-weights --device cuda --kv-dtype bf16 --prefill 512,2048 --prefill-batch 8x512 --batch 1 --context 64 --decode-steps 2 --repeats 3 --profile-step"
NCU="ncu --clock-control none --cache-control none --profile-from-start off --metrics gpu__time_duration.sum --csv --page raw"
step "ncu kernels new defaults" 30 $N $NCU --log-file $OUT/ncu_kernels.csv $HERE/bin/step_bench $PP
step "ncu graphs new defaults" 15 $N $NCU --graph-profiling graph --log-file $OUT/ncu_graphs.csv $HERE/bin/step_bench $PP
for f in $OUT/ncu_*.csv; do [ -f "$f" ] && xz -9 "$f"; done
step "op harness, cuda targets" 45 $T $HERE/bin/test_backend_ops --gtest_filter='*/cuda:*/cuda_exact:*/cuda_prefill_toggled:*/cuda_flash_wide8_plain:*/cuda_skinny'
step "cuda backend tests" 30 $T $HERE/bin/test_cuda_backend
step "model tests cuda" 25 $T env INFERA_TEST_DEVICE=cuda $HERE/bin/test_model --gtest_filter='Fixtures/*:*BatchParity*:*Qwen3Weights*:*ModernBert*'
step "engine tests cuda" 20 $T env INFERA_TEST_DEVICE=cuda $HERE/bin/test_engine
step "memcheck new tests + fused ops + graph replay" 50 $S compute-sanitizer --tool memcheck --error-exitcode 3 $HERE/bin/test_cuda_backend --gtest_filter='*MlpBf16Only*:*WideAuto*:*GraphReplay*:*Streamed*'
step "memcheck fused ops cuda" 30 $S compute-sanitizer --tool memcheck --error-exitcode 3 $HERE/bin/test_backend_ops --gtest_filter='*FusedOps.MatmulMultiAndSwiglu/cuda'
EB="--device cuda --config bench/configs/modernbert-large --batch 10x512 --batch 64x512 --runs 8 --attention-runs 0 --warmup 2"
for i in 1 2; do
  step "encoder main #$i" 12 $E $HERE/bin/encoder_bench_main $EB
  step "encoder new #$i" 12 $E $HERE/bin/encoder_bench $EB
done
echo "== summary (t=${SECONDS}s)"
grep -E "^(==|rc )|^\[  (FAILED|PASSED)  \]|Failure|over the bound|tests ran|ERROR SUMMARY" $T $S | tail -40
grep -E "^(==|rc )|prefill  |decode batch.*greedy|graph of|cudaGraphLaunch" $B | tail -150
grep -E "^==|median" $E | tail -20
