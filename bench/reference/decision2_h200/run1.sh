#!/bin/bash
# Session tooling (not part of the repo): decision2 device run 1. Prebuilt binaries (branch
# decision2), every step with its own timeout under a run deadline; logs and JSON under $OUT.
cd "$(dirname "$0")"
HERE=$PWD
REPO=$(cd ../.. && pwd)
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
DEADLINE=${DEADLINE:-370}
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
python3 -c "import torch, transformers; print('torch', torch.__version__, 'transformers', transformers.__version__)" 2>&1 | tee -a $T
cd $REPO
step "op harness cuda: encoder ops (dense schedule), quant matmul, matmul" 40 $T $HERE/bin/test_backend_ops --gtest_filter='*EncoderOps*/cuda*:*QuantOps*/cuda*:*OpHarness.Matmul/cuda*:BackendOptions*'
step "decision tests cuda-exact" 30 $T env INFERA_TEST_DEVICE=cuda-exact $HERE/bin/test_decision --gtest_filter='DecisionParity.*:DecisionQuant.*'
step "decision tests cuda (bf16)" 20 $T env INFERA_TEST_DEVICE=cuda $HERE/bin/test_decision --gtest_filter='DecisionParity.*:DecisionQuant.*'
step "infera decide cpu" 15 $T $HERE/bin/infera decide --model $HERE/shared/fixtures/decision-micro --request $HERE/ids_request.json --device cpu --out /tmp/decide_cpu.json
step "infera decide cuda" 15 $T $HERE/bin/infera decide --model $HERE/shared/fixtures/decision-micro --request $HERE/ids_request.json --device cuda --out /tmp/decide_cuda.json
python3 $HERE/compare_decide.py /tmp/decide_cpu.json /tmp/decide_cuda.json $HERE/shared/fixtures/decision-micro/cases.json 2>&1 | tee -a $T
step "encoder_bench cuda modernbert-large" 80 $B $HERE/bin/encoder_bench --device cuda --config bench/configs/modernbert-large --batch 1x93 --batch 50x93 --batch 10x512 --batch 64x512 --runs 50 --attention-runs 50 --warmup 3 --out $OUT/encoder_bench_large.json
step "decision_bench cuda decision-large" 110 $B $HERE/bin/decision_bench --device cuda --tokenizer tests/data/tokenizer_parity/wordpiece_bert.json --runs 200 --lever-runs 100 --warmup 3 --max-seconds 40 --out $OUT/decision_bench_large.json
step "transformers reference" 75 $B python3 $HERE/hf_decision_speed.py --config-dir bench/configs/decision-large --runs 200 --encoder-runs 50 --json $OUT/hf_decision.json
step "encoder_bench cuda mmbert-base" 40 $B $HERE/bin/encoder_bench --device cuda --config bench/configs/mmbert-base --runs 50 --attention-runs 50 --warmup 3 --out $OUT/encoder_bench_mmbert.json
step "decision_bench cuda micro real weights (quality)" 25 $B $HERE/bin/decision_bench --device cuda --config-dir $HERE/shared/fixtures/decision-micro --real-weights --tokenizer tests/data/tokenizer_parity/wordpiece_bert.json --runs 20 --lever-runs 10 --warmup 2 --out $OUT/decision_bench_micro.json
step "memcheck quant matmul + packed attention" 30 $T compute-sanitizer --tool memcheck --error-exitcode 3 $HERE/bin/test_backend_ops --gtest_filter='*QuantOps*/cuda:*EncoderOps.PackedAttention/cuda'
echo "== summary (t=${SECONDS}s)"
grep -E "^(==|rc )|^\[  (FAILED|PASSED)  \]|Failure|over the bound|Which is|max \|diff\||dense schedule|matmul Q|ERROR SUMMARY" $T | tail -50
grep -E "^(==|rc )|median|e2e|encoder |quality|skipped" $B | cut -c1-160 | tail -80
