#!/bin/bash
# cudaf (issue 11, prefill flash attention): the last H200 run. Op harness with the defaults
# (interleaved tile, no key split) and the paged-attention cases with the old tile and with the
# key split; the CUDA backend tests; step_bench prefill 512 / 2048 / 8x512 alternating new
# (defaults), old (INFERA_CUDA_FLASH_INTERLEAVED=0: main's kernel) and new + split
# (INFERA_CUDA_FLASH_SPLIT=1); per-kernel times; ncu of the attention kernels old vs new and the
# new one's stall statistics; compute-sanitizer memcheck + racecheck of the attention cases.
cd "$(dirname "$0")"
HERE=$PWD
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
DEADLINE=${DEADLINE:-290}
for t in bin.tar.xz shared.tar.xz; do tar xJf $t; done
export LD_LIBRARY_PATH=$HERE/lib:/usr/local/cuda/lib64:$LD_LIBRARY_PATH
export INFERA_SHARED_DIR=$HERE/shared
R=/tmp/cudaf_raw; mkdir -p $R
T=$OUT/tests.log; B=$OUT/bench.log; S=$OUT/sanitizer.log; N=$OUT/ncu.log
left() { echo $((DEADLINE - SECONDS)); }
step() {
  local name=$1 secs=$2 log=$3; shift 3
  local l=$(left)
  if [ "$l" -lt 8 ]; then echo "== $name SKIPPED (deadline)" | tee -a $log; return; fi
  [ "$secs" -gt "$l" ] && secs=$l
  echo "== $name (timeout ${secs}s, t=${SECONDS}s)" >> $log
  timeout $secs "$@" >> $log 2>&1; echo "rc $? ($name, t=${SECONDS}s)" | tee -a $log
}
nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv | tee -a $T
cd $HERE/../..
M="--model $INFERA_SHARED_DIR/models/qwen3-0.6b --dummy-weights --device cuda --kv-dtype bf16"
P="--prefill 512,2048 --prefill-batch 8x512 --batch 1 --context 64 --decode-steps 4"
PA='*OpHarness.KvWriteAndPagedAttention/cuda'
step "op harness cuda+cuda_exact (defaults: interleaved)" 50 $T $HERE/bin/test_backend_ops --gtest_filter='*/cuda:*/cuda_exact'
step "op harness paged attention, old tile" 20 $T env INFERA_CUDA_FLASH_INTERLEAVED=0 $HERE/bin/test_backend_ops --gtest_filter=$PA
step "op harness paged attention, interleaved + split" 20 $T env INFERA_CUDA_FLASH_SPLIT=1 $HERE/bin/test_backend_ops --gtest_filter=$PA
step "test_cuda_backend (all)" 40 $T $HERE/bin/test_cuda_backend
for i in 1 2 3; do
  step "step_bench new #$i" 20 $B $HERE/bin/step_bench $M $P --repeats 5 --json $R/step_bench_new_$i.json
  step "step_bench old #$i" 20 $B env INFERA_CUDA_FLASH_INTERLEAVED=0 $HERE/bin/step_bench $M $P --repeats 5 --json $R/step_bench_old_$i.json
  step "step_bench new+split #$i" 20 $B env INFERA_CUDA_FLASH_SPLIT=1 $HERE/bin/step_bench $M $P --repeats 5 --json $R/step_bench_split_$i.json
done
step "profile new" 20 $B env INFERA_CUDA_PROFILE=1 $HERE/bin/step_bench $M $P --repeats 2
step "profile old" 20 $B env INFERA_CUDA_PROFILE=1 INFERA_CUDA_FLASH_INTERLEAVED=0 $HERE/bin/step_bench $M $P --repeats 2
NCU="ncu --clock-control none --metrics gpu__time_duration.sum,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_elapsed,sm__warps_active.avg.pct_of_peak_sustained_active,smsp__issue_active.avg.per_cycle_active,launch__grid_size,launch__registers_per_thread --csv --page raw -k regex:attention_flash -c 120"
step "ncu attention new" 35 $N $NCU --log-file $R/ncu_new.csv $HERE/bin/step_bench $M $P --repeats 1
step "ncu attention old" 35 $N env INFERA_CUDA_FLASH_INTERLEAVED=0 $NCU --log-file $R/ncu_old.csv $HERE/bin/step_bench $M $P --repeats 1
NS="ncu --clock-control none --section WarpStateStats --section SchedulerStats --section Occupancy -k regex:attention_flash -s 28 -c 1"
step "ncu stalls 2048 new" 30 $N $NS $HERE/bin/step_bench $M --prefill 2048 --batch 1 --context 64 --decode-steps 1 --repeats 1
step "memcheck paged attention (defaults)" 30 $S compute-sanitizer --tool memcheck --error-exitcode 3 $HERE/bin/test_backend_ops --gtest_filter=$PA
step "memcheck paged attention (split)" 30 $S env INFERA_CUDA_FLASH_SPLIT=1 compute-sanitizer --tool memcheck --error-exitcode 3 $HERE/bin/test_backend_ops --gtest_filter=$PA
step "racecheck paged attention (defaults)" 40 $S compute-sanitizer --tool racecheck --error-exitcode 3 $HERE/bin/test_backend_ops --gtest_filter=$PA
step "racecheck paged attention (split)" 40 $S env INFERA_CUDA_FLASH_SPLIT=1 compute-sanitizer --tool racecheck --error-exitcode 3 $HERE/bin/test_backend_ops --gtest_filter=$PA
tar cf $OUT/raw.tar -C $R .
echo "== summary (t=${SECONDS}s)"
grep -E "^(==|rc )|^\[  (FAILED|PASSED)  \]|Failure|over the bound" $T | tail -40
grep -E "ERROR SUMMARY|RACECHECK SUMMARY|^rc |^==" $S
grep -E "^(==|rc )|prefill .*tok/s" $B | head -80
grep -E "attention_flash" $B | head -20
