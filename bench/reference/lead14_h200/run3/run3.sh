#!/bin/bash
# Session 14 lead, run 3: the encoder stack's o projection as a bf16 GEMM with the residual add in
# the LayerNorm after it (new) against run 2's binary (base: the GEMM adds into x, beta 1).
# The stack tests first, then encoder_bench base / new alternating, 3 rounds.
cd "$(dirname "$0")"; HERE=$PWD
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
tar xJf bin.tar.xz; tar xJf shared.tar.xz; mkdir -p base && tar xJf base.tar.xz -C base
export LD_LIBRARY_PATH=$HERE/lib:/usr/local/cuda/lib64:$LD_LIBRARY_PATH
export INFERA_SHARED_DIR=$HERE/shared
B=$HERE/bin; REPO=$(cd $HERE/../.. && pwd)  # run from .devcarry/NAME/
timeout 120 $B/test_cuda_backend --gtest_filter='*CudaEncoderStack*:CudaShadow*' > $OUT/tests.log 2>&1; echo "rc $?" >> $OUT/tests.log
A="--device cuda --config $REPO/bench/configs/modernbert-large --batch 1x93 --batch 50x93 --batch 10x512 --batch 64x512 --runs 20 --attention-runs 0"
mkdir -p $OUT/json
for i in 1 2 3; do
  timeout 60 $HERE/base/bin/encoder_bench $A --out $OUT/json/encoder_main_$i.json >> $OUT/bench.log 2>&1; echo "rc $? base $i" >> $OUT/bench.log
  timeout 60 $B/encoder_bench $A --out $OUT/json/encoder_new_$i.json >> $OUT/bench.log 2>&1; echo "rc $? new $i" >> $OUT/bench.log
done
python3 $REPO/bench/reference/lead9_h200/encoder_ratios.py $OUT/json | tee -a $OUT/bench.log
