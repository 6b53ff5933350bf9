#!/bin/bash
# Session 9 lead, run 3: the encoder fused ops plus rope_attention_packed (one staging launch) on the H200: their
# op-harness cases on every CUDA target, the CUDA ModernBERT tests (fixtures, shadows, fused vs
# composed), decision tests, memcheck of the new kernels, then encoder_bench main (cd02e1e) vs new,
# 3 alternating rounds, the skinny GEMM (INFERA_CUDA_SKINNY=1) on the new build at 1x93, and a per-kernel profile.
cd "$(dirname "$0")"; HERE=$PWD
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
DEADLINE=${DEADLINE:-200}
for t in bin.tar.xz shared.tar.xz; do tar xJf $t; done
export LD_LIBRARY_PATH=$HERE/lib:/usr/local/cuda/lib64:$LD_LIBRARY_PATH
export INFERA_SHARED_DIR=$HERE/shared
T=$OUT/tests.log; E=$OUT/encoder.log; J=$OUT/json; mkdir -p $J
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
step "op harness encoder + fused, cuda targets" 60 $T $HERE/bin/test_backend_ops --gtest_filter='*EncoderFusedOps*/cuda*:*EncoderOps*/cuda*:*FusedOps*/cuda*'
step "cuda backend tests" 40 $T $HERE/bin/test_cuda_backend
step "model tests cuda" 40 $T env INFERA_TEST_DEVICE=cuda $HERE/bin/test_model
step "decision tests cuda" 30 $T env INFERA_TEST_DEVICE=cuda $HERE/bin/test_decision
step "memcheck encoder fused ops" 40 $T compute-sanitizer --tool memcheck --error-exitcode 3 $HERE/bin/test_backend_ops --gtest_filter='*EncoderFusedOps*/cuda:*EncoderFusedOps*/cuda_skinny:*RopeAttentionPacked*/cuda'
EB="--device cuda --config bench/configs/modernbert-large --batch 1x93 --batch 50x93 --batch 10x512 --batch 64x512 --runs 10 --attention-runs 0 --warmup 2"
for i in 1 2 3; do
  step "encoder main #$i" 25 $E $HERE/bin/encoder_bench_main $EB --out $J/encoder_main_$i.json
  step "encoder new #$i" 25 $E $HERE/bin/encoder_bench $EB --out $J/encoder_new_$i.json
done
for i in 1 2; do
  step "encoder new skinny #$i" 20 $E env INFERA_CUDA_SKINNY=1 $HERE/bin/encoder_bench --device cuda --config bench/configs/modernbert-large --batch 1x93 --runs 20 --attention-runs 0 --warmup 2 --out $J/skinny_new_$i.json
  step "encoder new plain #$i" 20 $E $HERE/bin/encoder_bench --device cuda --config bench/configs/modernbert-large --batch 1x93 --runs 20 --attention-runs 0 --warmup 2 --out $J/plain_new_$i.json
done
step "profile new" 30 $OUT/profile.log env INFERA_CUDA_PROFILE=1 $HERE/bin/encoder_bench --device cuda --config bench/configs/modernbert-large --batch 10x512 --batch 64x512 --batch 1x93 --runs 3 --attention-runs 0 --warmup 1 --profile
cd $J && tar cJf $OUT/encoder_json.tar.xz *.json; cd - >/dev/null; rm -rf $J
echo "== summary (t=${SECONDS}s)"
grep -E "^(==|rc )|^\[  (FAILED|PASSED)  \]|Failure|over the bound|ERROR SUMMARY" $T | tail -40
grep -E "^==|windowed min" $E | tail -40
