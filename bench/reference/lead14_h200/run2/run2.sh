#!/bin/bash
# Session 14 lead, run 2: eager per-kernel profiles (INFERA_CUDA_PROFILE=1) of ModernBERT-large
# with the encoder stack off and on, 1x93, 10x512 and 64x512, after the stack's tests (the
# final tree: is_bf16_matrix moved to op_checks.h).
cd "$(dirname "$0")"; HERE=$PWD
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
tar xJf bin.tar.xz; tar xJf shared.tar.xz
export LD_LIBRARY_PATH=$HERE/lib:/usr/local/cuda/lib64:$LD_LIBRARY_PATH
export INFERA_SHARED_DIR=$HERE/shared
B=$HERE/bin; REPO=$(cd $HERE/../.. && pwd)  # run from .devcarry/NAME/
timeout 120 $B/test_cuda_backend --gtest_filter='*CudaEncoderStack*:*CudaGemmStack*:CudaShadow*' > $OUT/tests.log 2>&1; echo "rc $?" >> $OUT/tests.log
P="--device cuda --config $REPO/bench/configs/modernbert-large --batch 1x93 --batch 10x512 --batch 64x512 --runs 3 --attention-runs 0 --profile"
timeout 120 env INFERA_CUDA_PROFILE=1 INFERA_CUDA_ENCODER_STACK=0 $B/encoder_bench $P > $OUT/profile_main.log 2>&1; echo "rc $?" >> $OUT/profile_main.log
timeout 120 env INFERA_CUDA_PROFILE=1 $B/encoder_bench $P > $OUT/profile_new.log 2>&1; echo "rc $?" >> $OUT/profile_new.log
