#!/bin/bash
# Helper cudamk, device run 1: residual_mlp (one kernel for a layer's MLP half at batch 1):
# harness + planted bug + model/backend tests, b1 A/B against main, ncu of the kernel, sanitizers.
cd "$(dirname "$0")"; HERE=$PWD
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
DEADLINE=${DEADLINE:-228}
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
step "harness residual_mlp (cuda, cuda_b1 = 5 blocks, cuda_exact, cuda_unstaged = composition)" 30 $T $HERE/bin/test_backend_ops --gtest_filter='*ResidualMlp*/cuda:*ResidualMlp*/cuda_b1:*ResidualMlp*/cuda_exact:*ResidualMlp*/cuda_unstaged'
step "PLANTED bug (gate/up slice clamped with d): must FAIL" 15 $T $HERE/bin/test_backend_ops_planted --gtest_filter='*ResidualMlp*/cuda'
A="--model $M --dummy-weights --device cuda --kv-dtype bf16 --prefill 512 --batch 1 --context 512 --decode-steps 64 --repeats 3"
for i in 1 2 3; do
  step "main #$i" 15 $B $HERE/bin/step_bench_main $A
  step "new #$i" 15 $B $HERE/bin/step_bench $A
  step "new PERSISTENT=0 #$i" 15 $B env INFERA_CUDA_PERSISTENT=0 $HERE/bin/step_bench $A
done
step "test_cuda_backend" 30 $T $HERE/bin/test_cuda_backend
step "test_model cuda" 25 $T env INFERA_TEST_DEVICE=cuda $HERE/bin/test_model --gtest_filter='Fixtures/*:*Qwen3Weights*:*BatchParity*'
P="--model $M --dummy-weights --device cuda --kv-dtype bf16 --batch 1 --context 512 --decode-steps 2 --profile-step"
step "ncu residual_mlp" 25 $N $NCU --clock-control none --cache-control none --profile-from-start off -k regex:residual_mlp --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,launch__grid_size,launch__registers_per_thread,sm__throughput.avg.pct_of_peak_sustained_elapsed --csv --page raw $HERE/bin/step_bench $P
step "memcheck residual_mlp cuda + cuda_b1" 30 $S $CS --tool memcheck --error-exitcode 3 $HERE/bin/test_backend_ops --gtest_filter='*ResidualMlp*/cuda:*ResidualMlp*/cuda_b1'
step "racecheck residual_mlp cuda_b1" 30 $S $CS --tool racecheck --error-exitcode 3 $HERE/bin/test_backend_ops --gtest_filter='*ResidualMlp*/cuda_b1'
echo "== summary (t=${SECONDS}s)"
grep -E "^(==|rc )|^\[  (FAILED|PASSED)  \]|over the bound|residual_mlp BF16|tests ran" $T | tail -45
grep -E "decode batch.*greedy|^== " $B
grep -E "residual_mlp" $N | head -4
grep -E "ERROR SUMMARY|RACECHECK SUMMARY|^rc " $S
