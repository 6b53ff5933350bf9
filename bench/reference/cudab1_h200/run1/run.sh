#!/bin/bash
# cudab1 run 1: batch-1 decode chain switches (INFERA_CUDA_PDL_EARLY, INFERA_CUDA_GEMV_PRELOAD,
# INFERA_CUDA_KV_PREFETCH): GPU tests with them on, same-run b1 A/B against main's binary
# (alternating rounds), ncu per-kernel times of a b1 decode step (main and new with all on).
# (At this commit every switch was a boolean, off by default, and the early trigger covered the
# GEMV too: "EARLY" here is what INFERA_CUDA_PDL_EARLY=2 is later.)
cd "$(dirname "$0")"
HERE=$PWD
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
DEADLINE=${DEADLINE:-225}
for t in bin.tar.xz shared.tar.xz; do tar xJf $t; done
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
ALL="INFERA_CUDA_PDL_EARLY=1 INFERA_CUDA_GEMV_PRELOAD=1 INFERA_CUDA_KV_PREFETCH=1"
step "op harness cuda, cuda_exact, cuda_b1" 45 $T $HERE/bin/test_backend_ops --gtest_filter='*/cuda:*/cuda_exact:*/cuda_b1'
step "cuda backend tests (all switches on)" 25 $T env $ALL $HERE/bin/test_cuda_backend
step "model tests cuda (all switches on)" 20 $T env $ALL INFERA_TEST_DEVICE=cuda $HERE/bin/test_model --gtest_filter='*qwen3_small_untied*:*Qwen3Weights*'
A="--model $M --dummy-weights --device cuda --kv-dtype bf16 --batch 1 --context 512 --decode-steps 32 --repeats 1"
for i in 1 2; do
  step "b1 main #$i" 15 $B $HERE/bin/step_bench_main $A
  step "b1 new default #$i" 15 $B $HERE/bin/step_bench $A
  step "b1 new EARLY #$i" 15 $B env INFERA_CUDA_PDL_EARLY=1 $HERE/bin/step_bench $A
  step "b1 new PRELOAD #$i" 15 $B env INFERA_CUDA_GEMV_PRELOAD=1 $HERE/bin/step_bench $A
  step "b1 new EARLY+PRELOAD+KV #$i" 15 $B env $ALL $HERE/bin/step_bench $A
done
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
NA="--model $M --dummy-weights --device cuda --kv-dtype bf16 --batch 1 --context 512 --decode-steps 1 --repeats 1"
MET=gpu__time_duration.sum,dram__bytes_read.sum,launch__grid_size,launch__registers_per_thread
step "ncu b1 main" 45 $N $NCU --clock-control none --cache-control none --metrics $MET --csv --page raw -c 760 --log-file $OUT/ncu_main.csv $HERE/bin/step_bench_main $NA
step "ncu b1 new all on" 45 $N env $ALL $NCU --clock-control none --cache-control none --metrics $MET --csv --page raw -c 760 --log-file $OUT/ncu_new.csv $HERE/bin/step_bench $NA
cd $OUT && xz -9 ncu_main.csv ncu_new.csv 2>/dev/null; cd - >/dev/null
echo "== summary (t=${SECONDS}s)"
grep -E "^(==|rc )|^\[  (FAILED|PASSED)  \]|Failure|over the bound|tests ran" $T | tail -30
grep -E "^(==|rc )|decode batch" $B
