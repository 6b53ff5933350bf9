#!/bin/bash
# Session 18 lead, run 5: run 4's prefill profile again with every module loaded first
# (CUDA_MODULE_LOADING=EAGER and a 512-token warm-up case ahead of the profiled ones), so the
# 1x2048 table holds steady-state kernel times. Staging as run1.sh (step_bench only); run
# `bash .devcarry/lead18r5/run5.sh` with carry [".devcarry/lead18r5"].
cd "$(dirname "$0")"; HERE=$PWD
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
DEADLINE=${DEADLINE:-200}
tar xJf bin.tar.xz; tar xJf shared.tar.xz
export LD_LIBRARY_PATH=$HERE/lib:/usr/local/cuda/lib64:$LD_LIBRARY_PATH
export INFERA_SHARED_DIR=$HERE/shared CUDA_MODULE_LOADING=EAGER
B=$HERE/bin; T=$OUT/tests.log; L=$OUT/bench.log
source "$HERE/../../scripts/device_run_lib.sh"
M=$INFERA_SHARED_DIR/models/qwen3-0.6b
A="--model $M --dummy-weights --device cuda --kv-dtype bf16"
step "prefill profile" 120 $L env INFERA_CUDA_PROFILE=1 $B/step_bench $A --prefill 512,2048 --prefill-batch 8x512 --batch 1 --context 16 --decode-steps 8 --repeats 8
echo "all done t=${SECONDS}s" | tee -a $T
