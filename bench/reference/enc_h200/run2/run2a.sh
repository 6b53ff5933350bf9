#!/bin/bash
# Issue 11 enc, run 2a (tests; run 1 lost its machine before any output came back): the
# encoders' packed attention on the wgmma kernel (CudaOptions::packed_wgmma, off by default: the
# tests turn it on) with RoPE inside (packed_rope_inside). The stack's new test and the
# stack / shadow / paged-wgmma tests, the op harness's encoder attention on every CUDA target and
# the paged attention on the wgmma targets (the kernel file it shares), memcheck and racecheck of
# the new paths. The 64 MiB cap (the checkout is ~54 MiB) leaves out the fixtures, test_model and
# test_decision, whose ModernBERT fixtures have head_dim 16 and do not reach these kernels.
# One call: `bash .devcarry/enc/run2.sh` runs this, then run2b.sh (speed).
cd "$(dirname "$0")"; HERE=$PWD
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
DEADLINE=${DEADLINE:-300}
[ -d bin ] || tar xJf bin.tar.xz
export LD_LIBRARY_PATH=$HERE/lib:/usr/local/cuda/lib64:$LD_LIBRARY_PATH
B=$HERE/bin; R=$OUT/raw; mkdir -p $R
T=$OUT/tests.log
source "$HERE/../../scripts/device_run_lib.sh"  # left, step, verdict (run from .devcarry/NAME/)
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv > $R/gpu.txt 2>&1
step "stack + wgmma tests" 120 $R/stack.log $B/test_cuda_backend --gtest_filter='*CudaEncoderStack*:CudaShadow*:*Wgmma*'
verdict stack $R/stack.log "NMSE vs|vectors .* batch|Error|error"
step "harness encoder + paged wgmma" 120 $R/harness.log $B/test_backend_ops --gtest_filter='*EncoderOps.*/cuda*:*OpHarness.KvWriteAndPagedAttention/cuda_flash_wgmma*:*OpHarness.KvWriteAndPagedAttention/cuda'
verdict harness $R/harness.log "NMSE vs|vectors .* batch|Error|error"
CS=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null)
if [ -n "$CS" ]; then
  step "memcheck packed attention" 70 $R/memcheck.log $CS --tool memcheck --error-exitcode 3 $B/test_backend_ops --gtest_filter='*EncoderOps.PackedAttention/cuda_packed_wgmma:*EncoderOps.PackedAttention/cuda_packed_wgmma128:*EncoderOps.PackedAttention/cuda_packed_wgmma_pipe:*EncoderOps.WindowedAttention*/cuda_packed_wgmma128:*EncoderOps.RopeAttention*/cuda_packed_wgmma'
  step "memcheck rope inside" 70 $R/memcheck.log $CS --tool memcheck --error-exitcode 3 $B/test_cuda_backend --gtest_filter='*PackedWgmmaRopeInside*head_dim_64*'
  verdict memcheck $R/memcheck.log
  step "racecheck rope inside" 60 $R/racecheck.log $CS --tool racecheck --error-exitcode 3 $B/test_cuda_backend --gtest_filter='*PackedWgmmaRopeInside*head_dim_64*'
  verdict racecheck $R/racecheck.log
fi
echo "all done t=${SECONDS}s" | tee -a $T
tar czf $OUT/raw_tests.tgz -C $OUT raw && rm -rf $OUT/raw
