#!/bin/bash
# Helper cudamk, device run 2: residual_mlp with the attribute fix, the GEMV carveout and chunked
# bulk copies: tests, planted bug, b1 A/B of the variants against main, other batches, ncu, sanitizers.
cd "$(dirname "$0")"; HERE=$PWD
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
DEADLINE=${DEADLINE:-230}
tar xJf bin.tar.xz; tar xJf shared.tar.xz
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
cd $HERE/../..
M=$INFERA_SHARED_DIR/models/qwen3-0.6b
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
CS=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null || ls /opt/nvidia/*/compute-sanitizer 2>/dev/null | head -1)
nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv | tee -a $B
step "harness residual_mlp + fused ops (cuda, cuda_b1 = 5 blocks, cuda_exact, cuda_unstaged = composition)" 40 $T $HERE/bin/test_backend_ops --gtest_filter='*ResidualMlp*/cuda:*ResidualMlp*/cuda_b1:*ResidualMlp*/cuda_exact:*ResidualMlp*/cuda_unstaged:*FusedOps*/cuda'
step "harness residual_mlp CHUNK=8192" 15 $T env INFERA_CUDA_PERSISTENT_CHUNK=8192 $HERE/bin/test_backend_ops --gtest_filter='*ResidualMlp*/cuda:*ResidualMlp*/cuda_b1'
step "PLANTED bug (gate/up slice clamped with d): must FAIL" 15 $T $HERE/bin/test_backend_ops_planted --gtest_filter='*ResidualMlp*/cuda'
A="--model $M --dummy-weights --device cuda --kv-dtype bf16 --prefill 512 --batch 1 --context 512 --decode-steps 64 --repeats 3"
for i in 1 2 3 4; do
  step "main #$i" 12 $B $HERE/bin/step_bench_main $A
  step "new #$i" 12 $B $HERE/bin/step_bench $A
  step "new CARVEOUT=0 #$i" 12 $B env INFERA_CUDA_PERSISTENT_CARVEOUT=0 $HERE/bin/step_bench $A
  step "new CHUNK=8192 #$i" 12 $B env INFERA_CUDA_PERSISTENT_CHUNK=8192 $HERE/bin/step_bench $A
  step "new PERSISTENT=0 #$i" 12 $B env INFERA_CUDA_PERSISTENT=0 $HERE/bin/step_bench $A
done
step "test_cuda_backend" 30 $T $HERE/bin/test_cuda_backend
step "test_model cuda" 25 $T env INFERA_TEST_DEVICE=cuda $HERE/bin/test_model --gtest_filter='Fixtures/*:*Qwen3Weights*:*BatchParity*'
P="--model $M --dummy-weights --device cuda --kv-dtype bf16 --batch 1 --context 512 --decode-steps 2 --profile-step"
MET=gpu__time_duration.sum,dram__bytes_read.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,launch__grid_size,sm__throughput.avg.pct_of_peak_sustained_elapsed
step "ncu step (new)" 25 $N $NCU --clock-control none --cache-control none --profile-from-start off --metrics $MET --csv --page raw $HERE/bin/step_bench $P
step "ncu residual_mlp CHUNK=8192" 15 $N env INFERA_CUDA_PERSISTENT_CHUNK=8192 $NCU --clock-control none --cache-control none --profile-from-start off -k regex:residual_mlp -c 4 --metrics $MET --csv --page raw $HERE/bin/step_bench $P
step "ncu full residual_mlp" 30 $N $NCU --clock-control none --cache-control none --profile-from-start off -k regex:residual_mlp -s 3 -c 1 --set full $HERE/bin/step_bench $P
step "memcheck" 30 $S $CS --tool memcheck --error-exitcode 3 $HERE/bin/test_backend_ops --gtest_filter='*ResidualMlp*/cuda:*ResidualMlp*/cuda_b1'
step "memcheck model" 20 $S $CS --tool memcheck --error-exitcode 3 $HERE/bin/test_cuda_backend --gtest_filter='*CudaResidualMlp*'
step "racecheck" 30 $S $CS --tool racecheck --error-exitcode 3 $HERE/bin/test_backend_ops --gtest_filter='*ResidualMlp*/cuda_b1:*ResidualMlp*/cuda'
step "synccheck" 15 $S $CS --tool synccheck --error-exitcode 3 $HERE/bin/test_backend_ops --gtest_filter='*ResidualMlp*/cuda_b1'
A2="--model $M --dummy-weights --device cuda --kv-dtype bf16 --prefill 512,2048 --batch 8,64 --context 512 --decode-steps 32 --repeats 3"
step "main other batches" 15 $B $HERE/bin/step_bench_main $A2
step "new other batches" 15 $B $HERE/bin/step_bench $A2
echo "== summary (t=${SECONDS}s)"
grep -E "^(==|rc )|^\[  (FAILED|PASSED)  \]|over the bound|residual_mlp BF16|residual_mlp kernels|exception" $T | tail -50
grep -E "decode batch.*greedy|^== |prefill .*tok/s" $B
grep -E "ERROR SUMMARY|RACECHECK SUMMARY|SYNCCHECK|^rc " $S
