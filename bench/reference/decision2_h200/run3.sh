#!/bin/bash
# Session tooling (not part of the repo): decision2 device run 3: where the encoder's time goes
# (event profile per kernel, eager), racecheck of the quantized matmul.
cd "$(dirname "$0")"
HERE=$PWD
REPO=$(cd ../.. && pwd)
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
DEADLINE=${DEADLINE:-150}
tar xJf bin.tar.xz
export LD_LIBRARY_PATH=$HERE/lib:/usr/local/cuda/lib64:$LD_LIBRARY_PATH
T=$OUT/tests.log; B=$OUT/profile.log
left() { echo $((DEADLINE - SECONDS)); }
step() {  # step NAME SECONDS LOG cmd...
  local name=$1 secs=$2 log=$3; shift 3
  local l=$(left)
  if [ "$l" -lt 10 ]; then echo "== $name SKIPPED (deadline)" | tee -a $log; return; fi
  [ "$secs" -gt "$l" ] && secs=$l
  echo "== $name (timeout ${secs}s, t=${SECONDS}s)" | tee -a $log
  timeout $secs "$@" >> $log 2>&1; echo "rc $? ($name, t=${SECONDS}s)" | tee -a $log
}
cd $REPO
step "profile encoder large" 60 $B env INFERA_CUDA_PROFILE=1 $HERE/bin/encoder_bench --device cuda --config bench/configs/modernbert-large --batch 1x93 --batch 50x93 --batch 10x512 --runs 3 --attention-runs 0 --warmup 1 --profile --out $OUT/profile_large.json
step "racecheck quant matmul" 40 $T compute-sanitizer --tool racecheck --error-exitcode 3 $HERE/bin/test_backend_ops --gtest_filter='*QuantOps*/cuda'
echo "== summary (t=${SECONDS}s)"
grep -E "^(==|rc )|SUMMARY|PASSED|FAILED" $T
grep -E "^(==|rc )|median|profile of" $B | head -30
sed -n '/profile of the windowed forward runs, 10x512/,/forward/p' $B | head -40
