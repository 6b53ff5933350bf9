#!/bin/bash
# Helper cudamk, device run 3: residual_mlp off by default; variants of the kernel (bulk copies or
# cp.async, 256 or 512 threads) A/B against main at b1, ncu of each, tests and sanitizers.
cd "$(dirname "$0")"; HERE=$PWD
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
DEADLINE=${DEADLINE:-225}
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
HF='*ResidualMlp*/cuda:*ResidualMlp*/cuda_b1:*ResidualMlp*/cuda_exact'
step "harness residual_mlp (cuda = composition, cuda_b1 = kernel on 5 blocks, cuda_exact = kernel)" 25 $T $HERE/bin/test_backend_ops --gtest_filter="$HF"
step "harness LSU=1 THREADS=512" 20 $T env INFERA_CUDA_PERSISTENT_LSU=1 INFERA_CUDA_PERSISTENT_THREADS=512 $HERE/bin/test_backend_ops --gtest_filter='*ResidualMlp*/cuda_b1:*ResidualMlp*/cuda_exact'
step "harness LSU=1" 15 $T env INFERA_CUDA_PERSISTENT_LSU=1 $HERE/bin/test_backend_ops --gtest_filter='*ResidualMlp*/cuda_b1:*ResidualMlp*/cuda_exact'
step "PLANTED bug (gate/up slice clamped with d): must FAIL" 12 $T $HERE/bin/test_backend_ops_planted --gtest_filter='*ResidualMlp*/cuda_exact'
A="--model $M --dummy-weights --device cuda --kv-dtype bf16 --prefill 512 --batch 1 --context 512 --decode-steps 64 --repeats 3"
for i in 1 2 3; do
  step "main #$i" 12 $B $HERE/bin/step_bench_main $A
  step "new default (off) #$i" 12 $B $HERE/bin/step_bench $A
  step "new P=1 #$i" 12 $B env INFERA_CUDA_PERSISTENT=1 $HERE/bin/step_bench $A
  step "new P=1 THREADS=512 #$i" 12 $B env INFERA_CUDA_PERSISTENT=1 INFERA_CUDA_PERSISTENT_THREADS=512 $HERE/bin/step_bench $A
  step "new P=1 LSU=1 #$i" 12 $B env INFERA_CUDA_PERSISTENT=1 INFERA_CUDA_PERSISTENT_LSU=1 $HERE/bin/step_bench $A
  step "new P=1 LSU=1 THREADS=512 #$i" 12 $B env INFERA_CUDA_PERSISTENT=1 INFERA_CUDA_PERSISTENT_LSU=1 INFERA_CUDA_PERSISTENT_THREADS=512 $HERE/bin/step_bench $A
done
step "test_cuda_backend" 30 $T $HERE/bin/test_cuda_backend
step "test_model cuda P=1" 20 $T env INFERA_CUDA_PERSISTENT=1 INFERA_TEST_DEVICE=cuda $HERE/bin/test_model --gtest_filter='Fixtures/*:*Qwen3Weights*:*BatchParity*'
step "test_model cuda default" 20 $T env INFERA_TEST_DEVICE=cuda $HERE/bin/test_model --gtest_filter='Fixtures/*:*Qwen3Weights*:*BatchParity*'
P="--model $M --dummy-weights --device cuda --kv-dtype bf16 --batch 1 --context 512 --decode-steps 2 --profile-step"
MET=gpu__time_duration.sum,dram__bytes_read.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,sm__throughput.avg.pct_of_peak_sustained_elapsed,smsp__inst_executed.sum
for v in "TMA" "THREADS=512" "LSU=1" "LSU=1 THREADS=512"; do
  E="INFERA_CUDA_PERSISTENT=1"; [ "$v" != TMA ] && for kv in $v; do E="$E INFERA_CUDA_PERSISTENT_$kv"; done
  step "ncu residual_mlp $v" 12 $N env $E $NCU --clock-control none --cache-control none --profile-from-start off -k regex:residual_mlp -c 3 --metrics $MET --csv --page raw $HERE/bin/step_bench $P
done
step "memcheck LSU" 25 $S env INFERA_CUDA_PERSISTENT_LSU=1 INFERA_CUDA_PERSISTENT_THREADS=512 $CS --tool memcheck --error-exitcode 3 $HERE/bin/test_backend_ops --gtest_filter='*ResidualMlp*/cuda_b1:*ResidualMlp*/cuda_exact'
step "racecheck LSU" 25 $S env INFERA_CUDA_PERSISTENT_LSU=1 $CS --tool racecheck --error-exitcode 3 $HERE/bin/test_backend_ops --gtest_filter='*ResidualMlp*/cuda_b1:*ResidualMlp*/cuda_exact'
step "racecheck TMA 512" 20 $S env INFERA_CUDA_PERSISTENT_THREADS=512 $CS --tool racecheck --error-exitcode 3 $HERE/bin/test_backend_ops --gtest_filter='*ResidualMlp*/cuda_b1'
echo "== summary (t=${SECONDS}s)"
grep -E "^(==|rc )|^\[  (FAILED|PASSED)  \]|over the bound|residual_mlp BF16|residual_mlp kernels|exception" $T | tail -50
grep -E "decode batch.*greedy|^== " $B
grep -E "ERROR SUMMARY|RACECHECK SUMMARY|^rc " $S
