#!/bin/bash
# Session 14 lead, run 4: the review's refactors (layernorm_args shared, attention-input lambda,
# flash q load if/else): the CUDA backend suite and one encoder_bench pass.
cd "$(dirname "$0")"; HERE=$PWD
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
tar xJf bin.tar.xz; tar xJf shared.tar.xz
export LD_LIBRARY_PATH=$HERE/lib:/usr/local/cuda/lib64:$LD_LIBRARY_PATH
export INFERA_SHARED_DIR=$HERE/shared
B=$HERE/bin; REPO=$(cd $HERE/../.. && pwd)
timeout 150 $B/test_cuda_backend > $OUT/tests.log 2>&1; echo "rc $?" >> $OUT/tests.log
timeout 60 $B/encoder_bench --device cuda --config $REPO/bench/configs/modernbert-large --batch 1x93 --batch 50x93 --batch 10x512 --batch 64x512 --runs 20 --attention-runs 0 > $OUT/bench.log 2>&1; echo "rc $?" >> $OUT/bench.log
