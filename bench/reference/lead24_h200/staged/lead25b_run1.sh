#!/bin/bash
# Staged at the end of session 24 (.devcarry/lead25b, git-ignored): bea1d8f +
# bench/reference/lead24_h200/staged/gemm_residual_algo.patch (CudaOptions::gemm_residual_algo:
# the decoder stack's o and down GEMMs, beta 1, through a cuBLASLt plan of the heuristic's
# algorithm number n; INFERA_CUDA_GEMM_RESIDUAL_ALGO=n). Compiled, never run. Slim builds of
# test_cuda_backend and step_bench.
#   1. CudaGemmResidualAlgo (algorithms 0..3 against cublasGemmEx, NMSE <= 1e-5; algorithm 0 must
#      take all 4 residual GEMMs), CudaGemmPlans*, the GEMM stack tests less their fixture cases;
#   2. step_bench A/B, 3 rounds: g (cublasGemmEx, as committed) / r0..r3 (algorithms 0..3) at
#      prefill 1x2048, 8x512, 4x1024 and decode b64, b256 (context 512).
# Decision: set the default to an algorithm only if every test passes and it is faster in every
# round where it matters (1x2048 first); lead25a's `cuda_gemm_probe --algos` says per shape which
# algorithm is fastest, if one number does not fit all.
# run(command="DEADLINE=300 bash .devcarry/lead25b/run1.sh", carry=[".devcarry/lead25b"]).
cd "$(dirname "$0")"; HERE=$PWD
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
DEADLINE=${DEADLINE:-300}
ROUNDS=${ROUNDS:-3}
tar xJf bin.tar.xz; tar xJf shared.tar.xz
export LD_LIBRARY_PATH=$HERE/lib:/usr/local/cuda/lib64:$LD_LIBRARY_PATH
export INFERA_SHARED_DIR=$HERE/shared CUDA_MODULE_LOADING=EAGER
B=$HERE/bin; R=$OUT/raw; mkdir -p $R/json
T=$OUT/tests.log; L=$OUT/bench.log
source "$HERE/../../scripts/device_run_lib.sh"
REPO=$(cd $HERE/../.. && pwd)
M=$INFERA_SHARED_DIR/models/qwen3-0.6b
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "gpu: $GPU" | tee -a $T $L
timeout 120 $B/test_cuda_backend --gtest_filter='CudaGemmResidualAlgo*:*CudaGemmPlans*:*CudaGemmStack*-*qwen3_micro*:*qwen3_small_untied*' > $R/tests.log 2>&1
echo "rc $?" >> $R/tests.log
verdict "residual-algorithm, plans and GEMM stack tests" $R/tests.log "NMSE"
A="--model $M --dummy-weights --device cuda --kv-dtype bf16"
for r in $(seq 1 $ROUNDS); do
  for v in g r0 r1 r2 r3; do
    case $v in g) E="INFERA_CUDA_GEMM_RESIDUAL_ALGO=-1";; r*) E="INFERA_CUDA_GEMM_RESIDUAL_ALGO=${v#r}";; esac
    step "$v round $r" 40 $L env $E $B/step_bench $A --prefill 2048 --prefill-batch 8x512 --prefill-batch 4x1024 --batch 64,256 --context 512 --decode-steps 16 --repeats 12 --json $R/json/${v}_$r.json
  done
done
python3 $REPO/bench/step_bench_ratios.py $R/json g,r0,r1,r2,r3 2>&1 | tee -a $L $T
echo "all done t=${SECONDS}s" | tee -a $T
tar czf $OUT/raw.tgz -C $OUT raw && rm -rf $OUT/raw
