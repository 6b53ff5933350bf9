#!/bin/bash
# Session 8 lead, run 1: the merged tree on the H200: every GPU test, memcheck of the graph-replay /
# streamed / shadow / sampling tests, step_bench main (19117b3) vs merged, 3 alternating rounds
# (prefill now timed with logits to the host and with first-token ids; main's binary has only the
# former); encoder_bench main vs merged, 2 alternating rounds.
cd "$(dirname "$0")"
HERE=$PWD
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
DEADLINE=${DEADLINE:-540}
for t in bin.tar.xz shared.tar.xz; do tar xJf $t; done
export LD_LIBRARY_PATH=$HERE/lib:/usr/local/cuda/lib64:$LD_LIBRARY_PATH
export INFERA_SHARED_DIR=$HERE/shared
T=$OUT/tests.log; B=$OUT/bench.log; S=$OUT/sanitizer.log; E=$OUT/encoder.log; J=$OUT/json; mkdir -p $J
left() { echo $((DEADLINE - SECONDS)); }
step() {
  local name=$1 secs=$2 log=$3; shift 3
  local l=$(left)
  if [ "$l" -lt 5 ]; then echo "== $name SKIPPED (deadline)" | tee -a $log; return; fi
  [ "$secs" -gt "$l" ] && secs=$l
  echo "== $name (timeout ${secs}s, t=${SECONDS}s)" | tee -a $log
  timeout $secs "$@" >> $log 2>&1; echo "rc $? ($name, t=${SECONDS}s)" | tee -a $log
}
cd $HERE/../..  # the repository root: this script runs from .devcarry/lead8/
export INFERA_SOURCE_DIR=$PWD
M=$INFERA_SHARED_DIR/models/qwen3-0.6b
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv > $OUT/gpu.txt 2>&1
step "op harness, every cuda target" 90 $T $HERE/bin/test_backend_ops --gtest_filter='*/cuda:*/cuda_exact:*/cuda_skinny:*/cuda_unstaged:*/cuda_interleaved:*/cuda_prefill_toggled:*/cuda_b1:*/cuda_flash_*'
step "cuda backend tests" 40 $T $HERE/bin/test_cuda_backend
step "model tests cuda" 40 $T env INFERA_TEST_DEVICE=cuda $HERE/bin/test_model --gtest_filter='Fixtures/*:*BatchParity*:*Qwen3Weights*:*ModernBert*'
step "model tests cuda-exact" 40 $T env INFERA_TEST_DEVICE=cuda-exact $HERE/bin/test_model --gtest_filter='Fixtures/*:*BatchParity*:*Qwen3Weights*'
step "engine tests cuda" 30 $T env INFERA_TEST_DEVICE=cuda $HERE/bin/test_engine
step "engine tests cuda-exact" 30 $T env INFERA_TEST_DEVICE=cuda-exact $HERE/bin/test_engine
step "decision tests cuda" 30 $T env INFERA_TEST_DEVICE=cuda $HERE/bin/test_decision
step "memcheck graph replay, streamed, shadows, sampling, decode" 90 $S compute-sanitizer --tool memcheck --error-exitcode 3 $HERE/bin/test_cuda_backend --gtest_filter='*GraphReplay*:*Streamed*:*Shadow*:*CudaSampling*:*Decode*'
step "racecheck paged attention (key-halves default)" 60 $S compute-sanitizer --tool racecheck --error-exitcode 3 $HERE/bin/test_backend_ops --gtest_filter='*KvWriteAndPagedAttention/cuda:*KvWriteAndPagedAttention/cuda_flash_halves'
A="--model $M --dummy-weights --device cuda --kv-dtype bf16 --prefill 512,2048 --prefill-batch 8x512 --batch 1,8,64,256 --context 512 --decode-steps 32 --repeats 7"
for i in 1 2 3; do
  step "sb main #$i" 25 $B $HERE/bin/step_bench_main $A --json $J/main_$i.json
  step "sb new #$i" 30 $B $HERE/bin/step_bench $A --json $J/new_$i.json
done
EB="--device cuda --config bench/configs/modernbert-large --batch 1x93 --batch 50x93 --batch 10x512 --batch 64x512 --runs 10 --attention-runs 0 --warmup 2"
for i in 1 2; do
  step "encoder main #$i" 40 $E $HERE/bin/encoder_bench_main $EB --out $J/encoder_main_$i.json
  step "encoder new #$i" 40 $E $HERE/bin/encoder_bench $EB --out $J/encoder_new_$i.json
done
cd $J && tar cJf $OUT/step_bench_json.tar.xz *.json; cd - >/dev/null; rm -rf $J
echo "== summary (t=${SECONDS}s)"
grep -E "^(==|rc )|^\[  (FAILED|PASSED)  \]|Failure|over the bound|tests ran|ERROR SUMMARY" $T $S | tail -40
grep -E "^(==|rc )|prefill  |decode batch.*greedy" $B | tail -80
grep -E "^==|windowed min|copy alone|median" $E | tail -30
