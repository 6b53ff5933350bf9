#!/bin/bash
# Session tooling (not part of the repo): the lead's verification run of the merged tree (head-major
# KV pools + cudap + cuda4) on the H200: every GPU test, compute-sanitizer on the paged-attention /
# cache-write / sampling kernels, step_bench once; and issue 6's CPU A/B (infera run, 2 threads,
# the merged build against 9e14ce9, interleaved) on this quiet host.
cd "$(dirname "$0")"
HERE=$PWD
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
DEADLINE=${DEADLINE:-300}
for t in bin.tar.xz shared.tar.xz; do tar xJf $t; done
export LD_LIBRARY_PATH=$HERE/lib:/usr/local/cuda/lib64:$LD_LIBRARY_PATH
export INFERA_SHARED_DIR=$HERE/shared
T=$OUT/tests.log; B=$OUT/bench.log; S=$OUT/sanitizer.log
left() { echo $((DEADLINE - SECONDS)); }
step() {  # step NAME SECONDS LOG cmd...
  local name=$1 secs=$2 log=$3; shift 3
  local l=$(left)
  if [ "$l" -lt 10 ]; then echo "== $name SKIPPED (deadline)" | tee -a $log; return; fi
  [ "$secs" -gt "$l" ] && secs=$l
  echo "== $name (timeout ${secs}s, t=${SECONDS}s)" | tee -a $log
  timeout $secs "$@" >> $log 2>&1; echo "rc $? ($name, t=${SECONDS}s)" | tee -a $log
}
nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv | tee -a $T
lscpu | grep -E "Model name|^CPU\(s\)" | tee -a $T
cd $HERE/../..
M=$INFERA_SHARED_DIR/models/qwen3-0.6b
step "op harness cuda+cuda_exact" 60 $T $HERE/bin/test_backend_ops --gtest_filter='*/cuda:*/cuda_exact'
step "cuda backend tests (shadows, sampling, decode vs cpu)" 60 $T $HERE/bin/test_cuda_backend
for dev in cuda cuda-exact; do
  step "model tests $dev" 40 $T env INFERA_TEST_DEVICE=$dev $HERE/bin/test_model --gtest_filter='Fixtures/*:*BatchParity*:*Qwen3Weights*:*ModernBertMicro*:-*MaskedLm*:*Classification*'
  step "engine tests $dev" 30 $T env INFERA_TEST_DEVICE=$dev $HERE/bin/test_engine --gtest_filter='*GeneratorTest*:*ForwardArgmax*'
done
step "decision tests cuda-exact + cuda" 30 $T sh -c "INFERA_TEST_DEVICE=cuda-exact $HERE/bin/test_decision --gtest_filter='DecisionParity.*:DecisionQuant.*' && INFERA_TEST_DEVICE=cuda $HERE/bin/test_decision --gtest_filter='DecisionQuant.*'"
step "memcheck paged attention, cache writes, fused" 50 $S compute-sanitizer --tool memcheck --error-exitcode 3 $HERE/bin/test_backend_ops --gtest_filter='*OpHarness.KvWriteAndPagedAttention/cuda:*FusedOps.*/cuda:*EncoderOps.PackedAttention/cuda'
step "racecheck paged attention + qk-norm-rope-kv" 40 $S compute-sanitizer --tool racecheck --error-exitcode 3 $HERE/bin/test_backend_ops --gtest_filter='*OpHarness.KvWriteAndPagedAttention/cuda:*FusedOps.QkNormRopeKvWrite/cuda'
step "issue 6 CPU A/B 512+64 (2 threads)" 75 $B python3 bench/ab_cli.py --model $M --threads 2 --rounds 6 --prompt 512 --new 64 --out $OUT/ab_issue6_512.json "new=$HERE/bin/infera --device cpu" old=$HERE/bin/infera_v0
step "issue 6 CPU A/B 128+64 (2 threads)" 35 $B python3 bench/ab_cli.py --model $M --threads 2 --rounds 4 --prompt 128 --new 64 --out $OUT/ab_issue6_128.json "new=$HERE/bin/infera --device cpu" old=$HERE/bin/infera_v0
step "step_bench cuda" 40 $B $HERE/bin/step_bench --model $M --dummy-weights --device cuda --kv-dtype bf16 --prefill 512,2048 --batch 1,8,64,256 --context 512 --decode-steps 32 --repeats 5 --json $OUT/step_bench_final.json
echo "== summary (t=${SECONDS}s)"
grep -E "^(==|rc )|^\[  (FAILED|PASSED)  \]|Failure|over the bound|tests ran" $T | tail -40
grep -E "ERROR SUMMARY|RACECHECK SUMMARY|^rc " $S
grep -E "^(==|rc )|median|vs new|prefill|decode batch.*greedy" $B | head -60
