#!/bin/bash
# Session 11 lead, run 1: the merged tree (lead11: cpuq6 + pf8 + b1fuse + attn256 + the lead's
# changes) on the H200, slim binaries (INFERA_CUDA_SLIM_FATBIN=ON) staged by
# scripts/device_stage.sh into .devcarry/lead11, with main dfa055c's step_bench (slim, attn256's).
# Correctness first (the CUDA suites, the op harness on every CUDA target, the model suites with
# the two new off-by-default kernels switched on, sanitizers on them; in parallel: nothing here
# is timed), then step_bench alternating main / new / new + INFERA_CUDA_B1_FUSE=1 /
# new + INFERA_CUDA_DECODE_MMA=1, 3 rounds; the encoder; ncu of the new kernels if time is left.
cd "$(dirname "$0")"; HERE=$PWD
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
DEADLINE=${DEADLINE:-440}
tar xJf bin.tar.xz; tar xJf shared.tar.xz
export LD_LIBRARY_PATH=$HERE/lib:/usr/local/cuda/lib64:$LD_LIBRARY_PATH
export INFERA_SHARED_DIR=$HERE/shared
B=$HERE/bin; R=/tmp/raw; mkdir -p $R
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
  grep -E "^\[  (FAILED|PASSED)  \]|tests ran|Failure|over the bound|^rc " $2 | grep -v "cpu" | tail -30 >> $T
}
export INFERA_SOURCE_DIR=$(cd $HERE/../.. && pwd)
M=$INFERA_SHARED_DIR/models/qwen3-0.6b
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv > $OUT/gpu.txt 2>&1
# --- correctness, in parallel groups
(
  timeout 60 $B/test_cuda_backend > $R/cb.log 2>&1; echo "rc $?" >> $R/cb.log
  timeout 40 env INFERA_TEST_DEVICE=cuda $B/test_model > $R/model.log 2>&1; echo "rc $?" >> $R/model.log
  timeout 40 env INFERA_TEST_DEVICE=cuda-exact $B/test_model --gtest_filter='Fixtures/*:*BatchParity*:*Qwen3Weights*' > $R/model_exact.log 2>&1; echo "rc $?" >> $R/model_exact.log
  timeout 30 env INFERA_TEST_DEVICE=cuda $B/test_engine > $R/engine.log 2>&1; echo "rc $?" >> $R/engine.log
  timeout 30 env INFERA_TEST_DEVICE=cuda $B/test_decision > $R/decision.log 2>&1; echo "rc $?" >> $R/decision.log
) &
(
  for i in 0 1 2 3 4 5 6 7; do
    GTEST_TOTAL_SHARDS=8 GTEST_SHARD_INDEX=$i timeout 120 $B/test_backend_ops --gtest_filter='*/cuda*' > $R/shard_$i.log 2>&1 &
  done
  wait
) &
(
  for sw in INFERA_CUDA_B1_FUSE=1 INFERA_CUDA_DECODE_MMA=1; do
    n=${sw%%=*}
    timeout 60 env $sw $B/test_cuda_backend > $R/cb_$n.log 2>&1; echo "rc $?" >> $R/cb_$n.log
    timeout 40 env $sw INFERA_TEST_DEVICE=cuda $B/test_model > $R/model_$n.log 2>&1; echo "rc $?" >> $R/model_$n.log
    timeout 30 env $sw INFERA_TEST_DEVICE=cuda $B/test_engine > $R/engine_$n.log 2>&1; echo "rc $?" >> $R/engine_$n.log
  done
) &
(
  timeout 90 env INFERA_CUDA_B1_FUSE=1 compute-sanitizer --tool memcheck --error-exitcode 3 $B/test_backend_ops --gtest_filter='*ChainFusedOps*/cuda' > $R/memcheck_b1.log 2>&1; echo "rc $?" >> $R/memcheck_b1.log
  timeout 90 compute-sanitizer --tool memcheck --kernel-name kns=attention_decode_mma --error-exitcode 3 $B/test_backend_ops --gtest_filter='*KvWriteAndPagedAttention/cuda_decode_mma' > $R/memcheck_mma.log 2>&1; echo "rc $?" >> $R/memcheck_mma.log
  timeout 90 compute-sanitizer --tool racecheck --kernel-name kns=attention_decode_mma --error-exitcode 3 $B/test_backend_ops --gtest_filter='*KvWriteAndPagedAttention/cuda_decode_mma' > $R/racecheck_mma.log 2>&1; echo "rc $?" >> $R/racecheck_mma.log
  timeout 60 compute-sanitizer --tool racecheck --kernel-name kns=wgmma --error-exitcode 3 $B/test_backend_ops --gtest_filter='*KvWriteAndPagedAttention/cuda_flash_wgmma128' > $R/racecheck_wgmma.log 2>&1; echo "rc $?" >> $R/racecheck_wgmma.log
) &
wait
for f in cb model model_exact engine decision cb_INFERA_CUDA_B1_FUSE model_INFERA_CUDA_B1_FUSE engine_INFERA_CUDA_B1_FUSE cb_INFERA_CUDA_DECODE_MMA model_INFERA_CUDA_DECODE_MMA engine_INFERA_CUDA_DECODE_MMA; do verdict $f $R/$f.log; done
for i in 0 1 2 3 4 5 6 7; do verdict "harness shard $i" $R/shard_$i.log; done
for f in memcheck_b1 memcheck_mma racecheck_mma racecheck_wgmma; do echo "== $f" >> $S; grep -E "ERROR SUMMARY|RACECHECK SUMMARY|Invalid|hazard|^rc |PASSED|FAILED" $R/$f.log | head -12 >> $S; done
echo "correctness done t=${SECONDS}s" | tee -a $T
# --- timings, one process on the GPU at a time
A="--model $M --dummy-weights --device cuda --kv-dtype bf16 --prefill 512,2048 --prefill-batch 8x512 --batch 1,8,64,256 --context 512 --decode-steps 32 --repeats 3"
mkdir -p $R/json
for i in 1 2 3; do
  step "sb main #$i" 25 $L $B/step_bench_main $A --json $R/json/main_$i.json
  step "sb new #$i" 25 $L $B/step_bench $A --json $R/json/new_$i.json
  step "sb b1fuse #$i" 25 $L env INFERA_CUDA_B1_FUSE=1 $B/step_bench $A --json $R/json/b1fuse_$i.json
  step "sb mma #$i" 25 $L env INFERA_CUDA_DECODE_MMA=1 $B/step_bench $A --json $R/json/mma_$i.json
done
EB="--device cuda --config bench/configs/modernbert-large --batch 1x93 --batch 50x93 --batch 10x512 --batch 64x512 --runs 10 --attention-runs 0 --warmup 2"
step "encoder new" 20 $L $B/encoder_bench $EB
NA="--model $M --dummy-weights --device cuda --kv-dtype bf16 --prefill 512 --context 512 --decode-steps 2 --repeats 1 --profile-step"
MET=gpu__time_duration.sum,dram__bytes_read.sum,smsp__inst_executed.sum
step "ncu b1 fuse=1" 30 $N env INFERA_CUDA_B1_FUSE=1 ncu --clock-control none --profile-from-start off --metrics gpu__time_duration.sum --csv $B/step_bench $NA --batch 1
step "ncu b1 fuse=0" 30 $N env INFERA_CUDA_B1_FUSE=0 ncu --clock-control none --profile-from-start off --metrics gpu__time_duration.sum --csv $B/step_bench $NA --batch 1
step "ncu attention b256 mma=0" 25 $N env INFERA_CUDA_DECODE_MMA=0 ncu --clock-control none --profile-from-start off -k regex:attention_decode -c 4 --metrics $MET --csv $B/step_bench $NA --batch 256
step "ncu attention b256 mma=1" 25 $N env INFERA_CUDA_DECODE_MMA=1 ncu --clock-control none --profile-from-start off -k regex:attention_decode -c 4 --metrics $MET --csv $B/step_bench $NA --batch 256
tar -C /tmp -cJf $OUT/raw.tar.xz raw; xz -9 -f $N
echo "== summary (t=${SECONDS}s)"
grep -E "^==|^\[  FAILED|tests ran|Failure|over the bound|^rc [^0]|done" $T | tail -70
cat $S
grep -E "^(==|rc )|prefill  |decode batch.*greedy" $L | tail -70
