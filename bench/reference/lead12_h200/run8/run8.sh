#!/bin/bash
# Session 12 lead, run 8: after the post-review dedup (block_sum / warp_dot_smem / load_acquire
# in device_util.cuh for the encoder, residual-MLP and decode-stack kernels; the tests' shared
# decode_one): the CUDA suite, the model fixtures on CUDA (encoders included), the residual-MLP
# kernel's tests and the encoder / fused harness cases on the CUDA targets.
cd "$(dirname "$0")"; HERE=$PWD
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
tar xJf bin.tar.xz; tar xJf shared.tar.xz
export LD_LIBRARY_PATH=$HERE/lib:/usr/local/cuda/lib64:$LD_LIBRARY_PATH INFERA_SHARED_DIR=$HERE/shared
timeout 90 bin/test_cuda_backend > $OUT/cb.log 2>&1; echo "rc $?" >> $OUT/cb.log
timeout 60 env INFERA_CUDA_PERSISTENT=1 bin/test_cuda_backend --gtest_filter='*ResidualMlp*' > $OUT/cb_persistent.log 2>&1; echo "rc $?" >> $OUT/cb_persistent.log
timeout 60 env INFERA_TEST_DEVICE=cuda bin/test_model > $OUT/model.log 2>&1; echo "rc $?" >> $OUT/model.log
timeout 120 bin/test_backend_ops --gtest_filter='*Encoder*/cuda*:*ResidualMlp*/cuda*' > $OUT/harness.log 2>&1; echo "rc $?" >> $OUT/harness.log
grep -E "^\[  PASSED|FAILED|^rc" $OUT/*.log
