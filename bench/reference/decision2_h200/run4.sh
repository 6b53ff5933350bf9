#!/bin/bash
# Session tooling (not part of the repo): decision2 device run 4: attention kernel v2 (float4
# staging, shuffle softmax, registers for max/sum) + one bf16 conversion per shared input.
cd "$(dirname "$0")"
HERE=$PWD
REPO=$(cd ../.. && pwd)
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
DEADLINE=${DEADLINE:-165}
tar xJf bin.tar.xz
export LD_LIBRARY_PATH=$HERE/lib:/usr/local/cuda/lib64:$LD_LIBRARY_PATH
export INFERA_SHARED_DIR=$HERE/shared
T=$OUT/tests.log; B=$OUT/bench.log
left() { echo $((DEADLINE - SECONDS)); }
step() {  # step NAME SECONDS LOG cmd...
  local name=$1 secs=$2 log=$3; shift 3
  local l=$(left)
  if [ "$l" -lt 8 ]; then echo "== $name SKIPPED (deadline)" | tee -a $log; return; fi
  [ "$secs" -gt "$l" ] && secs=$l
  echo "== $name (timeout ${secs}s, t=${SECONDS}s)" | tee -a $log
  timeout $secs "$@" >> $log 2>&1; echo "rc $? ($name, t=${SECONDS}s)" | tee -a $log
}
cd $REPO
step "op harness cuda: encoder ops, quant matmul" 25 $T $HERE/bin/test_backend_ops --gtest_filter='*EncoderOps*/cuda*:*QuantOps*/cuda*'
step "decision tests cuda-exact + cuda" 20 $T sh -c "INFERA_TEST_DEVICE=cuda-exact $HERE/bin/test_decision --gtest_filter='DecisionParity.*:DecisionQuant.*' && INFERA_TEST_DEVICE=cuda $HERE/bin/test_decision --gtest_filter='DecisionQuant.*'"
step "racecheck packed attention v2" 25 $T compute-sanitizer --tool racecheck --error-exitcode 3 $HERE/bin/test_backend_ops --gtest_filter='*EncoderOps.PackedAttention/cuda'
EB="$HERE/bin/encoder_bench --device cuda --config bench/configs/modernbert-large --batch 1x93 --batch 50x93 --batch 10x512 --batch 64x512 --warmup 3"
step "encoder_bench large f32 packed attention" 30 $B env INFERA_CUDA_PACKED_MMA=0 $EB --runs 20 --attention-runs 20 --out $OUT/encoder_large_f32attn.json
step "encoder_bench large tensor-core v2" 40 $B $EB --runs 50 --attention-runs 50 --out $OUT/encoder_large_v2.json
step "profile" 15 $B env INFERA_CUDA_PROFILE=1 $HERE/bin/encoder_bench --device cuda --config bench/configs/modernbert-large --batch 50x93 --batch 10x512 --runs 3 --attention-runs 0 --warmup 1 --profile
step "decision_bench cuda decision-large" 75 $B $HERE/bin/decision_bench --device cuda --tokenizer tests/data/tokenizer_parity/wordpiece_bert.json --runs 200 --lever-runs 30 --warmup 3 --max-seconds 12 --no-quality --out $OUT/decision_bench_large.json
echo "== summary (t=${SECONDS}s)"
grep -E "^(==|rc )|^\[  (FAILED|PASSED)  \]|Failure|over the bound|Which is|max \|diff\||attention_packed|matmul Q|SUMMARY" $T | tail -40
grep -E "^(==|rc )|median|e2e|share|^attention|^matmul|^rope|^geglu|^layernorm|^add" $B | cut -c1-160 | tail -90
