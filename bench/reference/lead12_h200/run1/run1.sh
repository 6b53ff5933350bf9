#!/bin/bash
# Session 12 lead, run 1: the one-kernel decoder stack for batch-1 decode (decode_stack.cu,
# INFERA_CUDA_DECODE_STACK=1) on the H200. Slim binaries staged by scripts/device_stage.sh.
# Correctness first (the new model-level tests, the CUDA suites with the switch off and on, the
# sanitizers on the new kernel), then step_bench alternating the switch off / on in one binary
# (off = exactly the op sequence main runs), then ncu of one b1 step each way.
cd "$(dirname "$0")"; HERE=$PWD
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
DEADLINE=${DEADLINE:-450}
tar xJf bin.tar.xz; tar xJf shared.tar.xz
export LD_LIBRARY_PATH=$HERE/lib:/usr/local/cuda/lib64:$LD_LIBRARY_PATH
export INFERA_SHARED_DIR=$HERE/shared
B=$HERE/bin; R=$OUT/raw; mkdir -p $R
T=$OUT/tests.log; L=$OUT/bench.log; N=$OUT/ncu.log; S=$OUT/sanitizer.log
left() { echo $((DEADLINE - SECONDS)); }
step() {
  local name=$1 secs=$2 log=$3; shift 3
  local l=$(left)
  if [ "$l" -lt 5 ]; then echo "== $name SKIPPED (deadline)" | tee -a $log; return; fi
  [ "$secs" -gt "$l" ] && secs=$l
  echo "== $name (timeout ${secs}s, t=${SECONDS}s)" | tee -a $log
  timeout $secs "$@" >> $log 2>&1; echo "rc $? ($name, t=${SECONDS}s)" | tee -a $log
}
verdict() {  # name log
  echo "== $1" >> $T
  grep -E "^\[  (FAILED|PASSED)  \]|tests ran|Failure|decode_stack kernels|Expected|Which is|^rc " $2 | tail -40 >> $T
}
export INFERA_SOURCE_DIR=$(cd $HERE/../.. && pwd)
M=$INFERA_SHARED_DIR/models/qwen3-0.6b
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv > $OUT/gpu.txt 2>&1
# --- correctness: the new tests first, alone (their result decides what the rest means)
timeout 90 $B/test_cuda_backend --gtest_filter='*DecodeStack*' > $R/stack.log 2>&1; echo "rc $?" >> $R/stack.log
verdict stack $R/stack.log
(
  timeout 80 $B/test_cuda_backend --gtest_filter='-*DecodeStack*' > $R/cb.log 2>&1; echo "rc $?" >> $R/cb.log
  timeout 40 env INFERA_TEST_DEVICE=cuda $B/test_model > $R/model.log 2>&1; echo "rc $?" >> $R/model.log
  timeout 40 env INFERA_CUDA_DECODE_STACK=1 INFERA_TEST_DEVICE=cuda $B/test_model > $R/model_stack.log 2>&1; echo "rc $?" >> $R/model_stack.log
  timeout 40 env INFERA_CUDA_DECODE_STACK=1 INFERA_TEST_DEVICE=cuda-exact $B/test_model > $R/model_exact_stack.log 2>&1; echo "rc $?" >> $R/model_exact_stack.log
  timeout 30 env INFERA_CUDA_DECODE_STACK=1 INFERA_TEST_DEVICE=cuda $B/test_engine > $R/engine_stack.log 2>&1; echo "rc $?" >> $R/engine_stack.log
  timeout 30 env INFERA_TEST_DEVICE=cuda $B/test_engine > $R/engine.log 2>&1; echo "rc $?" >> $R/engine.log
) &
(
  timeout 120 compute-sanitizer --tool memcheck --kernel-name kns=decode_stack --error-exitcode 3 $B/test_cuda_backend --gtest_filter='*DecodeStack*qwen3_micro:*DecodeStack*head_dim_128:*DecodeStack*layers_long' > $R/memcheck.log 2>&1; echo "rc $?" >> $R/memcheck.log
  timeout 120 compute-sanitizer --tool racecheck --kernel-name kns=decode_stack --error-exitcode 3 $B/test_cuda_backend --gtest_filter='*DecodeStack*qwen3_small*:*DecodeStack*0_6b_layers' > $R/racecheck.log 2>&1; echo "rc $?" >> $R/racecheck.log
) &
wait
for f in cb model model_stack model_exact_stack engine_stack engine; do verdict $f $R/$f.log; done
for f in memcheck racecheck; do echo "== $f" >> $S; grep -E "ERROR SUMMARY|RACECHECK SUMMARY|Invalid|hazard|^rc |PASSED|FAILED" $R/$f.log | head -12 >> $S; done
echo "correctness done t=${SECONDS}s" | tee -a $T
# --- timings, one process on the GPU at a time; off / on alternating
A="--model $M --dummy-weights --device cuda --kv-dtype bf16 --batch 1 --context 512 --decode-steps 64 --repeats 5"
A2="--model $M --dummy-weights --device cuda --kv-dtype bf16 --batch 1 --context 2048 --decode-steps 64 --repeats 5"
mkdir -p $R/json
for i in 1 2 3 4; do
  step "b1 off #$i" 20 $L env INFERA_CUDA_DECODE_STACK=0 $B/step_bench $A --json $R/json/off_$i.json
  step "b1 on #$i" 20 $L env INFERA_CUDA_DECODE_STACK=1 $B/step_bench $A --json $R/json/on_$i.json
  step "b1 on p1 #$i" 20 $L env INFERA_CUDA_DECODE_STACK=1 INFERA_CUDA_DECODE_STACK_PREFETCH=1 $B/step_bench $A --json $R/json/onp1_$i.json
  step "b1 on p2 #$i" 20 $L env INFERA_CUDA_DECODE_STACK=1 INFERA_CUDA_DECODE_STACK_PREFETCH=2 $B/step_bench $A --json $R/json/onp2_$i.json
  [ $i -le 2 ] && step "b1 on s8 #$i" 20 $L env INFERA_CUDA_DECODE_STACK=1 INFERA_CUDA_DECODE_STACK_SPLITS=8 $B/step_bench $A --json $R/json/ons8_$i.json
done
for i in 1 2; do
  step "b1 ctx2048 off #$i" 25 $L env INFERA_CUDA_DECODE_STACK=0 $B/step_bench $A2 --json $R/json/off2k_$i.json
  step "b1 ctx2048 on #$i" 25 $L env INFERA_CUDA_DECODE_STACK=1 $B/step_bench $A2 --json $R/json/on2k_$i.json
done
NA="--model $M --dummy-weights --device cuda --kv-dtype bf16 --context 512 --decode-steps 2 --repeats 1 --profile-step --batch 1"
step "ncu b1 stack=1" 40 $N env INFERA_CUDA_DECODE_STACK=1 ncu --clock-control none --profile-from-start off --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed --csv $B/step_bench $NA
step "ncu b1 stack=0" 40 $N env INFERA_CUDA_DECODE_STACK=0 ncu --clock-control none --profile-from-start off --metrics gpu__time_duration.sum --csv $B/step_bench $NA
step "ncu stack sections" 60 $OUT/ncu_stack_sections.log env INFERA_CUDA_DECODE_STACK=1 ncu --clock-control none --profile-from-start off --kernel-name regex:decode_stack --launch-count 1 --section SpeedOfLight --section WarpStateStats --section SchedulerStats --section MemoryWorkloadAnalysis --section LaunchStats --section Occupancy $B/step_bench $NA
grep -E "decode|b=1|tok/s" $L | head -60 > $OUT/bench_summary.txt
echo "all done t=${SECONDS}s" | tee -a $T
