#!/bin/bash
# pf8 run 1: the wgmma prefill attention's queries loaded at the block's start
# (CudaOptions::flash_wgmma_q_prefetch, INFERA_CUDA_FLASH_WGMMA_Q_PREFETCH). Tests first (harness on
# every wgmma target + both old-path targets, the wgmma model tests, test_model on cuda), then
# step_bench main / mine / mine with the switch off, 3 alternating rounds, then ncu: the 8x512
# step's every kernel (default), the attention kernel per launch with the switch on and off,
# then memcheck + racecheck (kns=wgmma) of the changed kernels' harness cases.
cd "$(dirname "$0")"; HERE=$PWD
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
DEADLINE=${DEADLINE:-150}
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
M=$INFERA_SHARED_DIR/models/qwen3-0.6b
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv > $OUT/gpu.txt 2>&1
H="*KvWriteAndPagedAttention/cuda"
for t in "" _flash_wgmma _flash_wgmma128 _flash_wgmma_pipe _flash_wgmma_qlate _flash_wgmma128_qlate; do
  timeout 45 bin/test_backend_ops --gtest_filter="${H}${t}" > $OUT/h$t.log 2>&1 &
done
timeout 45 bin/test_cuda_backend --gtest_filter='*Wgmma*' > $OUT/cb.log 2>&1 &
# test_model: not carried (its fixtures do not fit the 64 MiB carry next to the tracked tree)
wait
for f in $OUT/h*.log $OUT/cb.log; do echo "== $(basename $f)" >> $T; grep -E "worst NMSE|over the bound|FAILED|PASSED|Failure|NMSE .* against|SKIPPED|tests ran" $f >> $T; done
A="--model $M --dummy-weights --device cuda --kv-dtype bf16 --prefill 512,2048 --prefill-batch 8x512 --batch 1 --context 512 --decode-steps 8 --repeats 5"
for i in 1 2 3; do
  step "sb main #$i" 20 $B bin/step_bench_main $A
  step "sb mine #$i" 20 $B bin/step_bench $A
  step "sb off #$i" 20 $B env INFERA_CUDA_FLASH_WGMMA_Q_PREFETCH=0 bin/step_bench $A
done
NA="--model $M --dummy-weights --device cuda --kv-dtype bf16 --prefill 512,2048 --prefill-batch 8x512 --batch 1 --context 64 --decode-steps 1 --repeats 1 --profile-step"
for q in 1 0; do
  step "ncu attn q_prefetch=$q" 25 $N env INFERA_CUDA_FLASH_WGMMA_Q_PREFETCH=$q ncu --clock-control none --profile-from-start off -k regex:attention_flash --metrics gpu__time_duration.sum --csv bin/step_bench $NA
done
NB="--model $M --dummy-weights --device cuda --kv-dtype bf16 --prefill 64 --prefill-batch 8x512 --batch 1 --context 64 --decode-steps 1 --repeats 1 --profile-step"
step "ncu all 8x512 default" 40 $N ncu --clock-control none --profile-from-start off --metrics gpu__time_duration.sum --csv bin/step_bench $NB
step "memcheck wgmma + wgmma128 harness" 25 $S compute-sanitizer --tool memcheck --error-exitcode 3 bin/test_backend_ops --gtest_filter="${H}_flash_wgmma:${H}_flash_wgmma128"
step "racecheck wgmma128 harness" 25 $S compute-sanitizer --tool racecheck --kernel-name kns=wgmma --error-exitcode 3 bin/test_backend_ops --gtest_filter="${H}_flash_wgmma128"
xz -9 $N
echo "== summary (t=${SECONDS}s)"
grep -vE "^\[ +(OK|RUN) +\]" $T | tail -45
grep -E "^(==|rc )|^prefill.*tok/s|^decode batch +1 \(one" $B | tail -70
python3 summarize.py $N.xz
grep -E "ERROR SUMMARY|RACECHECK SUMMARY|^==|^rc" $S | tail -12
