#!/bin/bash
# Session 24, run G (.devcarry/lead24e): cuda_gemm_probe --algos (every cuBLASLt heuristic
# algorithm of the decoder stack's GEMMs, timed), then the plain probe.
cd "$(dirname "$0")"; HERE=$PWD
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
xz -dk cuda_gemm_probe.xz; chmod +x cuda_gemm_probe
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH
nvidia-smi --query-gpu=name --format=csv,noheader | tee $OUT/algos.txt
timeout 60 ./cuda_gemm_probe --algos >> $OUT/algos.txt 2>&1; echo "rc $?" >> $OUT/algos.txt
timeout 30 ./cuda_gemm_probe > $OUT/probe.txt 2>&1; echo "rc $?" >> $OUT/probe.txt
cat $OUT/algos.txt $OUT/probe.txt
