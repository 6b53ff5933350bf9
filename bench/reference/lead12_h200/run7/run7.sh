#!/bin/bash
# Session 12 lead, run 7: test_cuda_backend after residual_mlp.cu moved to mbarrier.cuh's helpers
# and the tests' shared argmax/top_margin (the CUDA suite with defaults, then with the
# residual-MLP kernel on).
cd "$(dirname "$0")"; HERE=$PWD
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
tar xJf bin.tar.xz; tar xJf shared.tar.xz
export LD_LIBRARY_PATH=$HERE/lib:/usr/local/cuda/lib64:$LD_LIBRARY_PATH INFERA_SHARED_DIR=$HERE/shared
timeout 90 bin/test_cuda_backend > $OUT/cb.log 2>&1; echo "rc $?" >> $OUT/cb.log
timeout 60 env INFERA_CUDA_PERSISTENT=1 bin/test_cuda_backend --gtest_filter='*ResidualMlp*:*DecodeStack*' > $OUT/cb_persistent.log 2>&1; echo "rc $?" >> $OUT/cb_persistent.log
grep -E "PASSED|FAILED|^rc" $OUT/cb.log $OUT/cb_persistent.log
