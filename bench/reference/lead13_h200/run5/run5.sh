#!/bin/bash
# Session 13 lead, run 5: the final tree (TokenWarp refactor): the CUDA
# suites with memcheck, then step_bench with the GEMM stack off against the default, 2 rounds.
cd "$(dirname "$0")"; HERE=$PWD
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
DEADLINE=${DEADLINE:-400}
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
export INFERA_SOURCE_DIR=$(cd $HERE/../.. && pwd)
M=$INFERA_SHARED_DIR/models/qwen3-0.6b
(
  timeout 100 $B/test_cuda_backend > $R/cb.log 2>&1; echo "rc $?" >> $R/cb.log
  timeout 40 env INFERA_TEST_DEVICE=cuda-exact $B/test_model > $R/model_exact.log 2>&1; echo "rc $?" >> $R/model_exact.log
) &
(
  timeout 40 env INFERA_TEST_DEVICE=cuda $B/test_model > $R/model.log 2>&1; echo "rc $?" >> $R/model.log
  timeout 30 env INFERA_TEST_DEVICE=cuda $B/test_engine > $R/engine.log 2>&1; echo "rc $?" >> $R/engine.log
) &
wait
for f in cb model model_exact engine; do verdict $f $R/$f.log; done
grep "NMSE vs" $R/cb.log >> $T
CS=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null)
if [ -n "$CS" ]; then
  timeout 90 $CS --tool memcheck $B/test_cuda_backend --gtest_filter='*CudaGemmStack*qwen3_0_6b*' > $R/memcheck.log 2>&1; echo "rc $?" >> $R/memcheck.log
  tail -4 $R/memcheck.log >> $T
fi
echo "correctness done t=${SECONDS}s" | tee -a $T
A="--model $M --dummy-weights --device cuda --kv-dtype bf16 --prefill 512,2048 --prefill-batch 8x512 --batch 1,8,64,256 --context 512 --decode-steps 32 --repeats 5"
mkdir -p $R/json
for i in 1 2; do
  step "sb off #$i" 30 $L env INFERA_CUDA_GEMM_STACK=0 $B/step_bench $A --json $R/json/off_$i.json
  step "sb new #$i" 30 $L $B/step_bench $A --json $R/json/new_$i.json
done
echo "all done t=${SECONDS}s" | tee -a $T
tar czf $OUT/raw.tgz -C $OUT raw && rm -rf $OUT/raw
