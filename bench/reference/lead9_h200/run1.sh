#!/bin/bash
# Session 9 lead, run 1: where ModernBERT-large's CUDA forward spends its time on main (cd02e1e):
# encoder_bench --profile (per-kernel device time, eager) at 10x512 and 64x512, then a plain timing.
cd "$(dirname "$0")"; HERE=$PWD
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
tar xJf bin.tar.xz
export LD_LIBRARY_PATH=$HERE/lib:/usr/local/cuda/lib64:$LD_LIBRARY_PATH
cd $HERE/../..
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv > $OUT/gpu.txt 2>&1
EB="--device cuda --config bench/configs/modernbert-large"
timeout 60 $HERE/bin/encoder_bench $EB --batch 1x93 --batch 50x93 --batch 10x512 --batch 64x512 --runs 10 --attention-runs 0 --warmup 2 > $OUT/plain.log 2>&1
INFERA_CUDA_PROFILE=1 timeout 90 $HERE/bin/encoder_bench $EB --batch 10x512 --batch 64x512 --batch 1x93 --runs 3 --attention-runs 0 --warmup 1 --profile > $OUT/profile.log 2>&1
echo rc=$?
grep -E "median|ms" $OUT/plain.log | tail -20
