#!/bin/bash
# Session tooling (not part of the repo): decision2 device run 2 (tensor-core packed attention).
cd "$(dirname "$0")"
HERE=$PWD
REPO=$(cd ../.. && pwd)
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
DEADLINE=${DEADLINE:-385}
tar xJf bin.tar.xz
export LD_LIBRARY_PATH=$HERE/lib:/usr/local/cuda/lib64:$LD_LIBRARY_PATH
export INFERA_SHARED_DIR=$HERE/shared
T=$OUT/tests.log; B=$OUT/bench.log
left() { echo $((DEADLINE - SECONDS)); }
step() {  # step NAME SECONDS LOG cmd...
  local name=$1 secs=$2 log=$3; shift 3
  local l=$(left)
  if [ "$l" -lt 10 ]; then echo "== $name SKIPPED (deadline)" | tee -a $log; return; fi
  [ "$secs" -gt "$l" ] && secs=$l
  echo "== $name (timeout ${secs}s, t=${SECONDS}s)" | tee -a $log
  timeout $secs "$@" >> $log 2>&1; echo "rc $? ($name, t=${SECONDS}s)" | tee -a $log
}
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm --format=csv | tee -a $T
cd $REPO
step "op harness cuda: encoder ops (tensor-core + dense), quant matmul" 40 $T $HERE/bin/test_backend_ops --gtest_filter='*EncoderOps*/cuda*:*QuantOps*/cuda*:BackendOptions*'
step "decision tests cuda-exact" 20 $T env INFERA_TEST_DEVICE=cuda-exact $HERE/bin/test_decision --gtest_filter='DecisionParity.*:DecisionQuant.*'
step "decision tests cuda (bf16)" 20 $T env INFERA_TEST_DEVICE=cuda $HERE/bin/test_decision --gtest_filter='DecisionParity.*:DecisionQuant.*'
R="$HERE/bin/infera decide --model $HERE/shared/fixtures/decision-micro --request $HERE/ids_request.json"
step "infera decide cpu" 15 $T $R --device cpu --out /tmp/decide_cpu.json
step "infera decide cuda (packed attention f32 kernel)" 15 $T env INFERA_CUDA_PACKED_MMA=0 $R --device cuda --out /tmp/decide_cuda_f32attn.json
step "infera decide cuda (tensor-core packed attention)" 15 $T $R --device cuda --out /tmp/decide_cuda.json
echo "f32 packed attention kernel:" | tee -a $T; python3 $HERE/compare_decide.py /tmp/decide_cpu.json /tmp/decide_cuda_f32attn.json $HERE/shared/fixtures/decision-micro/cases.json 2>&1 | tee -a $T
echo "tensor-core packed attention:" | tee -a $T; python3 $HERE/compare_decide.py /tmp/decide_cpu.json /tmp/decide_cuda.json $HERE/shared/fixtures/decision-micro/cases.json 2>&1 | tee -a $T
EB="$HERE/bin/encoder_bench --device cuda --config bench/configs/modernbert-large --batch 1x93 --batch 50x93 --batch 10x512 --batch 64x512 --warmup 3"
step "encoder_bench large BEFORE (f32 packed attention)" 45 $B env INFERA_CUDA_PACKED_MMA=0 $EB --runs 30 --attention-runs 30 --out $OUT/encoder_large_before.json
step "encoder_bench large AFTER (tensor-core packed attention)" 55 $B $EB --runs 50 --attention-runs 50 --out $OUT/encoder_large_after.json
step "transformers reference" 110 $B python3 $HERE/hf_decision_speed.py --config-dir bench/configs/decision-large --runs 200 --encoder-runs 50 --json $OUT/hf_decision.json
step "decision_bench cuda decision-large" 80 $B $HERE/bin/decision_bench --device cuda --tokenizer tests/data/tokenizer_parity/wordpiece_bert.json --runs 200 --lever-runs 60 --warmup 3 --max-seconds 25 --no-quality --out $OUT/decision_bench_large.json
step "encoder_bench cuda mmbert-base" 30 $B $HERE/bin/encoder_bench --device cuda --config bench/configs/mmbert-base --runs 50 --attention-runs 50 --warmup 3 --out $OUT/encoder_mmbert_after.json
step "racecheck tensor-core packed attention" 40 $T compute-sanitizer --tool racecheck --error-exitcode 3 $HERE/bin/test_backend_ops --gtest_filter='*EncoderOps.PackedAttention/cuda'
echo "== summary (t=${SECONDS}s)"
grep -E "^(==|rc )|^\[  (FAILED|PASSED)  \]|Failure|over the bound|Which is|max \|diff\||attention_packed|matmul Q|SUMMARY|packed attention" $T | tail -60
grep -E "^(==|rc )|median|e2e|encoder |skipped" $B | cut -c1-160 | tail -90
