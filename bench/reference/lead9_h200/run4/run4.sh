#!/bin/bash
# Session 9 lead, run 4: the merged tree (lead9 = main + cudapre + cudamk + cpudec + the lead's
# encoder fused ops) on the H200: the CUDA model/engine/decision suites, step_bench and
# encoder_bench against main's binaries (cd02e1e), 2 alternating rounds each, the op harness on
# every CUDA target, memcheck of the graph-replay / streamed / fused-op tests.
cd "$(dirname "$0")"; HERE=$PWD
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
DEADLINE=${DEADLINE:-400}
for t in bin.tar.xz shared.tar.xz; do tar xJf $t; done
export LD_LIBRARY_PATH=$HERE/lib:/usr/local/cuda/lib64:$LD_LIBRARY_PATH
export INFERA_SHARED_DIR=$HERE/shared
T=$OUT/tests.log; B=$OUT/bench.log; E=$OUT/encoder.log; S=$OUT/sanitizer.log; J=$OUT/json; mkdir -p $J
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
export INFERA_SOURCE_DIR=$PWD
M=$INFERA_SHARED_DIR/models/qwen3-0.6b
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv > $OUT/gpu.txt 2>&1
step "cuda backend tests" 40 $T $HERE/bin/test_cuda_backend
step "model tests cuda" 30 $T env INFERA_TEST_DEVICE=cuda $HERE/bin/test_model
step "model tests cuda-exact" 30 $T env INFERA_TEST_DEVICE=cuda-exact $HERE/bin/test_model --gtest_filter='Fixtures/*:*BatchParity*:*Qwen3Weights*'
step "engine tests cuda" 20 $T env INFERA_TEST_DEVICE=cuda $HERE/bin/test_engine
step "decision tests cuda" 20 $T env INFERA_TEST_DEVICE=cuda $HERE/bin/test_decision
A="--model $M --dummy-weights --device cuda --kv-dtype bf16 --prefill 512,2048 --prefill-batch 8x512 --batch 1,8,64,256 --context 512 --decode-steps 32 --repeats 7"
EB="--device cuda --config bench/configs/modernbert-large --batch 1x93 --batch 50x93 --batch 10x512 --batch 64x512 --runs 10 --attention-runs 0 --warmup 2"
for i in 1 2; do
  step "sb main #$i" 25 $B $HERE/bin/step_bench_main $A --json $J/main_$i.json
  step "sb new #$i" 30 $B $HERE/bin/step_bench $A --json $J/new_$i.json
  step "encoder main #$i" 15 $E $HERE/bin/encoder_bench_main $EB --out $J/encoder_main_$i.json
  step "encoder new #$i" 15 $E $HERE/bin/encoder_bench $EB --out $J/encoder_new_$i.json
done
step "op harness, every cuda target" 100 $T $HERE/bin/test_backend_ops --gtest_filter='*/cuda:*/cuda_exact:*/cuda_skinny:*/cuda_unstaged:*/cuda_interleaved:*/cuda_prefill_toggled:*/cuda_b1:*/cuda_flash_*'
step "memcheck graph replay, streamed, shadows, residual mlp, fused" 60 $S compute-sanitizer --tool memcheck --error-exitcode 3 $HERE/bin/test_cuda_backend --gtest_filter='*GraphReplay*:*Streamed*:*Shadow*:*ResidualMlp*:*Decode*'
cd $J && tar cJf $OUT/bench_json.tar.xz *.json; cd - >/dev/null; rm -rf $J
echo "== summary (t=${SECONDS}s)"
grep -E "^(==|rc )|^\[  (FAILED|PASSED)  \]|Failure|over the bound|ERROR SUMMARY" $T $S | tail -40
grep -E "^(==|rc )|prefill  |decode batch.*greedy" $B | tail -60
grep -E "^==|windowed min" $E | tail -24
