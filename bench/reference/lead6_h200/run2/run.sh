#!/bin/bash
# Session tooling: the lead's second H200 run: the merged tree with the session-6 defaults
# (staged decode attention on, interleaved flash tile off) and the harness targets fixed.
cd "$(dirname "$0")"
HERE=$PWD
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
DEADLINE=${DEADLINE:-120}
for t in bin.tar.xz shared.tar.xz; do tar xJf $t; done
export LD_LIBRARY_PATH=$HERE/lib:/usr/local/cuda/lib64:$LD_LIBRARY_PATH
export INFERA_SHARED_DIR=$HERE/shared
T=$OUT/tests.log; B=$OUT/bench.log; J=$OUT/json; mkdir -p $J
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
step "op harness, every cuda target" 60 $T $HERE/bin/test_backend_ops --gtest_filter='*/cuda:*/cuda_exact:*/cuda_skinny:*/cuda_unstaged:*/cuda_interleaved'
step "cuda backend tests" 30 $T $HERE/bin/test_cuda_backend
step "model tests cuda" 30 $T env INFERA_TEST_DEVICE=cuda $HERE/bin/test_model --gtest_filter='Fixtures/*:*BatchParity*:*Qwen3Weights*:*ModernBert*'
step "engine tests cuda" 20 $T env INFERA_TEST_DEVICE=cuda $HERE/bin/test_engine --gtest_filter='*GeneratorTest*:*ForwardArgmax*'
step "decision tests cuda" 20 $T env INFERA_TEST_DEVICE=cuda $HERE/bin/test_decision --gtest_filter='DecisionQuant.*'
A="--model $M --dummy-weights --device cuda --kv-dtype bf16 --prefill 512,2048 --batch 1,8,64,256 --context 512 --decode-steps 32 --repeats 9"
for i in 1 2; do
  step "sb main #$i" 20 $B $HERE/bin/step_bench_main $A --json $J/main_$i.json
  step "sb new #$i" 20 $B $HERE/bin/step_bench $A --prefill-batch 8x512 --json $J/new_$i.json
done
cd $J && tar cJf $OUT/step_bench_json.tar.xz *.json; cd - >/dev/null; rm -rf $J
echo "== summary (t=${SECONDS}s)"
grep -E "^(==|rc )|^\[  (FAILED|PASSED)  \]|Failure|over the bound|tests ran" $T | tail -30
grep -E "^(==|rc )|prefill  |decode batch.*greedy" $B
