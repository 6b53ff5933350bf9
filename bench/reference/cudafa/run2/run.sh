#!/bin/bash
# cudafa run 2: the key-halves flash kernel (INFERA_CUDA_FLASH_HALVES=1, 64-vector tiles, 8 warps,
# each 64-key tile's halves on two warps) next to the wide kernels: op harness of every flash
# target, CUDA backend and model tests with the switch set, memcheck + racecheck of the attention
# cases on the new targets, step_bench A/B (main 19117b3 / halves / wide8 / wide4, 3 alternating
# rounds), encoder_bench main / halves, ncu of the halves kernel.
cd "$(dirname "$0")"
HERE=$PWD
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
DEADLINE=${DEADLINE:-228}
for t in bin.tar.xz shared.tar.xz; do tar xJf $t; done
export LD_LIBRARY_PATH=$HERE/lib:/usr/local/cuda/lib64:$LD_LIBRARY_PATH
export INFERA_SHARED_DIR=$HERE/shared
T=$OUT/tests.log; B=$OUT/bench.log; S=$OUT/sanitizer.log; N=$OUT/ncu.log; E=$OUT/encoder.log
left() { echo $((DEADLINE - SECONDS)); }
step() {  # step NAME SECONDS LOG cmd...
  local name=$1 secs=$2 log=$3; shift 3
  local l=$(left)
  if [ "$l" -lt 5 ]; then echo "== $name SKIPPED (deadline)" | tee -a $log; return; fi
  [ "$secs" -gt "$l" ] && secs=$l
  echo "== $name (timeout ${secs}s, t=${SECONDS}s)" | tee -a $log
  timeout $secs "$@" >> $log 2>&1; echo "rc $? ($name, t=${SECONDS}s)" | tee -a $log
}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv | tee -a $T
cd $HERE/../..
export INFERA_SOURCE_DIR=$PWD
M=$INFERA_SHARED_DIR/models/qwen3-0.6b
step "op harness attention: cuda + every flash target; encoder attention cuda, cuda_flash_halves" 45 $T $HERE/bin/test_backend_ops --gtest_filter='*KvWriteAndPagedAttention/cuda:*KvWriteAndPagedAttention/cuda_flash_*:*EncoderOps*Attention*/cuda:*EncoderOps*Attention*/cuda_flash_halves'
step "cuda backend tests, FLASH_HALVES=1 (no qwen3-micro)" 25 $T env INFERA_CUDA_FLASH_HALVES=1 $HERE/bin/test_cuda_backend --gtest_filter='-*GraphReplay*:*Streamed*:*GeneratorSamples*'
step "model tests cuda, FLASH_HALVES=1" 20 $T env INFERA_TEST_DEVICE=cuda INFERA_CUDA_FLASH_HALVES=1 $HERE/bin/test_model --gtest_filter='Fixtures/*qwen3_small_untied*:*ModernBert*:*EncoderBatch*:*Qwen3Weights.Float32*'
A="--model $M --dummy-weights --device cuda --kv-dtype bf16 --prefill 512,2048 --prefill-batch 8x512 --batch 1,64 --context 512 --decode-steps 16 --repeats 7"
for i in 1 2 3; do
  step "sb main #$i" 20 $B $HERE/bin/step_bench_main $A
  step "sb halves #$i" 20 $B env INFERA_CUDA_FLASH_HALVES=1 $HERE/bin/step_bench $A
  step "sb wide8 #$i" 20 $B env INFERA_CUDA_FLASH_WIDE=8 $HERE/bin/step_bench $A
  step "sb wide4 #$i" 20 $B env INFERA_CUDA_FLASH_WIDE=4 $HERE/bin/step_bench $A
done
EB="--device cuda --config bench/configs/modernbert-large --batch 10x512 --batch 64x512 --runs 5 --attention-runs 0 --warmup 2"
step "encoder main" 25 $E $HERE/bin/encoder_bench_main $EB
step "encoder halves" 25 $E env INFERA_CUDA_FLASH_HALVES=1 $HERE/bin/encoder_bench $EB
step "memcheck attention cuda_flash_halves, cuda_flash_wide" 35 $S compute-sanitizer --tool memcheck --error-exitcode 3 $HERE/bin/test_backend_ops --gtest_filter='*KvWriteAndPagedAttention/cuda_flash_halves:*KvWriteAndPagedAttention/cuda_flash_wide:*EncoderOps.PackedAttention/cuda_flash_halves'
step "racecheck attention cuda_flash_halves, cuda_flash_wide" 40 $S compute-sanitizer --tool racecheck --error-exitcode 3 $HERE/bin/test_backend_ops --gtest_filter='*KvWriteAndPagedAttention/cuda_flash_halves:*KvWriteAndPagedAttention/cuda_flash_wide:*EncoderOps.PackedAttention/cuda_flash_halves'
NCU="ncu --clock-control none --cache-control none"
D="--model $M --dummy-weights --device cuda --kv-dtype bf16 --prefill 2048 --prefill-batch 8x512 --batch 1 --context 64 --decode-steps 1 --repeats 1"
step "ncu durations halves" 15 $N env INFERA_CUDA_FLASH_HALVES=1 $NCU --metrics gpu__time_duration.sum --csv --page raw -k regex:attention_flash --log-file $OUT/ncu_dur_halves.csv $HERE/bin/step_bench $D
P="--model $M --dummy-weights --device cuda --kv-dtype bf16 --prefill 2048 --batch 1 --context 64 --decode-steps 1 --repeats 1"
step "ncu full halves 2048 (launch 41)" 20 $N env INFERA_CUDA_FLASH_HALVES=1 $NCU --set full --csv --page details -k regex:attention_flash --launch-skip 40 --launch-count 1 --log-file $OUT/ncu_full_halves.csv $HERE/bin/step_bench $P
for f in $OUT/ncu_*.csv; do [ -f "$f" ] && xz -9 "$f"; done
echo "== summary (t=${SECONDS}s)"
grep -E "^(==|rc )|^\[  (FAILED|PASSED)  \]|Failure|over the bound|tests ran" $T | tail -30
grep -E "ERROR SUMMARY|RACECHECK SUMMARY|^rc " $S
grep -E "^(==|rc )|prefill  " $B | tail -70
grep -E "^(==|rc )|forward|windowed" $E | tail -20
