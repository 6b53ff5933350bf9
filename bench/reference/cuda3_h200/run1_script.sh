#!/bin/bash
# Session tooling (not part of the repo): cuda3 device run 1 = ground truth before changes.
# Per-kernel device durations (ncu, one metric) for prefill 2048 and decode b1; detailed ncu
# sections on the prefill GEMMs and the b1 decode attention/GEMV; cuBLAS probe; baseline
# step_bench; racecheck of the attention harness (fix 5750130 never re-run on the device).
cd "$(dirname "$0")"
HERE=$PWD
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
DEADLINE=${DEADLINE:-230}
for t in bin.tar.xz shared.tar.xz; do
  tar xJf $t 2>/dev/null || python3 -c "import tarfile,sys; tarfile.open(sys.argv[1]).extractall()" $t
done
export LD_LIBRARY_PATH=$HERE/lib:/usr/local/cuda/lib64:$LD_LIBRARY_PATH
export INFERA_SHARED_DIR=$HERE/shared
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
L=$OUT/run1.log
left() { echo $((DEADLINE - SECONDS)); }
step() {  # step NAME SECONDS LOG cmd...
  local name=$1 secs=$2 log=$3; shift 3
  local l=$(left)
  if [ "$l" -lt 10 ]; then echo "== $name SKIPPED (deadline)" | tee -a $log; return; fi
  [ "$secs" -gt "$l" ] && secs=$l
  echo "== $name (timeout ${secs}s, t=${SECONDS}s)" | tee -a $log
  timeout $secs "$@" >> $log 2>&1; echo "rc $? ($name, t=${SECONDS}s)" | tee -a $log
}
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm --format=csv | tee -a $L
echo "ncu: $NCU" | tee -a $L
M="--model shared/models/qwen3-0.6b --dummy-weights --device cuda --kv-dtype bf16"
step "gemm probe" 30 $OUT/probe.log bin/cuda_gemm_probe
step "step_bench baseline" 50 $L bin/step_bench $M --prefill 512,2048 --batch 1,8,64,256 --context 512 --decode-steps 32 --repeats 5 --json $OUT/step_bench_base.json
step "ncu times prefill2048+b1" 70 $L $NCU --clock-control none --cache-control none --metrics gpu__time_duration.sum --csv --page raw --log-file $OUT/ncu_times.csv bin/step_bench $M --prefill 2048 --batch 1 --context 512 --decode-steps 2 --repeats 1
step "ncu detail gemm" 40 $L $NCU --clock-control none --cache-control none -k regex:'gemm|nvjet|xmma|cutlass' --launch-skip 196 --launch-count 7 --section SpeedOfLight --section LaunchStats --section Occupancy --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis --log-file $OUT/ncu_gemm.txt bin/step_bench $M --prefill 2048 --batch 1 --context 16 --decode-steps 1 --repeats 1
step "ncu detail decode b1" 40 $L $NCU --clock-control none --cache-control none -k regex:'attention_decode|gemv_vec|add_rmsnorm|qk_norm' --launch-skip 400 --launch-count 8 --section SpeedOfLight --section LaunchStats --section Occupancy --section MemoryWorkloadAnalysis --section WarpStateStats --section SchedulerStats --log-file $OUT/ncu_decode.txt bin/step_bench $M --prefill 16 --batch 1 --context 512 --decode-steps 4 --repeats 1
step "racecheck attention harness" 40 $OUT/sanitizer.log compute-sanitizer --tool racecheck --error-exitcode 3 bin/test_backend_ops --gtest_filter='*OpHarness.KvWriteAndPagedAttention/cuda:*FusedOps.QkNormRopeKvWrite/cuda'
echo "== summary (t=${SECONDS}s)"
cat $OUT/probe.log
grep -E "^(==|rc )|prefill|decode batch" $L
grep -E "RACECHECK SUMMARY|rc " $OUT/sanitizer.log
ls -la $OUT
