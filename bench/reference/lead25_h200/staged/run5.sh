#!/bin/bash
# run5 (last; session 24's staged lead25a / lead25b, cut): is cuBLAS's choice right for the
# residual GEMMs?
#   1. cuda_gemm_probe --algos: every cuBLASLt heuristic algorithm of the decoder stack's GEMMs
#      (o and down with beta 1 at 2048 rows ran at 480-556 TFLOP/s in one wave of 128x128 tiles,
#      q/k/v and gate/up at 620-670);
#   2. CudaOptions::gemm_residual_algo (the patch: o / down through the cuBLASLt heuristic's n-th
#      algorithm; its test ran in run1): gr (cublasGemmEx, the default) / r0 / r1, ROUNDS (default
#      2) alternating, at prefill 1x2048, 8x512, 4x1024 and decode b64, b256.
# Decision: a default algorithm only if faster in every round where it matters; compare with
# run1's probe of the residual TMA GEMM.
# run(command="DEADLINE=400 bash .devcarry/lead26/run5.sh", carry=[".devcarry/lead26"])
DEADLINE=${DEADLINE:-400}
source "$(dirname "$0")/common.sh"
ROUNDS=${ROUNDS:-2}
step "gemm probe --algos" 60 $OUT/algos.txt $B/cuda_gemm_probe --algos
for r in $(seq 1 $ROUNDS); do
  for v in gr r0 r1; do
    case $v in gr) X="INFERA_CUDA_GEMM_RESIDUAL_ALGO=-1";; r*) X="INFERA_CUDA_GEMM_RESIDUAL_ALGO=${v#r}";; esac
    step "$v round $r" 40 $L env $X $B/step_bench $A --prefill 2048 --prefill-batch 8x512 --prefill-batch 4x1024 --batch 64,256 --context 512 --decode-steps 16 --repeats 12 --json $R/json/${v}_$r.json
  done
done
python3 $REPO/bench/step_bench_ratios.py $R/json gr,r0,r1 2>&1 | tee -a $L $T
finish
