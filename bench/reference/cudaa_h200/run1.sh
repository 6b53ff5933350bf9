#!/bin/bash
# cudaa (issue 11, batched decode attention through shared memory): the one H200 run. Op harness
# paged attention with the staged kernel (planned splits, forced splits 1 / 7, stages 3 / 6) and
# the old kernel; test_cuda_backend; ncu of the decode attention at b256 / b64 old vs new (+ stage
# and split variants); step_bench decode b8,64,256 new/old alternating 3x; memcheck + racecheck.
cd "$(dirname "$0")"
HERE=$PWD
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
DEADLINE=${DEADLINE:-182}
for t in bin.tar.xz shared.tar.xz; do tar xJf $t; done
export LD_LIBRARY_PATH=$HERE/lib:/usr/local/cuda/lib64:$LD_LIBRARY_PATH
export INFERA_SHARED_DIR=$HERE/shared
R=/tmp/cudaa_raw; mkdir -p $R
T=$OUT/tests.log; B=$OUT/bench.log; S=$OUT/sanitizer.log; N=$OUT/ncu.log
left() { echo $((DEADLINE - SECONDS)); }
step() {
  local name=$1 secs=$2 log=$3; shift 3
  local l=$(left)
  if [ "$l" -lt 6 ]; then echo "== $name SKIPPED (deadline)" | tee -a $log; return; fi
  [ "$secs" -gt "$l" ] && secs=$l
  echo "== $name (timeout ${secs}s, t=${SECONDS}s)" >> $log
  timeout $secs "$@" >> $log 2>&1; echo "rc $? ($name, t=${SECONDS}s)" | tee -a $log
}
nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv | tee -a $T
cd $HERE/../..
M="--model $INFERA_SHARED_DIR/models/qwen3-0.6b --dummy-weights --device cuda --kv-dtype bf16"
PA='*OpHarness.KvWriteAndPagedAttention/cuda*'
OB=$HERE/bin/test_backend_ops
step "paged attention, staged (planned splits)" 20 $T $OB --gtest_filter=$PA
step "paged attention, staged, splits 1, stages 3" 15 $T env INFERA_CUDA_DECODE_SPLITS=1 INFERA_CUDA_DECODE_STAGES=3 $OB --gtest_filter=$PA
step "paged attention, staged, splits 7, stages 6" 15 $T env INFERA_CUDA_DECODE_SPLITS=7 INFERA_CUDA_DECODE_STAGES=6 $OB --gtest_filter=$PA
step "paged attention, old kernel" 15 $T env INFERA_CUDA_DECODE_STAGED=0 $OB --gtest_filter=$PA
step "test_cuda_backend (all)" 25 $T $HERE/bin/test_cuda_backend
NCU="ncu --clock-control none --cache-control none --metrics gpu__time_duration.sum,dram__bytes_read.sum,launch__grid_size,launch__registers_per_thread,sm__warps_active.avg.pct_of_peak_sustained_active,launch__occupancy_limit_shared_mem --csv --page raw -k regex:attention_decode -c 28"
D1="--context 512 --decode-steps 1"
step "ncu b256 new" 15 $N $NCU --log-file $R/ncu_b256_new.csv $HERE/bin/step_bench $M --batch 256 $D1
step "ncu b256 old" 15 $N env INFERA_CUDA_DECODE_STAGED=0 $NCU --log-file $R/ncu_b256_old.csv $HERE/bin/step_bench $M --batch 256 $D1
step "ncu b64 new" 12 $N $NCU --log-file $R/ncu_b64_new.csv $HERE/bin/step_bench $M --batch 64 $D1
step "ncu b64 old" 12 $N env INFERA_CUDA_DECODE_STAGED=0 $NCU --log-file $R/ncu_b64_old.csv $HERE/bin/step_bench $M --batch 64 $D1
DB="--batch 8,64,256 --context 512 --decode-steps 32"
step "step_bench new #1" 20 $B $HERE/bin/step_bench $M $DB --json $R/sb_new_1.json
step "step_bench old #1" 20 $B env INFERA_CUDA_DECODE_STAGED=0 $HERE/bin/step_bench $M $DB --json $R/sb_old_1.json
step "memcheck paged attention (staged, planned)" 25 $S compute-sanitizer --tool memcheck --error-exitcode 3 $OB --gtest_filter='*OpHarness.KvWriteAndPagedAttention/cuda'
step "racecheck paged attention (staged, planned)" 25 $S compute-sanitizer --tool racecheck --error-exitcode 3 $OB --gtest_filter='*OpHarness.KvWriteAndPagedAttention/cuda'
for i in 2 3; do
  step "step_bench new #$i" 20 $B $HERE/bin/step_bench $M $DB --json $R/sb_new_$i.json
  step "step_bench old #$i" 20 $B env INFERA_CUDA_DECODE_STAGED=0 $HERE/bin/step_bench $M $DB --json $R/sb_old_$i.json
done
step "ncu b256 new splits 1" 12 $N env INFERA_CUDA_DECODE_SPLITS=1 $NCU --log-file $R/ncu_b256_s1.csv $HERE/bin/step_bench $M --batch 256 $D1
step "ncu b256 new stages 6" 12 $N env INFERA_CUDA_DECODE_STAGES=6 $NCU --log-file $R/ncu_b256_st6.csv $HERE/bin/step_bench $M --batch 256 $D1
step "ncu b256 new stages 3" 12 $N env INFERA_CUDA_DECODE_STAGES=3 $NCU --log-file $R/ncu_b256_st3.csv $HERE/bin/step_bench $M --batch 256 $D1
step "memcheck paged attention (staged, splits 1, stages 3)" 20 $S env INFERA_CUDA_DECODE_SPLITS=1 INFERA_CUDA_DECODE_STAGES=3 compute-sanitizer --tool memcheck --error-exitcode 3 $OB --gtest_filter='*OpHarness.KvWriteAndPagedAttention/cuda'
tar cf $OUT/raw.tar -C $R .
echo "== summary (t=${SECONDS}s)"
grep -E "^(==|rc )|^\[  (FAILED|PASSED)  \]|Failure|over the bound|attention (BF16|F16)" $T | tail -40
grep -E "ERROR SUMMARY|RACECHECK SUMMARY|^rc |^==" $S
grep -E "^(==|rc )|decode batch" $B | head -60
grep -E "^(==|rc )" $N
