#!/bin/bash
# Session 18 lead, run 4: where prefill 1x2048 / 8x512 and decode b64 / b256 spend device time
# (INFERA_CUDA_PROFILE=1: device time per (op, kernel) of step_bench's steps), for the issue-11
# targets still missed (prefill 2048 400k, b64 40k, b256 50k). Staging as run1.sh; run
# `bash .devcarry/lead18r4/run4.sh` with carry [".devcarry/lead18r4"]. The 1x2048 table of this
# run is not usable: it was the first case, so each kernel's first (lazily loaded) launch is in
# it (24 ms of kernels a 7.8 ms step); run5.sh repeats it behind a warm-up case.
cd "$(dirname "$0")"; HERE=$PWD
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
DEADLINE=${DEADLINE:-300}
tar xJf bin.tar.xz; tar xJf shared.tar.xz
export LD_LIBRARY_PATH=$HERE/lib:/usr/local/cuda/lib64:$LD_LIBRARY_PATH
export INFERA_SHARED_DIR=$HERE/shared
B=$HERE/bin; R=$OUT/raw; mkdir -p $R/json
T=$OUT/tests.log; L=$OUT/bench.log
source "$HERE/../../scripts/device_run_lib.sh"
M=$INFERA_SHARED_DIR/models/qwen3-0.6b
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv > $R/gpu.txt 2>&1
A="--model $M --dummy-weights --device cuda --kv-dtype bf16"
step "prefill profile" 120 $L env INFERA_CUDA_PROFILE=1 $B/step_bench $A --prefill 2048 --prefill-batch 8x512 --batch 1 --context 16 --decode-steps 8 --repeats 5
step "prefill plain" 120 $L $B/step_bench $A --prefill 2048 --prefill-batch 8x512 --batch 1 --context 16 --decode-steps 8 --repeats 5 --json $R/json/prefill_plain.json
step "decode profile" 200 $L env INFERA_CUDA_PROFILE=1 $B/step_bench $A --prefill 16 --batch 64,256 --context 512 --decode-steps 16 --repeats 2
echo "all done t=${SECONDS}s" | tee -a $T
tar czf $OUT/raw.tgz -C $OUT raw && rm -rf $OUT/raw
