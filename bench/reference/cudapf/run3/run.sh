#!/bin/bash
# Session tooling (device run 3 of helper cudapf): the branch with INFERA_CUDA_GLU_BF16 and
# INFERA_CUDA_QKNORM_TOKEN on by default: GPU tests (op harness on every cuda target, cuda backend,
# model), compute-sanitizer memcheck of the fused-op cases and of the shadow tests (Qwen3-0.6B head
# sizes, both new kernels), interleaved A/B: main / branch defaults / branch with both switches off /
# branch + INFERA_CUDA_FLASH_INTERLEAVED=1, 3 rounds; Nsight Compute table of one 8x512 step.
cd "$(dirname "$0")"
HERE=$PWD
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
DEADLINE=${DEADLINE:-225}
for t in bin.tar.xz shared.tar.xz; do tar xJf $t; done
export LD_LIBRARY_PATH=$HERE/lib:/usr/local/cuda/lib64:$LD_LIBRARY_PATH
export INFERA_SHARED_DIR=$HERE/shared
T=$OUT/tests.log; B=$OUT/bench.log; N=$OUT/ncu.log; S=$OUT/sanitizer.log
left() { echo $((DEADLINE - SECONDS)); }
step() {
  local name=$1 secs=$2 log=$3; shift 3
  local l=$(left)
  if [ "$l" -lt 5 ]; then echo "== $name SKIPPED (deadline)" | tee -a $log; return; fi
  [ "$secs" -gt "$l" ] && secs=$l
  echo "== $name (timeout ${secs}s, t=${SECONDS}s)" | tee -a $log
  timeout $secs "$@" >> $log 2>&1; echo "rc $? ($name, t=${SECONDS}s)" | tee -a $log
}
nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv | tee -a $T
cd $HERE/../../..
M=$INFERA_SHARED_DIR/models/qwen3-0.6b
# qwen3-micro (14 MB) does not fit the carry beside the binaries: the tests that load it
# (GraphReplay, Streamed, the sampling generator, Qwen3Weights' error cases, engine) are left out.
step "op harness, every cuda target" 70 $T $HERE/bin/test_backend_ops --gtest_filter='*/cuda:*/cuda_exact:*/cuda_skinny:*/cuda_unstaged:*/cuda_interleaved:*/cuda_prefill_toggled'
step "cuda backend tests" 30 $T $HERE/bin/test_cuda_backend --gtest_filter='-*GraphReplay*:*Streamed*:*GeneratorSamplesOnTheDevice*'
step "model tests cuda" 30 $T env INFERA_TEST_DEVICE=cuda $HERE/bin/test_model --gtest_filter='Fixtures/*:*BatchParity*:*Qwen3Weights.Float32*:*ModernBert*:-*qwen3_micro*'
step "memcheck shadow tests (Qwen3-0.6B heads)" 40 $S compute-sanitizer --tool memcheck --error-exitcode 3 $HERE/bin/test_cuda_backend --gtest_filter='CudaShadowTest.*'
step "memcheck fused ops (cuda, cuda_prefill_toggled)" 40 $S compute-sanitizer --tool memcheck --error-exitcode 3 $HERE/bin/test_backend_ops --gtest_filter='*FusedOps.*/cuda:*FusedOps.*/cuda_prefill_toggled'
A="--model $M --dummy-weights --device cuda --kv-dtype bf16 --prefill 512,2048 --prefill-batch 8x512 --batch 1,64,256 --context 512 --decode-steps 32 --repeats 9"
for i in 1 2 3; do
  step "main #$i" 20 $B $HERE/bin/step_bench_main $A
  step "new #$i" 20 $B $HERE/bin/step_bench $A
  step "new, both off #$i" 20 $B env INFERA_CUDA_GLU_BF16=0 INFERA_CUDA_QKNORM_TOKEN=0 $HERE/bin/step_bench $A
  step "new + FLASH_INTERLEAVED=1 #$i" 20 $B env INFERA_CUDA_FLASH_INTERLEAVED=1 $HERE/bin/step_bench $A
done
NCU="ncu --clock-control none --cache-control none --metrics gpu__time_duration.sum --csv --page raw"
step "ncu 8x512 new defaults" 40 $N $NCU -c 1500 --log-file $OUT/ncu_8x512.csv $HERE/bin/step_bench --model $M --dummy-weights --device cuda --kv-dtype bf16 --prefill 8 --prefill-batch 8x512 --batch 1 --context 64 --decode-steps 1 --repeats 1
echo "== summary (t=${SECONDS}s)"
grep -E "^(==|rc )|^\[  (FAILED|PASSED)  \]|Failure|over the bound|tests ran" $T | tail -40
grep -E "ERROR SUMMARY|^rc " $S
grep -E "^(==|rc )|prefill  |decode batch.*greedy" $B
