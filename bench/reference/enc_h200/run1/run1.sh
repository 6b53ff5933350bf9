#!/bin/bash
# Issue 11 enc, run 1: the encoders' packed attention on the wgmma kernel (CudaOptions::packed_wgmma)
# with RoPE inside (packed_rope_inside). Its tests (the stack's new test, the op harness's encoder
# attention on every CUDA target, the paged wgmma attention it shares code with), the CUDA suites,
# memcheck of the new paths; then encoder_bench (windowed schedule only), 5 variants alternating,
# 3 rounds, ModernBERT-large shape; eager profiles of the old and the new default; racecheck last.
cd "$(dirname "$0")"; HERE=$PWD
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
DEADLINE=${DEADLINE:-480}
tar xJf bin.tar.xz; tar xJf shared.tar.xz
export LD_LIBRARY_PATH=$HERE/lib:/usr/local/cuda/lib64:$LD_LIBRARY_PATH
export INFERA_SHARED_DIR=$HERE/shared
B=$HERE/bin; R=$OUT/raw; mkdir -p $R/json
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
verdict() { echo "== $1" >> $T; grep -E "^\[  (FAILED|PASSED)  \]|tests ran|Failure|Expected|Which is|NMSE vs|vectors .* batch|^rc |ERROR SUMMARY|RACECHECK SUMMARY" $2 | tail -60 >> $T; }
export INFERA_SOURCE_DIR=$(cd $HERE/../.. && pwd)  # run from .devcarry/NAME/
REPO=$INFERA_SOURCE_DIR
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv > $R/gpu.txt 2>&1
step "stack + wgmma tests" 120 $R/stack.log $B/test_cuda_backend --gtest_filter='*CudaEncoderStack*:CudaShadow*:*Wgmma*'
verdict stack $R/stack.log
step "harness encoder + paged wgmma" 150 $R/harness.log $B/test_backend_ops --gtest_filter='*EncoderOps.*/cuda*:*OpHarness.KvWriteAndPagedAttention/cuda_flash_wgmma*:*OpHarness.KvWriteAndPagedAttention/cuda'
verdict harness $R/harness.log
(
  timeout 110 $B/test_cuda_backend --gtest_filter='-*CudaEncoderStack*:CudaShadow*:*Wgmma*' > $R/cb.log 2>&1; echo "rc $?" >> $R/cb.log
) &
(
  timeout 50 env INFERA_TEST_DEVICE=cuda $B/test_model > $R/model.log 2>&1; echo "rc $?" >> $R/model.log
  timeout 50 env INFERA_TEST_DEVICE=cuda $B/test_decision > $R/decision.log 2>&1; echo "rc $?" >> $R/decision.log
) &
wait
for f in cb model decision; do verdict $f $R/$f.log; done
CS=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null)
if [ -n "$CS" ]; then
  step "memcheck packed attention" 90 $R/memcheck.log $CS --tool memcheck --error-exitcode 3 $B/test_backend_ops --gtest_filter='*EncoderOps.PackedAttention/cuda:*EncoderOps.PackedAttention/cuda_flash_wgmma128:*EncoderOps.PackedAttention/cuda_flash_wgmma_pipe:*EncoderOps.WindowedAttention*/cuda_flash_wgmma128'
  step "memcheck rope inside" 90 $R/memcheck.log $CS --tool memcheck --error-exitcode 3 $B/test_cuda_backend --gtest_filter='*PackedWgmmaRopeInside*head_dim_64*'
  verdict memcheck $R/memcheck.log
fi
echo "correctness done t=${SECONDS}s" | tee -a $T
A="--device cuda --config $REPO/bench/configs/modernbert-large --batch 1x93 --batch 50x93 --batch 10x512 --batch 64x512 --runs 20 --attention-runs 10 --windowed-only"
for i in 1 2 3; do
  step "mma #$i" 40 $L env INFERA_CUDA_PACKED_WGMMA=0 $B/encoder_bench $A --out $R/json/enc_mma_$i.json
  step "wgmma #$i" 40 $L $B/encoder_bench $A --out $R/json/enc_wgmma_$i.json
  step "staged #$i" 40 $L env INFERA_CUDA_PACKED_ROPE_INSIDE=0 $B/encoder_bench $A --out $R/json/enc_staged_$i.json
  step "v64 #$i" 40 $L env INFERA_CUDA_FLASH_WGMMA_VECTORS=64 $B/encoder_bench $A --out $R/json/enc_v64_$i.json
  step "v128 #$i" 40 $L env INFERA_CUDA_FLASH_WGMMA_VECTORS=128 $B/encoder_bench $A --out $R/json/enc_v128_$i.json
done
python3 $HERE/ratios.py $R/json mma wgmma staged v64 v128 | tee $OUT/ratios.txt >> $L
P="--device cuda --config $REPO/bench/configs/modernbert-large --batch 1x93 --batch 10x512 --batch 64x512 --runs 3 --attention-runs 0 --windowed-only --profile"
step "profile mma" 40 $R/profile_mma.log env INFERA_CUDA_PROFILE=1 INFERA_CUDA_PACKED_WGMMA=0 $B/encoder_bench $P
step "profile wgmma" 40 $R/profile_wgmma.log env INFERA_CUDA_PROFILE=1 $B/encoder_bench $P
if [ -n "$CS" ]; then
  step "racecheck rope inside" 60 $R/racecheck.log $CS --tool racecheck --error-exitcode 3 $B/test_cuda_backend --gtest_filter='*PackedWgmmaRopeInside*head_dim_64*'
  verdict racecheck $R/racecheck.log
fi
echo "all done t=${SECONDS}s" | tee -a $T
tar czf $OUT/raw.tgz -C $OUT raw && rm -rf $OUT/raw
