#!/bin/bash
# Session 14 lead, run 1: the encoder stack (CudaOptions::encoder_stack). Its test and the CUDA
# suites (memcheck of the new test), then encoder_bench with the stack off against the default,
# 3 alternating rounds, ModernBERT-large shape, and one eager profile of each.
cd "$(dirname "$0")"; HERE=$PWD
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
DEADLINE=${DEADLINE:-520}
tar xJf bin.tar.xz; tar xJf shared.tar.xz
export LD_LIBRARY_PATH=$HERE/lib:/usr/local/cuda/lib64:$LD_LIBRARY_PATH
export INFERA_SHARED_DIR=$HERE/shared
B=$HERE/bin; R=$OUT/raw; mkdir -p $R
T=$OUT/tests.log; L=$OUT/bench.log
left() { echo $((DEADLINE - SECONDS)); }
step() {
  local name=$1 secs=$2 log=$3; shift 3
  local l=$(left)
  if [ "$l" -lt 5 ]; then echo "== $name SKIPPED (deadline)" | tee -a $log; return; fi
  [ "$secs" -gt "$l" ] && secs=$l
  echo "== $name (timeout ${secs}s, t=${SECONDS}s)" | tee -a $log
  timeout $secs "$@" >> $log 2>&1; echo "rc $? ($name, t=${SECONDS}s)" | tee -a $log
}
verdict() { echo "== $1" >> $T; grep -E "^\[  (FAILED|PASSED)  \]|tests ran|Failure|Expected|Which is|NMSE vs|^rc " $2 | tail -40 >> $T; }
export INFERA_SOURCE_DIR=$(cd $HERE/../.. && pwd)  # run from .devcarry/NAME/
REPO=$INFERA_SOURCE_DIR
timeout 120 $B/test_cuda_backend --gtest_filter='*CudaEncoderStack*:CudaShadow*' > $R/stack.log 2>&1; echo "rc $?" >> $R/stack.log
verdict stack $R/stack.log
(
  timeout 110 $B/test_cuda_backend --gtest_filter='-*CudaEncoderStack*:CudaShadow*' > $R/cb.log 2>&1; echo "rc $?" >> $R/cb.log
) &
(
  timeout 40 env INFERA_TEST_DEVICE=cuda $B/test_model > $R/model.log 2>&1; echo "rc $?" >> $R/model.log
  timeout 40 env INFERA_TEST_DEVICE=cuda $B/test_decision > $R/decision.log 2>&1; echo "rc $?" >> $R/decision.log
) &
wait
for f in cb model decision; do verdict $f $R/$f.log; done
CS=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null)
if [ -n "$CS" ]; then
  timeout 100 $CS --tool memcheck $B/test_cuda_backend --gtest_filter='*CudaEncoderStack*head_dim*' > $R/memcheck.log 2>&1; echo "rc $?" >> $R/memcheck.log
  tail -4 $R/memcheck.log >> $T
fi
echo "correctness done t=${SECONDS}s" | tee -a $T
A="--device cuda --config $REPO/bench/configs/modernbert-large --batch 1x93 --batch 50x93 --batch 10x512 --batch 64x512 --runs 20 --attention-runs 0"
mkdir -p $R/json
for i in 1 2 3; do
  step "enc main #$i" 60 $L env INFERA_CUDA_ENCODER_STACK=0 $B/encoder_bench $A --out $R/json/encoder_main_$i.json
  step "enc new #$i" 60 $L $B/encoder_bench $A --out $R/json/encoder_new_$i.json
done
python3 $REPO/bench/reference/lead9_h200/encoder_ratios.py $R/json | tee -a $L
P="--device cuda --config $REPO/bench/configs/modernbert-large --batch 10x512 --batch 64x512 --runs 3 --attention-runs 0 --profile"
step "profile main" 60 $R/profile_main.log env INFERA_CUDA_ENCODER_STACK=0 $B/encoder_bench $P
step "profile new" 60 $R/profile_new.log $B/encoder_bench $P
echo "all done t=${SECONDS}s" | tee -a $T
tar czf $OUT/raw.tgz -C $OUT raw && rm -rf $OUT/raw
