#!/bin/bash
# Lead 7, run 1: encoder (ModernBERT-large shape, dummy bf16) with the interleaved flash tile on/off,
# alternating rounds in one process each, same binary (main a41912b == 5c5bf24 kernels).
cd "$(dirname "$0")"; HERE=$PWD; OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
tar xJf bin.tar.xz
export LD_LIBRARY_PATH=$HERE/lib:/usr/local/cuda/lib64:$LD_LIBRARY_PATH
cd $HERE/../..
EB="--device cuda --config bench/configs/modernbert-large --batch 1x93 --batch 50x93 --batch 10x512 --batch 64x512 --runs 10 --attention-runs 0 --warmup 2"
E=$OUT/encoder_ab.log
for i in 1 2 3; do
  for v in 0 1; do
    echo "== round $i interleaved=$v (t=${SECONDS}s)" >> $E
    timeout 40 env INFERA_CUDA_FLASH_INTERLEAVED=$v $HERE/bin/encoder_bench $EB >> $E 2>&1; echo "rc $?" >> $E
  done
done
grep -E "^==|windowed min|^rc" $E
